import { createSecretKey, hkdfSync, type KeyObject, randomUUID } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
import { type Clock, systemClock } from './clock.ts';
import { formatScopeEntry, isWellFormedUnicode, parseScope, type ScopeEntry } from './scope.ts';

/**
 * Issuing and verifying Tollgate JWTs (docs/tokens.md): JWS compact, HS256 only, signed with a key
 * derived from the masterkey, so every replica holding the same masterkey accepts every other's tokens
 * and a leaked token never exposes the masterkey itself.
 */

export const TOKEN_ISSUER = 'tollgate';
/** Leeway on exp/nbf for clocks of different replicas that disagree a little. */
export const CLOCK_SKEW_SECONDS = 30;
/** Our tokens are ~300 bytes; anything much longer is not one of them and is refused unparsed. */
export const MAX_TOKEN_LENGTH = 4096;
export const MAX_OWNER_LENGTH = 256;
/** Fixed HKDF info: changing it invalidates every token in circulation. */
const KEY_INFO = 'tollgate jwt hs256';
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

/** HKDF-SHA256 of the masterkey: the HMAC key tokens are signed with (never the raw masterkey). */
export function deriveSigningKey(masterkey: string): KeyObject {
  return createSecretKey(Buffer.from(hkdfSync('sha256', masterkey, '', KEY_INFO, 32)));
}

/**
 * An owner the token API accepts: 1–256 characters of well-formed Unicode (a lone surrogate cannot be
 * encoded as UTF-8 for the subject header), no control characters (C0, DEL, C1).
 */
export function isValidOwner(owner: unknown): owner is string {
  return (
    typeof owner === 'string' &&
    owner.length > 0 &&
    owner.length <= MAX_OWNER_LENGTH &&
    isWellFormedUnicode(owner) &&
    !CONTROL_CHARACTERS.test(owner)
  );
}

export interface IssuedToken {
  token: string;
  owner: string;
  /** Unix seconds. */
  issuedAt: number;
  /** Unix seconds. */
  expiresAt: number;
  jti: string;
  /** The scope in canonical form, as signed; null for an unscoped token. */
  scope: string[] | null;
}

/**
 * Signs a token for `owner`, valid `validMinutes` from now (claims in docs/tokens.md). A scoped token
 * carries its scope as the `scope` claim, inside the signature, so every replica enforces it.
 */
export async function issueToken(
  key: KeyObject,
  options: { owner: string; validMinutes: number; scope?: readonly ScopeEntry[] | null; now?: Clock },
): Promise<IssuedToken> {
  const issuedAt = Math.floor((options.now ?? systemClock)());
  const expiresAt = issuedAt + options.validMinutes * 60;
  const jti = randomUUID();
  const scope = options.scope ? options.scope.map(formatScopeEntry) : null;
  const token = await new SignJWT(scope ? { owner: options.owner, scope } : { owner: options.owner })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(TOKEN_ISSUER)
    .setSubject(options.owner)
    .setIssuedAt(issuedAt)
    .setNotBefore(issuedAt)
    .setExpirationTime(expiresAt)
    .setJti(jti)
    .sign(key);
  return { token, owner: options.owner, issuedAt, expiresAt, jti, scope };
}

export interface VerifiedToken {
  readonly ok: true;
  /** The subject sent upstream: our `owner` claim, or an external issuer's subject claim. */
  readonly owner: string;
  /** The token's exp, Unix seconds. */
  readonly expiresAt: number;
  /** The `jti` claim, or null when the token has none (external issuers may omit it). */
  readonly jti: string | null;
  /** Where the token may be used; null: wherever its route accepts it. */
  readonly scope: readonly ScopeEntry[] | null;
  /** An external issuer's claims, for the allow rules (auth/allow-rules); absent for our own tokens. */
  readonly claims?: Readonly<Record<string, unknown>>;
}

/**
 * Why an external issuer's token was refused, for the `auth_refused` log line only (the answer stays
 * the generic `token_invalid`): docs/tokens.md#when-an-issuers-tokens-are-refused.
 */
export type TokenRefusalDetail =
  | 'wrong_audience'
  | 'wrong_issuer'
  | 'untrusted_issuer'
  | 'unknown_kid'
  | 'bad_signature'
  | 'algorithm_not_allowed'
  | 'not_yet_valid'
  | 'missing_claim'
  | 'bad_subject'
  | 'keys_unavailable'
  | 'malformed'
  /** An OpenID route's Bearer token that is not an ID token (`typ` other than JWT). */
  | 'wrong_type'
  /** An OpenID route's Bearer token for several audiences whose `azp` is not the client_id. */
  | 'wrong_authorized_party';

export type TokenCheck =
  | VerifiedToken
  | {
      readonly ok: false;
      readonly reason: 'token_expired' | 'token_invalid';
      readonly detail?: TokenRefusalDetail;
    };

export const INVALID: TokenCheck = Object.freeze({ ok: false, reason: 'token_invalid' });
export const EXPIRED: TokenCheck = Object.freeze({ ok: false, reason: 'token_expired' });

export interface TokenVerifier {
  /** The masterkey this verifier was built for (callers rebuild when it changes). */
  readonly masterkey: string;
  /**
   * Checks a token. Answers synchronously when the token is in the cache of verified tokens (the
   * common case: clients reuse a token), otherwise returns a Promise (jose's verify is async).
   */
  check(token: string): TokenCheck | Promise<TokenCheck>;
  /** Number of cached verified tokens (for tests). */
  cacheSize(): number;
}

export interface TokenVerifierOptions {
  now?: Clock;
  /** Most verified tokens remembered at once; the oldest entry goes first. Default 10 000. */
  cacheEntries?: number;
}

/**
 * A verifier for one masterkey with a bounded cache of verified tokens. A cached token stays valid
 * exactly as long as a fresh verification would accept it (until exp + skew), so caching never
 * changes an answer, only its cost. Only successes are cached: refusals are cheap to repeat and
 * caching them would let garbage evict good entries.
 */
export function createTokenVerifier(masterkey: string, options: TokenVerifierOptions = {}): TokenVerifier {
  const key = deriveSigningKey(masterkey);
  const now = options.now ?? systemClock;
  const maxEntries = options.cacheEntries ?? 10_000;
  // Insertion-ordered Map as a FIFO: enough to bound memory; reused tokens are re-added once expired.
  const verified = new Map<string, VerifiedToken>();

  async function verify(token: string): Promise<TokenCheck> {
    let payload: Awaited<ReturnType<typeof jwtVerify>>['payload'];
    try {
      ({ payload } = await jwtVerify(token, key, {
        algorithms: ['HS256'],
        issuer: TOKEN_ISSUER,
        typ: 'JWT',
        clockTolerance: CLOCK_SKEW_SECONDS,
        currentDate: new Date(now() * 1000),
        requiredClaims: ['exp', 'nbf', 'iat', 'sub'],
      }));
    } catch (error) {
      return error instanceof errors.JWTExpired ? EXPIRED : INVALID;
    }
    const { owner, exp, jti } = payload;
    if (!isValidOwner(owner) || typeof exp !== 'number') return INVALID;
    if (jti !== undefined && typeof jti !== 'string') return INVALID;
    let scope: readonly ScopeEntry[] | null = null;
    if (payload.scope !== undefined) {
      const parsed = parseScope(payload.scope);
      if (!parsed.ok) return INVALID;
      scope = parsed.scope;
    }
    const result: VerifiedToken = Object.freeze({ ok: true, owner, expiresAt: exp, jti: jti ?? null, scope });
    if (verified.size >= maxEntries) {
      const oldest = verified.keys().next();
      if (!oldest.done) verified.delete(oldest.value);
    }
    verified.set(token, result);
    return result;
  }

  return {
    masterkey,
    check(token) {
      const cached = verified.get(token);
      if (cached !== undefined) {
        if (now() < cached.expiresAt + CLOCK_SKEW_SECONDS) return cached;
        verified.delete(token);
        return EXPIRED;
      }
      if (token.length > MAX_TOKEN_LENGTH || !COMPACT_JWS.test(token)) return INVALID;
      return verify(token);
    },
    cacheSize: () => verified.size,
  };
}
