import { randomBytes } from 'node:crypto';
import type { AuthorizationConfig } from '../config/types.ts';
import { passwordChecksTotal } from '../observe/metrics.ts';
import {
  type Authenticator,
  type AuthFailureReason,
  authorizationCredentials,
  subjectHeaderValue,
} from './authenticator.ts';
import { matchesDigest, sha256 } from './compare.ts';
import {
  costOf,
  decoyHash,
  FairCheckGate,
  hashingThreads,
  PasswordChecksOverloaded,
  parseStoredHash,
  type StoredHash,
  suspectThreads,
  verifyPassword,
} from './password.ts';

/** How long a hash check's answer is reused for the same `user:password` (successes / failures). */
const SUCCESS_TTL_MS = 60_000;
const FAILURE_TTL_MS = 10_000;
const MAX_CACHED_CHECKS = 1_000;
/** A client with this many failed hash checks within SUSPECT_WINDOW_MS waits behind the others. */
const SUSPECT_AFTER_FAILURES = 3;
const SUSPECT_WINDOW_MS = 60_000;
const MAX_TRACKED_CLIENTS = 10_000;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

interface BasicUserCheck {
  subject: string;
  /** sha256 of the plain password, or null when the user has a hash. */
  passwordDigest: Buffer | null;
  hash: StoredHash | null;
}

/**
 * HTTP Basic against a policy's `users` (plain passwords or scrypt hashes).
 *
 * Timing tells nothing about which users exist or how their password is stored: in a policy with any
 * hashed user, every check (plain user, hashed user, unknown user) runs one scrypt per distinct cost
 * found in the policy — the real one where the user's hash has that cost, a decoy elsewhere — plus the
 * same digest compare. A policy of plain passwords only stays a cheap constant-time compare.
 * Hash checks queue behind the policy's own gate (fair between clients), then the process-wide one
 * (see docs/security.md); the same credential arriving while it is being checked waits for that check
 * instead of queueing its own, and answers are cached briefly, keyed by a digest of the credential,
 * never the credential. auth/methods.ts keeps one authenticator per distinct user list, so the cache
 * and the queue survive routing-table rebuilds (reloads, endpoint changes) that leave the policy alone.
 */
export function createBasicAuthenticator(
  policy: AuthorizationConfig,
  options: { nowMs?: () => number; verify?: typeof verifyPassword } = {},
): Authenticator {
  const nowMs = options.nowMs ?? Date.now;
  const verify = options.verify ?? verifyPassword;
  const users = new Map<string, BasicUserCheck>();
  for (const user of policy.users) {
    users.set(user.username, {
      subject: subjectHeaderValue(user.username),
      passwordDigest: user.password === null ? null : sha256(user.password),
      hash: user.passwordHash === null ? null : parseStoredHash(user.passwordHash),
    });
  }
  // One decoy per distinct cost: what a check spends on every cost the user's own hash does not have.
  const decoys = new Map<string, StoredHash>();
  for (const user of users.values()) {
    if (user.hash && !decoys.has(costOf(user.hash))) decoys.set(costOf(user.hash), decoyHash(user.hash));
  }
  const anyHashed = decoys.size > 0;
  const dummyDigest = sha256(randomBytes(32));
  const checks = new Map<string, { subject: string | null; until: number }>();
  /** Recent failed hash checks by client IP (docs/security.md "Password floods"). */
  const failuresByClient = new Map<string, { count: number; until: number }>();
  const isSuspect = (client: string): boolean => {
    const record = failuresByClient.get(client);
    return record !== undefined && record.until > nowMs() && record.count >= SUSPECT_AFTER_FAILURES;
  };
  const recordFailure = (client: string): void => {
    const now = nowMs();
    let record = failuresByClient.get(client);
    if (record === undefined || record.until <= now) {
      if (failuresByClient.size >= MAX_TRACKED_CLIENTS) {
        failuresByClient.delete(failuresByClient.keys().next().value as string);
      }
      record = { count: 0, until: now + SUSPECT_WINDOW_MS };
      failuresByClient.set(client, record);
    }
    record.count++;
  };
  const policyGate = new FairCheckGate({ isSuspect });
  /** Checks running or queued, by credential digest: the same credential is hashed once at a time. */
  const inFlight = new Map<string, Promise<string | null | 'overloaded'>>();

  function remember(cacheKey: string, subject: string | null): void {
    if (checks.size >= MAX_CACHED_CHECKS) {
      const oldest = checks.keys().next();
      if (!oldest.done) checks.delete(oldest.value);
    }
    checks.set(cacheKey, { subject, until: nowMs() + (subject === null ? FAILURE_TTL_MS : SUCCESS_TTL_MS) });
  }

  /** The same work whoever `user` is: the digest compare, then one scrypt per cost of the policy. */
  async function uniformCheck(password: string, user: BasicUserCheck | undefined): Promise<boolean> {
    const plainMatch = matchesDigest(password, user?.passwordDigest ?? dummyDigest);
    let hashMatch = false;
    for (const [cost, decoy] of decoys) {
      const own = user?.hash && costOf(user.hash) === cost ? user.hash : null;
      const matched = await verify(password, own ?? decoy);
      if (own) hashMatch = matched;
    }
    if (user === undefined) return false;
    return user.hash ? hashMatch : plainMatch;
  }

  function checkHashed(
    client: string,
    cacheKey: string,
    password: string,
    user: BasicUserCheck | undefined,
  ): Promise<string | null | 'overloaded'> {
    let check = inFlight.get(cacheKey);
    if (check === undefined) {
      check = runCheck(client, cacheKey, password, user).finally(() => inFlight.delete(cacheKey));
      inFlight.set(cacheKey, check);
    }
    return check;
  }

  async function runCheck(
    client: string,
    cacheKey: string,
    password: string,
    user: BasicUserCheck | undefined,
  ): Promise<string | null | 'overloaded'> {
    let ok: boolean;
    try {
      const hash = () =>
        hashingThreads.run(() => {
          passwordChecksTotal.inc();
          return uniformCheck(password, user);
        });
      ok = await policyGate.run(client, () => (isSuspect(client) ? suspectThreads.run(hash) : hash()));
    } catch (error) {
      if (error instanceof PasswordChecksOverloaded) return 'overloaded';
      throw error;
    }
    const subject = ok && user ? user.subject : null;
    if (subject === null) recordFailure(client);
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

    const accept = (subject: string | null | 'overloaded'): AuthFailureReason | null => {
      if (subject === 'overloaded') return 'auth_overloaded';
      if (subject === null) return 'invalid_credentials';
      request.subject = subject;
      request.consumedHeaders.push('authorization');
      return null;
    };

    if (!anyHashed) {
      const matches = matchesDigest(password, user?.passwordDigest ?? dummyDigest);
      return accept(matches && user ? user.subject : null);
    }
    const cacheKey = sha256(decoded).toString('base64');
    const cached = checks.get(cacheKey);
    if (cached !== undefined && cached.until > nowMs()) return accept(cached.subject);
    return checkHashed(request.clientIp, cacheKey, password, user).then(accept);
  };
}
