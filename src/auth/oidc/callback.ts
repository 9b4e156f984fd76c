import * as client from 'openid-client';
import type { Logger } from '../../log.ts';
import type { ProxyRequest } from '../../request/record.ts';
import type { AuthAnswer, AuthDenial, AuthFailureReason, OidcFailureReason } from '../authenticator.ts';
import { safeEqual } from '../compare.ts';
import { sameHostTarget } from '../redirect.ts';
import { type Sealer, sessionCookieAttributes, sessionCookies, setCookie } from '../session-cookie.ts';
import { isLoginState, type LoginState, stateCookieName } from './login.ts';
import { PAGE_SECURITY_HEADERS } from './pages.ts';
import type { OidcProvider } from './provider.ts';
import { type SessionStore, sessionFromTokens } from './session.ts';

export interface CallbackDeps {
  sealer: Sealer;
  sessions: SessionStore;
  maxAgeSeconds: number;
  logger: Logger;
}

/**
 * `/.tollgate/oidc/callback` (docs/authentication.md#openid-connect): the state cookie named by the
 * returned `state` must open and agree; openid-client then exchanges the code (with the PKCE
 * verifier) and validates the ID token (signature, iss, aud, exp, nonce). Success sets the session
 * and 303s to the original path on this host. Every outcome expires the state cookie: a code or a
 * state is good for one try.
 */
export async function handleCallback(
  request: ProxyRequest,
  routeProvider: OidcProvider,
  providerNamed: (name: string) => OidcProvider | undefined,
  cookies: ReadonlyMap<string, string>,
  nowSeconds: number,
  deps: CallbackDeps,
): Promise<AuthAnswer | AuthDenial | AuthFailureReason> {
  const params = new URLSearchParams(request.query);
  const state = params.get('state');
  const cookieName = state === null || state === '' ? null : stateCookieName(state);
  const clearState =
    cookieName !== null && cookies.has(cookieName)
      ? [setCookie(cookieName, '', { secure: request.secure, maxAge: 0 })]
      : [];
  // The route that answered the callback may use another provider than the login did (several on one
  // host): the state cookie says which one, and only a provider main.yaml defines is used.
  let provider = routeProvider;
  const refuse = (reason: OidcFailureReason, detail?: string): AuthDenial => {
    deps.logger.info(
      // `detail` may come from the query (the provider's `error`): bounded, never a token.
      {
        event: 'oidc_callback_refused',
        provider: provider.settings.name,
        reason,
        detail: detail?.slice(0, 200),
      },
      'OpenID login refused',
    );
    return failurePage(reason, clearState);
  };

  const error = params.get('error');
  if (error !== null) return refuse(error === 'access_denied' ? 'access_denied' : 'provider_error', error);
  if (cookieName === null) return refuse('state_missing', 'no state parameter');
  const sealed = cookies.get(cookieName);
  if (sealed === undefined) return refuse('state_missing', 'no state cookie (expired, or another browser)');
  const opened = await deps.sealer.open(sealed);
  if (!isLoginState(opened)) return refuse('state_invalid');
  const login: LoginState = opened;
  if (state === null || !safeEqual(login.s, state)) return refuse('state_mismatch');
  if (login.exp <= nowSeconds) return refuse('state_expired');
  const loginProvider = providerNamed(login.p);
  if (loginProvider === undefined) return refuse('state_mismatch', 'a provider main.yaml no longer defines');
  provider = loginProvider;
  const configuration = await provider.configuration();
  if (configuration === null) return 'auth_unavailable';

  let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
  try {
    // The URL the provider redirected to, rebuilt from what we sent, never from Host.
    const currentUrl = new URL(login.r);
    currentUrl.search = request.query;
    tokens = await client.authorizationCodeGrant(configuration, currentUrl, {
      pkceCodeVerifier: login.v,
      expectedState: login.s,
      expectedNonce: login.n,
      idTokenExpected: true,
    });
  } catch (failure) {
    // A 5xx with an OAuth error body is the provider failing, not the code being refused.
    if (failure instanceof client.ResponseBodyError && failure.status < 500)
      return refuse('code_rejected', failure.error);
    if (failure instanceof client.AuthorizationResponseError) return refuse('provider_error', failure.error);
    if (isProviderFailure(failure)) {
      deps.logger.warn(
        {
          event: 'oidc_provider_unavailable',
          provider: provider.settings.name,
          err: (failure as Error).message,
        },
        'OpenID provider gave no usable answer to the token request',
      );
      return 'auth_unavailable';
    }
    return refuse('id_token_invalid', (failure as Error).message);
  }
  const userinfo = await userinfoIfNeeded(provider, configuration, tokens, deps.logger);
  let sessionCookieLines: string[];
  let subject: string;
  try {
    const session = sessionFromTokens(provider, tokens, nowSeconds, deps.maxAgeSeconds, null, userinfo);
    subject = session.sub;
    const sealedSession = await deps.sessions.seal(session);
    sessionCookieLines = sessionCookies(
      sealedSession,
      cookies,
      sessionCookieAttributes(request, provider.settings.cookieDomain, session.max - nowSeconds),
    );
  } catch (failure) {
    return refuse('id_token_invalid', (failure as Error).message);
  }
  // Who logged in, as the access log names them (the subject, never a token or the email).
  deps.logger.info({ event: 'oidc_login', provider: provider.settings.name, subject }, 'OpenID login');
  return {
    local: {
      status: 303,
      headers: {
        location: sameHostTarget(login.u),
        'set-cookie': [...clearState, ...sessionCookieLines],
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
      },
      body: '',
    },
  };
}

/**
 * The userinfo endpoint's claims when the ID token lacks the email or the groups (providers that
 * follow the spec to the letter put scope claims only there); null when not needed or not given. A
 * failure is logged and the login goes on with what the ID token says.
 */
async function userinfoIfNeeded(
  provider: OidcProvider,
  configuration: client.Configuration,
  tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>,
  logger: Logger,
): Promise<Record<string, unknown> | null> {
  const claims = tokens.claims();
  if (claims === undefined) return null;
  if (claims.email !== undefined && claims[provider.settings.groupsClaim] !== undefined) return null;
  if (typeof configuration.serverMetadata().userinfo_endpoint !== 'string') return null;
  try {
    return { ...(await client.fetchUserInfo(configuration, tokens.access_token, claims.sub)) };
  } catch (error) {
    logger.warn(
      { event: 'oidc_userinfo_failed', provider: provider.settings.name, err: (error as Error).message },
      'userinfo could not be read; the login goes on with the ID token alone',
    );
    return null;
  }
}

/**
 * The provider, not the login, failed: no answer (refused, reset, timed out), an error status
 * without an OAuth error, or a body that is not JSON. The route answers 503 auth_unavailable, as for
 * a provider that cannot be discovered; the person can simply try again.
 */
function isProviderFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error instanceof client.ResponseBodyError) return error.status >= 500;
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return true;
  if (error instanceof TypeError && error.message === 'fetch failed') return true;
  const code = (error as { code?: unknown }).code;
  return code === 'OAUTH_RESPONSE_IS_NOT_JSON' || code === 'OAUTH_RESPONSE_IS_NOT_CONFORM';
}

const PAGE_TEXT: Readonly<Record<OidcFailureReason, string>> = {
  access_denied: 'The sign-in was declined.',
  provider_error: 'The identity provider reported an error.',
  state_missing: 'This sign-in link has expired or was opened in another browser.',
  state_invalid: 'This sign-in attempt could not be verified.',
  state_expired: 'This sign-in attempt took too long.',
  state_mismatch: 'This sign-in attempt does not match this browser.',
  code_rejected: 'The identity provider refused this sign-in (already used, or expired).',
  id_token_invalid: 'The identity provider answered with an identity that could not be verified.',
};

/** A short HTML page: 403 when the person or provider said no, 401 when the attempt is unusable. */
function failurePage(reason: OidcFailureReason, cookies: string[]): AuthDenial {
  const status = reason === 'access_denied' ? 403 : 401;
  const body =
    '<!doctype html><meta charset="utf-8"><title>Sign-in failed</title>' +
    `<p>${PAGE_TEXT[reason]}</p><p><a href="/">Try again</a></p><p><small>reason: ${reason}</small></p>\n`;
  return {
    reason,
    denial: {
      status,
      headers: {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        ...PAGE_SECURITY_HEADERS,
        ...(cookies.length > 0 ? { 'set-cookie': cookies } : {}),
      },
      body: Buffer.from(body),
    },
  };
}
