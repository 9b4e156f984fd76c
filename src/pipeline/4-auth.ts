import { authFailuresTotal } from '../admin/metrics.ts';
import type { Authenticator, AuthFailureReason, AuthOutcome, AuthRedirect } from '../auth/authenticator.ts';
import { type AuthMethodDeps, createAuthMethods } from '../auth/methods.ts';
import { removeTokenCarriers } from '../auth/token-carriers.ts';
import type { AuthMethod, AuthorizationConfig } from '../config/types.ts';
import type { ProxyRequest, Stage } from './request.ts';
import { answer, PASS, refuse, type Verdict } from './verdict.ts';

export type AuthStageDeps = AuthMethodDeps;

/**
 * The authentication stage: applies the route's effective policy (already resolved at compile time,
 * global wins). Authenticators are built once per policy object, so a reload's new policies get fresh
 * ones (and fresh caches) while in-flight requests finish with the old. Fails closed: an unexpected
 * error answers 500, never lets the request through.
 */
export function createAuthStage(deps: AuthStageDeps): Stage {
  const methods = createAuthMethods(deps);
  const authenticators = new WeakMap<AuthorizationConfig, Authenticator>();

  const authenticatorFor = (policy: AuthorizationConfig): Authenticator => {
    let authenticator = authenticators.get(policy);
    if (authenticator === undefined) {
      authenticator = methods[policy.type].create(policy);
      authenticators.set(policy, authenticator);
    }
    return authenticator;
  };

  const refused = (request: ProxyRequest, method: AuthMethod, reason: AuthFailureReason): Verdict => {
    authFailuresTotal.inc({ route: request.route.id, method, reason });
    // Path only: the query may hold a token. Never a credential, not even the user name.
    deps.logger.info(
      {
        event: 'auth_refused',
        route: request.route.id,
        method,
        reason,
        ...(request.authDetail === undefined ? {} : { detail: request.authDetail }),
        client: request.clientIp,
        path: request.path,
      },
      'authentication refused',
    );
    // Overloaded is no verdict on the credential: no challenge, just when to try again.
    return refuse(
      reason,
      reason === 'auth_overloaded'
        ? { 'retry-after': '1' }
        : { 'www-authenticate': methods[method].challenge(reason) },
    );
  };

  const failed = (request: ProxyRequest, error: unknown): Verdict => {
    deps.logger.error(
      { event: 'auth_error', route: request.route.id, err: error },
      'authentication failed unexpectedly',
    );
    return refuse('internal_error');
  };

  /** The 303 of a link exchange; the response itself must not be cached or leak the URL either. */
  const exchanged = (redirect: AuthRedirect): Verdict =>
    answer(
      303,
      {
        location: redirect.redirect,
        'set-cookie': redirect.setCookie,
        'referrer-policy': 'no-referrer',
        'cache-control': 'private, no-store',
      },
      '',
    );

  const settle = (request: ProxyRequest, method: AuthMethod, outcome: AuthOutcome): Verdict => {
    if (outcome === null) return PASS;
    if (typeof outcome === 'string') return refused(request, method, outcome);
    return exchanged(outcome);
  };

  return (request) => {
    // Every route, open ones included: a token must never reach an upstream (docs/tokens.md).
    const carriers = removeTokenCarriers(request, deps.tokenParam, deps.tokenParam);
    const policy = request.route.auth;
    if (policy === null) return PASS;
    let outcome: ReturnType<Authenticator>;
    try {
      outcome = authenticatorFor(policy)(request, carriers);
    } catch (error) {
      return failed(request, error);
    }
    if (!(outcome instanceof Promise)) return settle(request, policy.type, outcome);
    return outcome.then(
      (result) => settle(request, policy.type, result),
      (error: unknown) => failed(request, error),
    );
  };
}
