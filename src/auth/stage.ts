import { authFailuresTotal } from '../admin/metrics.ts';
import type { AuthMethod, AuthorizationConfig } from '../config/types.ts';
import { sendError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { ProxyRequest, Stage } from '../proxy/context.ts';
import { createApiKeyAuthenticator } from './apikey.ts';
import type { Authenticator, AuthFailureReason } from './authenticator.ts';
import { createBasicAuthenticator } from './basic.ts';
import type { Clock } from './clock.ts';
import { createJwtAuthenticator } from './jwt.ts';
import { createTokenVerifier, type TokenVerifier } from './tokens.ts';

/** `WWW-Authenticate` per method (BEHAVIOUR.md §5); RFC 6750 §3.1: no error code when nothing was sent. */
const CHALLENGES: Record<AuthMethod, (reason: AuthFailureReason) => string> = {
  basic: () => 'Basic realm="tollgate", charset="UTF-8"',
  apikey: () => 'ApiKey realm="tollgate", header="x-api-key"',
  jwt: (reason) =>
    reason === 'missing_credentials'
      ? 'Bearer realm="tollgate"'
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
}

/**
 * The authentication stage: applies the route's effective policy (already resolved at compile time,
 * global wins). Authenticators are built once per policy object, so a reload's new policies get fresh
 * ones (and fresh caches) while in-flight requests finish with the old. Fails closed: an unexpected
 * error answers 500, never lets the request through.
 */
export function createAuthStage(deps: AuthStageDeps): Stage {
  const authenticators = new WeakMap<AuthorizationConfig, Authenticator>();
  let verifier: TokenVerifier | null = null;
  const currentVerifier = (): TokenVerifier | null => {
    const masterkey = deps.masterkey();
    if (masterkey === null) return null;
    if (verifier?.masterkey !== masterkey) verifier = createTokenVerifier(masterkey, { now: deps.now });
    return verifier;
  };
  // One JWT authenticator for every jwt policy: they share the key, so they can share the cache.
  const jwt = createJwtAuthenticator({ tokenParam: deps.tokenParam, verifier: currentVerifier });

  const authenticatorFor = (policy: AuthorizationConfig): Authenticator => {
    let authenticator = authenticators.get(policy);
    if (authenticator === undefined) {
      if (policy.type === 'jwt') authenticator = jwt;
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

  return (request) => {
    const policy = request.route.auth;
    if (policy === null) return true;
    let outcome: ReturnType<Authenticator>;
    try {
      outcome = authenticatorFor(policy)(request);
    } catch (error) {
      return fail(request, error);
    }
    if (outcome === null) return true;
    if (typeof outcome === 'string') return refuse(request, policy.type, outcome);
    return outcome.then(
      (reason) => reason === null || refuse(request, policy.type, reason),
      (error: unknown) => fail(request, error),
    );
  };
}
