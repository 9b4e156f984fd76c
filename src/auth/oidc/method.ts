import type * as client from 'openid-client';
import { readSessionSecrets } from '../../config/file-checks.ts';
import type { AuthorizationConfig, MainConfig } from '../../config/types.ts';
import { DEFAULT_SESSION_MAX_AGE_SECONDS, OIDC_CALLBACK_PATH } from '../../config/validate-oidc.ts';
import type { Logger } from '../../log.ts';
import type { ProxyRequest } from '../../request/record.ts';
import { createAllowCheck, type Identity, identityFromClaims } from '../allow-rules.ts';
import {
  type Authenticator,
  type AuthOutcome,
  authorizationCredentials,
  subjectHeaderValue,
} from '../authenticator.ts';
import type { Clock } from '../clock.ts';
import { sameHostTarget } from '../redirect.ts';
import {
  cookiesStartingWith,
  createSealer,
  readSessionValue,
  removeLoginCookies,
  type Sealer,
  STATE_COOKIE_PREFIX,
  sessionCookieAttributes,
  sessionCookies,
} from '../session-cookie.ts';
import type { TokenCheck } from '../tokens.ts';
import { handleCallback } from './callback.ts';
import {
  type EndpointContext,
  logout,
  OIDC_LOGOUT_PATH,
  OIDC_USERINFO_PATH,
  SWITCH_ACCOUNT_PATH,
  switchAccount,
  userinfo,
} from './endpoints.ts';
import { isLoginNavigation, loginRedirect, redirectUriFor } from './login.ts';
import { forbiddenPage, signInPage, wantsPage } from './pages.ts';
import { createOidcProvider, type OidcProvider } from './provider.ts';
import {
  createSessionStore,
  identityClaims,
  type OpenedSession,
  type Session,
  type SessionStore,
} from './session.ts';

const OIDC_PATH_PREFIX = '/.tollgate/oidc/';
const NOT_OURS: AuthOutcome = Object.freeze({
  local: {
    status: 404,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
    body: '{"error":"not_found"}\n',
  },
});
/** Every cookie Tollgate's logins set starts with this (read here; see removeLoginCookies). */
const OUR_COOKIES = 'tollgate_';

export interface OidcMethodDeps {
  main: MainConfig;
  logger: Logger;
  now: Clock;
}

export interface OidcMethod {
  create(policy: AuthorizationConfig): Authenticator;
  close(): void;
}

/**
 * `type: oidc` (docs/authentication.md#openid-connect): one provider runtime per `oidc_providers`
 * entry, discovered at start, and one session store (sealed cookies opened with
 * `session_secret_file`), shared by every policy and kept across routing-table rebuilds.
 */
export function createOidcMethod(deps: OidcMethodDeps): OidcMethod {
  const { main, logger, now } = deps;
  const providers = new Map<string, OidcProvider>();
  for (const settings of Object.values(main.oidcProviders ?? {})) {
    providers.set(settings.name, createOidcProvider(settings, { logger, now }));
  }
  const maxAgeSeconds = main.sessionMaxAgeSeconds ?? DEFAULT_SESSION_MAX_AGE_SECONDS;
  let sealer: Sealer | null = null;
  let sessions: SessionStore | null = null;
  if (providers.size > 0 && main.sessionSecretFile) {
    try {
      sealer = createSealer(readSessionSecrets(main.sessionSecretFile));
      sessions = createSessionStore({ sealer, now, maxAgeSeconds, logger });
    } catch (error) {
      // validate refuses this; a file changed since then closes the oidc routes, never opens them.
      logger.error(
        { event: 'session_secret_unreadable', err: (error as Error).message },
        'session_secret_file cannot be used; oidc routes answer 503',
      );
    }
  }

  return {
    create(policy) {
      const provider = providers.get(policy.oidc?.provider ?? '');
      if (provider === undefined || sealer === null || sessions === null) {
        return () => 'auth_unavailable';
      }
      return createOidcAuthenticator(provider, sealer, sessions, {
        logger,
        now,
        maxAgeSeconds,
        providerNamed: (name) => providers.get(name),
        allowed: policy.allow === undefined ? null : createAllowCheck(policy.allow),
      });
    },
    close() {
      for (const provider of providers.values()) provider.close();
    },
  };
}

function createOidcAuthenticator(
  provider: OidcProvider,
  sealer: Sealer,
  sessions: SessionStore,
  deps: {
    logger: Logger;
    now: Clock;
    maxAgeSeconds: number;
    providerNamed: (name: string) => OidcProvider | undefined;
    /** The policy's allow rules (the pipeline applies them too): who gets the refusal page. */
    allowed: ((request: ProxyRequest) => boolean) | null;
  },
): Authenticator {
  const { settings } = provider;

  /**
   * What a session puts on every request it admits, worked out once per opened session (the store
   * hands back the same object for the same cookie): a request with a session then allocates nothing
   * for it.
   */
  const admitted = new WeakMap<
    Session,
    { subject: string; identity: Identity; headers: readonly string[] }
  >();
  const admissionOf = (session: Session) => {
    let found = admitted.get(session);
    if (found === undefined) {
      // Only what is known: no email, no X-Tollgate-Email (a client's copy is dropped all the same).
      const headers: string[] = [];
      if (session.em !== null) headers.push('x-tollgate-email', subjectHeaderValue(session.em));
      if (session.gr.length > 0)
        headers.push('x-tollgate-groups', session.gr.map(subjectHeaderValue).join(','));
      if (settings.passAccessToken && session.at !== undefined)
        headers.push('authorization', `Bearer ${session.at}`);
      found = {
        subject: subjectHeaderValue(session.sub),
        identity: {
          subject: session.sub,
          email: session.em,
          groups: session.gr,
          claims: identityClaims(session, settings.groupsClaim),
        },
        headers,
      };
      admitted.set(session, found);
    }
    return found;
  };

  /** What the upstream learns about the person (client-sent X-Tollgate-* never get through). */
  const admit = (
    request: ProxyRequest,
    session: Session,
    cookies: ReadonlyMap<string, string>,
    resealed: string | null,
  ) => {
    const admission = admissionOf(session);
    request.subject = admission.subject;
    request.identity = admission.identity;
    // With pass_access_token the client's own Authorization is replaced, never sent beside ours.
    if (settings.passAccessToken && session.at !== undefined) request.consumedHeaders.push('authorization');
    request.upstreamHeaders = admission.headers as string[];
    if (resealed !== null) {
      request.responseCookies.push(
        ...sessionCookies(
          resealed,
          cookies,
          sessionCookieAttributes(request, settings.cookieDomain, session.max - deps.now()),
        ),
      );
    }
    return null;
  };

  const configurationThen = (
    then: (configuration: client.Configuration) => AuthOutcome | Promise<AuthOutcome>,
  ): AuthOutcome | Promise<AuthOutcome> => {
    const configuration = provider.configuration();
    if (configuration instanceof Promise)
      return configuration.then((ready) => (ready === null ? 'auth_unavailable' : then(ready)));
    return configuration === null ? 'auth_unavailable' : then(configuration);
  };

  /**
   * No usable session. Every answer here needs the provider (its keys, its login page), so while it
   * is unavailable the route answers 503 rather than a 401 that would send clients to a dead login.
   */
  const withoutSession = (
    request: ProxyRequest,
    cookies: ReadonlyMap<string, string>,
  ): AuthOutcome | Promise<AuthOutcome> =>
    configurationThen((configuration) => {
      const bearer = authorizationCredentials(request.req.headers.authorization, 'bearer');
      if (bearer !== null) return checkBearer(request, bearer);
      if (!isLoginNavigation(request.req)) return 'login_required';
      const redirectUri = redirectUriFor(request, provider);
      if (redirectUri === null) return 'auth_unavailable';
      const pending = [...cookies.keys()].filter((name) => name.startsWith(STATE_COOKIE_PREFIX));
      return loginRedirect(request, provider, configuration, sealer, deps.now(), pending, redirectUri);
    });

  /** A machine client's `Authorization: Bearer <JWT>` from this provider (audience = client_id). */
  const checkBearer = (request: ProxyRequest, token: string): AuthOutcome | Promise<AuthOutcome> => {
    const checker = provider.bearerChecker();
    if (checker === null) return 'token_invalid';
    const settle = (check: TokenCheck): AuthOutcome => {
      if (!check.ok) {
        if (check.detail !== undefined) request.authDetail = check.detail;
        return check.reason;
      }
      request.subject = subjectHeaderValue(check.owner);
      request.identity = identityFromClaims(
        check.owner,
        check.claims ?? {},
        settings.groupsClaim,
        settings.requireVerifiedEmail,
      );
      request.consumedHeaders.push('authorization');
      return null;
    };
    const check = checker(token);
    return check instanceof Promise ? check.then(settle) : settle(check);
  };

  const endpoints: EndpointContext = {
    provider,
    sealer,
    sessions,
    now: deps.now,
    providerNamed: deps.providerNamed,
    configurationThen,
  };

  /**
   * A person's browser gets a page instead of JSON (docs/authentication.md#openid-connect): who they
   * are, sign out, another account. The allow rules are checked here for that page only; the
   * pipeline checks them for everyone.
   */
  const asPage = (request: ProxyRequest, outcome: AuthOutcome): AuthOutcome => {
    if (!wantsPage(request.req)) return outcome;
    const returnTo = request.query === '' ? request.path : `${request.path}?${request.query}`;
    if (outcome === null && deps.allowed !== null && !deps.allowed(request))
      return forbiddenPage(request.identity, sameHostTarget(returnTo));
    if (outcome === 'login_required') return signInPage(sameHostTarget(returnTo));
    return outcome;
  };
  const withPages = (request: ProxyRequest, outcome: AuthOutcome | Promise<AuthOutcome>) =>
    outcome instanceof Promise
      ? outcome.then((settled) => asPage(request, settled))
      : asPage(request, outcome);

  return (request) => {
    const cookies = cookiesStartingWith(request.req.headers.cookie, OUR_COOKIES);
    // Credentials: whatever happens next, none of them reaches the upstream.
    if (cookies.size > 0) removeLoginCookies(request.req);
    const path = request.path;
    if (path === OIDC_CALLBACK_PATH) {
      return handleCallback(request, provider, deps.providerNamed, cookies, deps.now(), {
        sealer,
        sessions,
        maxAgeSeconds: deps.maxAgeSeconds,
        logger: deps.logger,
      });
    }
    if (path === OIDC_LOGOUT_PATH) return logout(request, cookies, endpoints);
    if (path === OIDC_USERINFO_PATH) return userinfo(request, cookies, endpoints);
    if (path === SWITCH_ACCOUNT_PATH) return switchAccount(request, cookies, endpoints);
    // Any other path of Tollgate's own login space is ours too (routed here by pipeline/1-route):
    // never forwarded, whatever the session says.
    if (path.startsWith(OIDC_PATH_PREFIX)) return NOT_OURS;
    const sealed = readSessionValue(cookies);
    if (sealed === null) return withPages(request, withoutSession(request, cookies));
    const settle = (opened: OpenedSession | null): AuthOutcome | Promise<AuthOutcome> =>
      opened === null
        ? withoutSession(request, cookies)
        : admit(request, opened.session, cookies, opened.resealed);
    const opened = sessions.use(sealed, provider);
    return withPages(request, opened instanceof Promise ? opened.then(settle) : settle(opened));
  };
}
