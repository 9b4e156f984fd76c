import type { JWTVerifyGetKey } from 'jose';
import { authFailuresTotal } from '../admin/metrics.ts';
import type { AuthMethod, AuthorizationConfig, ExternalIssuer, JwtSettings } from '../config/types.ts';
import { sendError } from '../errors.ts';
import { writeLocalResponse } from '../local-response.ts';
import type { Logger } from '../log.ts';
import type { ProxyRequest, Stage } from '../proxy/context.ts';
import { createApiKeyAuthenticator } from './apikey.ts';
import type { Authenticator, AuthFailureReason, AuthOutcome, AuthRedirect } from './authenticator.ts';
import { createBasicAuthenticator } from './basic.ts';
import { createBrowserLinks } from './browser-links.ts';
import { type Clock, systemClock } from './clock.ts';
import { createExternalChecker, createIssuerDispatch } from './issuers.ts';
import { createFileKeySet, createRemoteKeySet } from './jwks.ts';
import { createJwtAuthenticator, type TokenChecker } from './jwt.ts';
import { createRevocationList, type RevocationList } from './revocation.ts';
import { removeTokenCarriers } from './token-carriers.ts';
import { createTokenVerifier, INVALID, TOKEN_ISSUER, type TokenVerifier } from './tokens.ts';

/** A jwt policy without settings: Tollgate's own tokens, links exchanged for a cookie. */
const DEFAULT_JWT: JwtSettings = Object.freeze({ acceptTollgate: true, external: [], browserLinks: true });

/** `WWW-Authenticate` per method (BEHAVIOUR.md §5); RFC 6750 §3.1: no error code when nothing was sent. */
const CHALLENGES: Record<AuthMethod, (reason: AuthFailureReason) => string> = {
  basic: () => 'Basic realm="tollgate", charset="UTF-8"',
  apikey: () => 'ApiKey realm="tollgate", header="x-api-key"',
  jwt: (reason) =>
    reason === 'missing_credentials'
      ? 'Bearer realm="tollgate"'
      : reason === 'token_out_of_scope'
        ? 'Bearer realm="tollgate", error="insufficient_scope"'
        : 'Bearer realm="tollgate", error="invalid_token"',
};

export interface AuthStageDeps {
  /** main.yaml `token_param`. */
  tokenParam: string;
  /** The current masterkey (it may change on reload), or null when none is configured. */
  masterkey: () => string | null;
  logger: Logger;
  /** Token clock; defaults to the process clock (see auth/clock). */
  now?: Clock;
  /** Revoked token ids (revoked_tokens_file); none when absent. */
  revocations?: RevocationList;
}

/**
 * The authentication stage: applies the route's effective policy (already resolved at compile time,
 * global wins). Authenticators are built once per policy object, so a reload's new policies get fresh
 * ones (and fresh caches) while in-flight requests finish with the old. Fails closed: an unexpected
 * error answers 500, never lets the request through.
 */
export function createAuthStage(deps: AuthStageDeps): Stage {
  const now = deps.now ?? systemClock;
  const revocations = deps.revocations ?? createRevocationList();
  // The link cookie is named after the query parameter it replaces.
  const cookieName = deps.tokenParam;
  const browserLinks = createBrowserLinks({ cookieName, now });
  const authenticators = new WeakMap<AuthorizationConfig, Authenticator>();
  let verifier: TokenVerifier | null = null;
  const currentVerifier = (): TokenVerifier | null => {
    const masterkey = deps.masterkey();
    if (masterkey === null) return null;
    if (verifier?.masterkey !== masterkey) verifier = createTokenVerifier(masterkey, { now });
    return verifier;
  };
  // Every policy shares one verifier (one key, one cache) for Tollgate's own tokens.
  const tollgateChecker: TokenChecker = (token) => currentVerifier()?.check(token) ?? INVALID;
  // Remote key sets outlive reloads (a reload must not refetch every issuer's keys).
  const remoteKeySets = new Map<string, JWTVerifyGetKey>();

  const keysFor = (issuer: ExternalIssuer): JWTVerifyGetKey | null => {
    if (issuer.jwksUri !== null) {
      let keys = remoteKeySets.get(issuer.jwksUri);
      if (keys === undefined) {
        keys = createRemoteKeySet(issuer.jwksUri, { issuer: issuer.issuer, logger: deps.logger });
        remoteKeySets.set(issuer.jwksUri, keys);
      }
      return keys;
    }
    try {
      return createFileKeySet(issuer.jwksFile as string);
    } catch (error) {
      // Fails closed: this issuer's tokens are refused until a reload brings a readable key set.
      deps.logger.error(
        {
          event: 'jwks_file_unreadable',
          issuer: issuer.issuer,
          file: issuer.jwksFile,
          err: (error as Error).message,
        },
        'cannot read the key set file; tokens of this issuer are refused',
      );
      return null;
    }
  };

  const jwtAuthenticator = (settings: JwtSettings): Authenticator => {
    const checkers = new Map<string, TokenChecker>();
    if (settings.acceptTollgate) checkers.set(TOKEN_ISSUER, tollgateChecker);
    for (const issuer of settings.external) {
      const keys = keysFor(issuer);
      checkers.set(
        issuer.issuer,
        keys === null ? () => INVALID : createExternalChecker(issuer, keys, { now }),
      );
    }
    const checker = createIssuerDispatch(checkers);
    const onlyTollgate = checkers.size === 1 && settings.acceptTollgate;
    return createJwtAuthenticator({
      // No masterkey: Tollgate tokens cannot be verified; say so with the cheap refusal.
      checker: () => (onlyTollgate && currentVerifier() === null ? null : checker),
      revocations,
      browserLinks: settings.browserLinks ? browserLinks : null,
    });
  };

  const authenticatorFor = (policy: AuthorizationConfig): Authenticator => {
    let authenticator = authenticators.get(policy);
    if (authenticator === undefined) {
      if (policy.type === 'jwt') authenticator = jwtAuthenticator(policy.jwt ?? DEFAULT_JWT);
      else if (policy.type === 'basic') authenticator = createBasicAuthenticator(policy);
      else authenticator = createApiKeyAuthenticator(policy);
      authenticators.set(policy, authenticator);
    }
    return authenticator;
  };

  const refuse = (request: ProxyRequest, method: AuthMethod, reason: AuthFailureReason): false => {
    authFailuresTotal.inc({ route: request.route.id, method, reason });
    // Path only: the query may hold a token. Never a credential, not even the user name.
    deps.logger.info(
      {
        event: 'auth_refused',
        route: request.route.id,
        method,
        reason,
        client: request.clientIp,
        path: request.path,
      },
      'authentication refused',
    );
    // Overloaded is no verdict on the credential: no challenge, just when to try again.
    const headers: Record<string, string> =
      reason === 'auth_overloaded'
        ? { 'retry-after': '1' }
        : { 'www-authenticate': CHALLENGES[method](reason) };
    sendError(request.res, reason, headers);
    return false;
  };

  const fail = (request: ProxyRequest, error: unknown): false => {
    deps.logger.error(
      { event: 'auth_error', route: request.route.id, err: error },
      'authentication failed unexpectedly',
    );
    sendError(request.res, 'internal_error');
    return false;
  };

  /** The 303 of a link exchange; the response itself must not be cached or leak the URL either. */
  const answer = (request: ProxyRequest, redirect: AuthRedirect): false => {
    writeLocalResponse(
      request.res,
      303,
      {
        location: redirect.redirect,
        'set-cookie': redirect.setCookie,
        'referrer-policy': 'no-referrer',
        'cache-control': 'private, no-store',
      },
      '',
    );
    return false;
  };

  const settle = (request: ProxyRequest, method: AuthMethod, outcome: AuthOutcome): boolean => {
    if (outcome === null) return true;
    if (typeof outcome === 'string') return refuse(request, method, outcome);
    return answer(request, outcome);
  };

  return (request) => {
    // Every route, open ones included: a token must never reach an upstream (docs/tokens.md).
    const carriers = removeTokenCarriers(request, deps.tokenParam, cookieName);
    const policy = request.route.auth;
    if (policy === null) return true;
    let outcome: ReturnType<Authenticator>;
    try {
      outcome = authenticatorFor(policy)(request, carriers);
    } catch (error) {
      return fail(request, error);
    }
    if (!(outcome instanceof Promise)) return settle(request, policy.type, outcome);
    return outcome.then(
      (result) => settle(request, policy.type, result),
      (error: unknown) => fail(request, error),
    );
  };
}
