import { decodeJwt, errors, jwtVerify } from 'jose';
import type { ExternalIssuer } from '../config/types.ts';
import type { Clock } from './clock.ts';
import type { KeySet } from './jwks.ts';
import type { TokenChecker } from './jwt.ts';
import {
  CLOCK_SKEW_SECONDS,
  EXPIRED,
  INVALID,
  isValidOwner,
  MAX_TOKEN_LENGTH,
  TOKEN_ISSUER,
  type TokenCheck,
  type VerifiedToken,
} from './tokens.ts';

/**
 * Tokens from an external OpenID issuer (docs/tokens.md#external-issuers): signature by one of the
 * issuer's published keys, with an asymmetric algorithm only — an HMAC algorithm would let anyone
 * who downloaded the public key sign tokens — `iss`, `aud`, `exp` and `nbf` checked with the same
 * small skew as our own tokens.
 */
export const EXTERNAL_ALGORITHMS = ['RS256', 'ES256', 'EdDSA', 'Ed25519'];

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface ExternalCheckerOptions {
  now: Clock;
  /** Most verified tokens remembered at once. Default 10 000. */
  cacheEntries?: number;
}

/**
 * A checker for one issuer, with a bounded cache of verified tokens (kept until exp + skew, so the
 * cache changes only the cost of an answer, never the answer; revocation and scope are checked on
 * every request by the authenticator, after the cache).
 */
export function createExternalChecker(
  issuer: ExternalIssuer,
  keys: KeySet,
  options: ExternalCheckerOptions,
): TokenChecker {
  const maxEntries = options.cacheEntries ?? 10_000;
  const verified = new Map<string, VerifiedToken>();
  // Verifications made with the keys of this generation; a refresh that changed the keys empties it.
  let cachedGeneration = keys.generation();

  async function verify(token: string): Promise<TokenCheck> {
    const generation = keys.generation();
    let payload: Awaited<ReturnType<typeof jwtVerify>>['payload'];
    try {
      ({ payload } = await jwtVerify(token, keys, {
        algorithms: EXTERNAL_ALGORITHMS,
        issuer: issuer.issuer,
        audience: issuer.audience,
        clockTolerance: CLOCK_SKEW_SECONDS,
        currentDate: new Date(options.now() * 1000),
        requiredClaims: ['exp'],
      }));
    } catch (error) {
      return error instanceof errors.JWTExpired ? EXPIRED : INVALID;
    }
    const subject = payload[issuer.subjectClaim];
    if (!isValidOwner(subject) || typeof payload.exp !== 'number') return INVALID;
    const result: VerifiedToken = Object.freeze({
      ok: true,
      owner: subject,
      expiresAt: payload.exp,
      jti: typeof payload.jti === 'string' ? payload.jti : null,
      // An OpenID `scope` claim means OAuth scopes, not Tollgate's host/path scopes: never read.
      scope: null,
    });
    if (verified.size >= maxEntries) {
      const oldest = verified.keys().next();
      if (!oldest.done) verified.delete(oldest.value);
    }
    // Keys changed while this one was verified: it must not outlive them in the cache.
    if (generation === keys.generation()) verified.set(token, result);
    return result;
  }

  return (token) => {
    keys.refreshIfDue();
    if (keys.generation() !== cachedGeneration) {
      verified.clear();
      cachedGeneration = keys.generation();
    }
    const cached = verified.get(token);
    if (cached !== undefined) {
      if (options.now() < cached.expiresAt + CLOCK_SKEW_SECONDS) return cached;
      verified.delete(token);
      return EXPIRED;
    }
    if (token.length > MAX_TOKEN_LENGTH * 4 || !COMPACT_JWS.test(token)) return INVALID;
    return verify(token);
  };
}

/**
 * One checker for a policy that trusts several issuers: the token's unverified `iss` only picks which
 * issuer's rules and keys to verify it with; a token naming an issuer the policy does not trust is
 * refused without any verification.
 */
export function createIssuerDispatch(checkers: ReadonlyMap<string, TokenChecker>): TokenChecker {
  if (checkers.size === 1) return [...checkers.values()][0] as TokenChecker;
  return (token) => {
    let iss: unknown;
    try {
      iss = decodeJwt(token).iss;
    } catch {
      return INVALID;
    }
    const checker = typeof iss === 'string' ? checkers.get(iss) : undefined;
    return checker === undefined ? INVALID : checker(token);
  };
}

export { TOKEN_ISSUER };
