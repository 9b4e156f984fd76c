import { randomBytes } from 'node:crypto';
import type { AuthorizationConfig } from '../config/types.ts';
import {
  type Authenticator,
  type AuthFailureReason,
  authorizationCredentials,
  subjectHeaderValue,
} from './authenticator.ts';
import { matchesDigest, sha256 } from './compare.ts';
import { hashPassword, type PasswordHash, parsePasswordHash, verifyPassword } from './password.ts';

/** How long a hash check's answer is reused for the same `user:password` (successes / failures). */
const SUCCESS_TTL_MS = 60_000;
const FAILURE_TTL_MS = 10_000;
const MAX_CACHED_CHECKS = 1_000;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

interface BasicUserCheck {
  subject: string;
  /** sha256 of the plain password, or null when the user has a hash. */
  passwordDigest: Buffer | null;
  hash: PasswordHash | null;
}

// A dummy hash to spend the same scrypt time on unknown users as on known ones; made once, lazily.
let dummyHash: Promise<PasswordHash> | null = null;
function dummyPasswordHash(): Promise<PasswordHash> {
  dummyHash ??= hashPassword(randomBytes(16).toString('hex')).then(
    (hash) => parsePasswordHash(hash) as PasswordHash,
  );
  return dummyHash;
}

/**
 * HTTP Basic against a policy's `users` (plain passwords or scrypt hashes). Timing does not tell a
 * known user from an unknown one: an unknown user is checked against a dummy secret of the same kind.
 * Hash checks are async (thread pool) and their answers are cached briefly, keyed by a digest of the
 * credential, never the credential itself.
 */
export function createBasicAuthenticator(
  policy: AuthorizationConfig,
  options: { nowMs?: () => number } = {},
): Authenticator {
  const nowMs = options.nowMs ?? Date.now;
  const users = new Map<string, BasicUserCheck>();
  for (const user of policy.users) {
    users.set(user.username, {
      subject: subjectHeaderValue(user.username),
      passwordDigest: user.password === null ? null : sha256(user.password),
      hash: user.passwordHash === null ? null : parsePasswordHash(user.passwordHash),
    });
  }
  const anyHashed = [...users.values()].some((user) => user.passwordDigest === null);
  const dummyDigest = sha256(randomBytes(32));
  const checks = new Map<string, { subject: string | null; until: number }>();

  function remember(cacheKey: string, subject: string | null): void {
    if (checks.size >= MAX_CACHED_CHECKS) {
      const oldest = checks.keys().next();
      if (!oldest.done) checks.delete(oldest.value);
    }
    checks.set(cacheKey, { subject, until: nowMs() + (subject === null ? FAILURE_TTL_MS : SUCCESS_TTL_MS) });
  }

  async function checkHash(
    cacheKey: string,
    password: string,
    user: BasicUserCheck | undefined,
  ): Promise<string | null> {
    const ok = await verifyPassword(password, user?.hash ?? (await dummyPasswordHash()));
    const subject = ok && user ? user.subject : null;
    remember(cacheKey, subject);
    return subject;
  }

  return (request) => {
    const encoded = authorizationCredentials(request.req.headers.authorization, 'basic');
    if (encoded === null) return 'missing_credentials';
    if (!BASE64.test(encoded)) return 'invalid_credentials';
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon === -1) return 'invalid_credentials';
    const username = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    const user = users.get(username);

    const accept = (subject: string | null): AuthFailureReason | null => {
      if (subject === null) return 'invalid_credentials';
      request.subject = subject;
      request.consumedHeaders.push('authorization');
      return null;
    };

    if (user?.passwordDigest != null || (user === undefined && !anyHashed)) {
      const matches = matchesDigest(password, user?.passwordDigest ?? dummyDigest);
      return accept(matches && user ? user.subject : null);
    }
    const cacheKey = sha256(decoded).toString('base64');
    const cached = checks.get(cacheKey);
    if (cached !== undefined && cached.until > nowMs()) return accept(cached.subject);
    return checkHash(cacheKey, password, user).then(accept);
  };
}
