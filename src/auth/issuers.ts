import { decodeJwt, errors, jwtVerify } from 'jose';
import type { ExternalIssuer } from '../config/types.ts';
import type { Clock } from './clock.ts';
import type { KeySet } from './jwks.ts';
import type { TokenChecker } from './jwt.ts';
import {
  CLOCK_SKEW_SECONDS,
  EXPIRED,
  isValidOwner,
  MAX_TOKEN_LENGTH,
  TOKEN_ISSUER,
  type TokenCheck,
  type TokenRefusalDetail,
  type VerifiedToken,
} from './tokens.ts';

/** One frozen refusal per detail, so a refusal allocates nothing. */
const REFUSALS = new Map<TokenRefusalDetail, TokenCheck>();
export function invalidBecause(detail: TokenRefusalDetail): TokenCheck {
  let refusal = REFUSALS.get(detail);
  if (refusal === undefined) {
    refusal = Object.freeze({ ok: false, reason: 'token_invalid', detail });
    REFUSALS.set(detail, refusal);
  }
  return refusal;
}

/** What jose's error says about why a token failed, in the words of the log (never the token). */
function refusalOf(error: unknown): TokenCheck {
  if (error instanceof errors.JWTExpired) return EXPIRED;
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return invalidBecause('wrong_audience');
    if (error.claim === 'iss') return invalidBecause('wrong_issuer');
    if (error.claim === 'nbf' && error.reason === 'check_failed') return invalidBecause('not_yet_valid');
    return invalidBecause('missing_claim');
  }
  if (error instanceof errors.JWKSNoMatchingKey) return invalidBecause('unknown_kid');
  if (error instanceof errors.JWSSignatureVerificationFailed) return invalidBecause('bad_signature');
  if (error instanceof errors.JOSEAlgNotAllowed) return invalidBecause('algorithm_not_allowed');
  if (error instanceof errors.JWKSTimeout || !(error instanceof errors.JOSEError)) {
    // The key set could not be had (issuer unreachable, no keys yet): not the token's fault.
    return invalidBecause('keys_unavailable');
  }
  return invalidBecause('malformed');
}

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
  /**
   * Set on an OpenID route (the provider's client_id): the Bearer token must be an ID token for this
   * client, see idTokenRefusal.
   */
  idTokenFor?: string;
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
    let header: Awaited<ReturnType<typeof jwtVerify>>['protectedHeader'];
    try {
      ({ payload, protectedHeader: header } = await jwtVerify(token, keys, {
        algorithms: EXTERNAL_ALGORITHMS,
        issuer: issuer.issuer,
        audience: issuer.audience,
        clockTolerance: CLOCK_SKEW_SECONDS,
        currentDate: new Date(options.now() * 1000),
        requiredClaims: ['exp'],
      }));
    } catch (error) {
      return refusalOf(error);
    }
    if (options.idTokenFor !== undefined) {
      const refusal = idTokenRefusal(header.typ, payload.aud, payload.azp, options.idTokenFor);
      if (refusal !== null) return invalidBecause(refusal);
    }
    const subject = payload[issuer.subjectClaim];
    if (!isValidOwner(subject)) return invalidBecause('bad_subject');
    if (typeof payload.exp !== 'number') return invalidBecause('missing_claim');
    const result: VerifiedToken = Object.freeze({
      ok: true,
      owner: subject,
      expiresAt: payload.exp,
      jti: typeof payload.jti === 'string' ? payload.jti : null,
      // An OpenID `scope` claim means OAuth scopes, not Tollgate's host/path scopes: never read.
      scope: null,
      claims: payload,
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
    if (token.length > MAX_TOKEN_LENGTH * 4 || !COMPACT_JWS.test(token)) return invalidBecause('malformed');
    return verify(token);
  };
}

/**
 * Why a verified token is not an ID token for `clientId`, or null when it is
 * (docs/authentication.md#openid-connect): `typ` absent or `JWT` (an access token `at+jwt`, a logout
 * token `logout+jwt` and other typed tokens are signed by the same keys, for other uses), and OpenID
 * Core's `azp` rule: present, it must be the client_id; with several audiences it must be present.
 */
export function idTokenRefusal(
  typ: unknown,
  aud: unknown,
  azp: unknown,
  clientId: string,
): TokenRefusalDetail | null {
  if (typ !== undefined && (typeof typ !== 'string' || !ID_TOKEN_TYPES.has(typ.toLowerCase())))
    return 'wrong_type';
  if (azp !== undefined && azp !== clientId) return 'wrong_authorized_party';
  if (Array.isArray(aud) && aud.length > 1 && azp === undefined) return 'wrong_authorized_party';
  return null;
}

/** `typ` values of a plain JWT (RFC 7519 §5.1: a media type, compared without case, `application/` optional). */
const ID_TOKEN_TYPES = new Set(['jwt', 'application/jwt']);

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
      return invalidBecause('malformed');
    }
    const checker = typeof iss === 'string' ? checkers.get(iss) : undefined;
    return checker === undefined ? invalidBecause('untrusted_issuer') : checker(token);
  };
}

export { TOKEN_ISSUER };
