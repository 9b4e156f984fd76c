import * as client from 'openid-client';
import type { ProxyRequest } from '../../request/record.ts';
import type { AuthOutcome } from '../authenticator.ts';
import type { Clock } from '../clock.ts';
import { sameHostTarget } from '../redirect.ts';
import {
  clearedSessionCookies,
  readSessionValue,
  type Sealer,
  STATE_COOKIE_PREFIX,
  sessionCookieAttributes,
  sessionCookieDomain,
  sessionCookies,
} from '../session-cookie.ts';
import { loginRedirect, redirectUriFor } from './login.ts';
import type { OidcProvider } from './provider.ts';
import type { OpenedSession, SessionStore } from './session.ts';

/**
 * Tollgate's own OpenID endpoints besides the callback (docs/authentication.md#openid-connect):
 * logout, the session as JSON for single-page apps, and "sign in with another account". Each is
 * answered by the host's oidc route (pipeline/1-route), never forwarded.
 */
export const OIDC_LOGOUT_PATH = '/.tollgate/oidc/logout';
export const OIDC_USERINFO_PATH = '/.tollgate/oidc/userinfo';
/** Where the refusal page's "sign in with another account" leads (auth/oidc/pages). */
export const SWITCH_ACCOUNT_PATH = '/.tollgate/oidc/switch';

/** What the endpoints need from the route's authenticator. */
export interface EndpointContext {
  provider: OidcProvider;
  sealer: Sealer;
  sessions: SessionStore;
  now: Clock;
  providerNamed: (name: string) => OidcProvider | undefined;
  /** Runs `then` with the provider's metadata, or answers 503 auth_unavailable without it. */
  configurationThen(
    then: (configuration: client.Configuration) => AuthOutcome | Promise<AuthOutcome>,
  ): AuthOutcome | Promise<AuthOutcome>;
}

/** Ends the session (the shared cookie too) and 303s to the provider's end_session_endpoint or the landing. */
export function logout(
  request: ProxyRequest,
  cookies: ReadonlyMap<string, string>,
  context: EndpointContext,
): Promise<AuthOutcome> {
  const { provider, sessions } = context;
  const sealed = readSessionValue(cookies);
  return (async () => {
    const session = sealed === null ? null : await sessions.peek(sealed);
    // The provider that logged this person in (several may serve one host), else the route's.
    const loggedInWith = (session === null ? undefined : context.providerNamed(session.p)) ?? provider;
    const cleared = clearedSessionCookies(
      cookies,
      request.secure,
      sessionCookieDomain(loggedInWith.settings.cookieDomain, request.host),
    );
    const answer = (location: string): AuthOutcome => ({
      local: {
        status: 303,
        headers: { location, 'set-cookie': cleared, 'cache-control': 'no-store' },
        body: '',
      },
    });
    // Where the logout ends: the provider's post_logout_redirect_url, else this host's `/`.
    const landing = loggedInWith.settings.postLogoutRedirectUrl ?? null;
    const configuration = await loggedInWith.configuration();
    const callback = redirectUriFor(request, loggedInWith);
    if (configuration === null || callback === null) return answer(landing ?? '/');
    if (typeof configuration.serverMetadata().end_session_endpoint !== 'string')
      return answer(landing ?? '/');
    const parameters: Record<string, string> = {
      post_logout_redirect_uri: landing ?? new URL('/', callback).href,
      client_id: loggedInWith.settings.clientId,
    };
    if (session?.idt !== undefined) parameters.id_token_hint = session.idt;
    return answer(client.buildEndSessionUrl(configuration, parameters).href);
  })();
}

/** The session's identity as JSON; 401 login_required without one (never a login redirect). */
export function userinfo(
  request: ProxyRequest,
  cookies: ReadonlyMap<string, string>,
  context: EndpointContext,
): AuthOutcome | Promise<AuthOutcome> {
  const { provider, sessions } = context;
  const sealed = readSessionValue(cookies);
  if (sealed === null) return 'login_required';
  const settle = (opened: OpenedSession | null): AuthOutcome => {
    if (opened === null) return 'login_required';
    const { session } = opened;
    const headers: Record<string, string | string[]> = {
      'content-type': 'application/json',
      'cache-control': 'no-store',
    };
    if (opened.resealed !== null) {
      headers['set-cookie'] = sessionCookies(
        opened.resealed,
        cookies,
        sessionCookieAttributes(request, provider.settings.cookieDomain, session.max - context.now()),
      );
    }
    const body = { subject: session.sub, email: session.em, groups: session.gr, provider: session.p };
    return { local: { status: 200, headers, body: `${JSON.stringify(body)}\n` } };
  };
  const opened = sessions.use(sealed, provider);
  return opened instanceof Promise ? opened.then(settle) : settle(opened);
}

/** "Sign in with another account": the session ends and the provider is asked to log someone in anew. */
export function switchAccount(
  request: ProxyRequest,
  cookies: ReadonlyMap<string, string>,
  context: EndpointContext,
): AuthOutcome | Promise<AuthOutcome> {
  const { provider } = context;
  return context.configurationThen(async (configuration) => {
    const redirectUri = redirectUriFor(request, provider);
    if (redirectUri === null) return 'auth_unavailable';
    const returnTo = sameHostTarget(new URLSearchParams(request.query).get('rd'));
    const pending = [...cookies.keys()].filter((name) => name.startsWith(STATE_COOKIE_PREFIX));
    const login = await loginRedirect(
      request,
      provider,
      configuration,
      context.sealer,
      context.now(),
      pending,
      redirectUri,
      {
        returnTo,
        prompt: 'login',
      },
    );
    const domain = sessionCookieDomain(provider.settings.cookieDomain, request.host);
    const cleared = clearedSessionCookies(cookies, request.secure, domain);
    const setCookies = login.local.headers['set-cookie'];
    return {
      local: {
        ...login.local,
        headers: {
          ...login.local.headers,
          'set-cookie': [...cleared, ...(Array.isArray(setCookies) ? setCookies : [])],
        },
      },
    };
  });
}
