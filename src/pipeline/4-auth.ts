import { withAllowRules } from '../auth/allow-rules.ts';
import type {
  AuthDenial,
  Authenticator,
  AuthFailureReason,
  AuthOutcome,
  AuthRedirect,
} from '../auth/authenticator.ts';
import { type AuthMethodDeps, createAuthMethods } from '../auth/methods.ts';
import { removeLoginCookies } from '../auth/session-cookie.ts';
import { removeTokenCarriers, type TokenCarriers } from '../auth/token-carriers.ts';
import type { AuthMethod, AuthorizationConfig } from '../config/types.ts';
import { authFailuresTotal } from '../observe/metrics.ts';
import type { Stage, StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import type { AuthFailureGuard } from './3-rate-limit.ts';
import { answer, PASS, refuse } from './verdict.ts';

export interface AuthStageDeps extends AuthMethodDeps {
  /** Counts failed authentications for `auth_failure_limit`; without it the limit is not enforced. */
  failureGuard?: AuthFailureGuard;
}

export interface AuthStage {
  readonly stage: Stage;
  /** Releases what the methods hold (forward-auth connection pools). */
  close(): Promise<void>;
}

/**
 * Reasons that say a credential was tried and was wrong: what `auth_failure_limit` counts. A request
 * without credentials, a login redirect or a check that could not run says nothing of the kind.
 */
const FAILED_ATTEMPTS: ReadonlySet<string> = new Set<AuthFailureReason>([
  'invalid_credentials',
  'token_expired',
  'token_invalid',
  'token_revoked',
  'token_out_of_scope',
]);

/** The catalogue's `forbidden` wording is the token API's; a route's allow rules say this instead. */
const FORBIDDEN_MESSAGE = 'you are logged in, but not allowed here';

/**
 * The authentication stage: applies the route's effective policy (already resolved at compile time,
 * global wins). Authenticators are built once per policy object (a method may keep what outlives a
 * policy object, such as verified passwords, across reloads). Fails closed: an unexpected error
 * answers 500, never lets the request through. With `auth_failure_limit`, a client that failed too
 * often on this host is answered 429 `auth_failures` before its credential is even looked at.
 */
export function createAuthStage(deps: AuthStageDeps): AuthStage {
  const { methods, close } = createAuthMethods(deps);
  const guard = deps.failureGuard;
  const authenticators = new WeakMap<AuthorizationConfig, Authenticator>();

  const authenticatorFor = (policy: AuthorizationConfig): Authenticator => {
    let authenticator = authenticators.get(policy);
    if (authenticator === undefined) {
      authenticator = methods[policy.type].create(policy);
      if (policy.allow !== undefined) authenticator = withAllowRules(authenticator, policy.allow);
      authenticators.set(policy, authenticator);
    }
    return authenticator;
  };

  /** Counts and logs a refusal; a promise when it must first reach the brute-force guard's store. */
  const counted = (request: StageRequest, method: AuthMethod, reason: string): Promise<void> | null => {
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
    const limit = request.route.authFailureLimit;
    if (guard === undefined || limit === null || !FAILED_ATTEMPTS.has(reason)) return null;
    return guard.record(request, limit);
  };
  const after = (pending: Promise<void> | null, verdict: Verdict): Verdict | Promise<Verdict> =>
    pending === null ? verdict : pending.then(() => verdict);

  const refused = (
    request: StageRequest,
    method: AuthMethod,
    reason: AuthFailureReason,
  ): Verdict | Promise<Verdict> => {
    // The refusal goes out once the failure is counted, so the client's next attempt, on any worker,
    // already sees it (as relayed() does).
    const pending = counted(request, method, reason);
    // Overloaded or unavailable is no verdict on the credential: no challenge, just when to try again.
    if (reason === 'auth_overloaded' || reason === 'auth_unavailable') {
      return after(pending, refuse(reason, { 'retry-after': '1' }));
    }
    // Authenticated, not allowed: no challenge (trying again with the same credential cannot help).
    if (reason === 'forbidden') return after(pending, refuse(reason, {}, FORBIDDEN_MESSAGE));
    const challenge = withRealm(methods[method].challenge(reason), request.route.auth?.realm);
    return after(pending, refuse(reason, challenge === '' ? {} : { 'www-authenticate': challenge }));
  };

  const failed = (request: StageRequest, error: unknown): Verdict => {
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

  /** Another service's refusal (forward auth), relayed as it came. */
  const relayed = (
    request: StageRequest,
    method: AuthMethod,
    outcome: AuthDenial,
  ): Verdict | Promise<Verdict> => {
    const pending = counted(request, method, outcome.reason);
    return after(pending, answer(outcome.denial.status, outcome.denial.headers, outcome.denial.body));
  };

  const settle = (
    request: StageRequest,
    method: AuthMethod,
    outcome: AuthOutcome,
  ): Verdict | Promise<Verdict> => {
    if (outcome === null) return PASS;
    if (typeof outcome === 'string') return refused(request, method, outcome);
    if ('denial' in outcome) return relayed(request, method, outcome);
    if ('local' in outcome) return answer(outcome.local.status, outcome.local.headers, outcome.local.body);
    return exchanged(outcome);
  };

  const check = (
    request: StageRequest,
    policy: AuthorizationConfig,
    found: TokenCarriers,
  ): Verdict | Promise<Verdict> => {
    let outcome: ReturnType<Authenticator>;
    try {
      outcome = authenticatorFor(policy)(request, found);
    } catch (error) {
      return failed(request, error);
    }
    if (!(outcome instanceof Promise)) return settle(request, policy.type, outcome);
    return outcome.then(
      (result) => settle(request, policy.type, result),
      (error: unknown) => failed(request, error),
    );
  };

  const stage: Stage = (request) => {
    // Every route, open ones included: a token must never reach an upstream (docs/tokens.md).
    const found = removeTokenCarriers(request, deps.tokenParam, deps.tokenParam);
    // Likewise an OpenID session: the oidc method reads and removes it on its own routes.
    if (request.route.auth?.type !== 'oidc') removeLoginCookies(request.req);
    // A policy that could not be built (an Ingress's missing auth Secret) closes the route.
    if (request.route.unavailable) return refuse('auth_misconfigured');
    const policy = request.route.auth;
    if (policy === null) return PASS;
    const limit = request.route.authFailureLimit;
    if (guard === undefined || limit === null) return check(request, policy, found);
    return guard.blockedFor(request, limit).then((retryAfterMs) => {
      if (retryAfterMs <= 0) return check(request, policy, found);
      authFailuresTotal.inc({ route: request.route.id, method: policy.type, reason: 'auth_failures' });
      return refuse('auth_failures', {
        'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))),
      });
    });
  };

  return { stage, close };
}

/** The challenge with a policy's own realm (validated to be a plain quoted-string body). */
function withRealm(challenge: string, realm: string | undefined): string {
  return realm === undefined ? challenge : challenge.replace('realm="tollgate"', `realm="${realm}"`);
}
