import type { IncomingMessage } from 'node:http';
import * as client from 'openid-client';
import { OIDC_CALLBACK_PATH } from '../../config/validate-oidc.ts';
import { isGrpcRequest } from '../../local-response.ts';
import type { ProxyRequest } from '../../request/record.ts';
import type { AuthAnswer } from '../authenticator.ts';
import type { Sealer } from '../session-cookie.ts';
import { STATE_COOKIE_PREFIX, setCookie } from '../session-cookie.ts';
import type { OidcProvider } from './provider.ts';

/** A login has this long to come back through the callback. */
export const STATE_TTL_SECONDS = 600;
/** More pending logins than this in one browser are abandoned ones: they are cleared (no pile-up). */
const MAX_PENDING_LOGINS = 3;

/** What the state cookie holds (sealed): everything the callback must check, nothing from the query. */
export interface LoginState {
  k: 'state';
  /** state, nonce, PKCE verifier. */
  s: string;
  n: string;
  v: string;
  /** The path + query to return to (same host). */
  u: string;
  /** The redirect_uri sent, which the token request must repeat. */
  r: string;
  p: string;
  exp: number;
}

/**
 * A browser navigation (docs/authentication.md#openid-connect): GET or HEAD asking for HTML, not
 * marked as a script's request (XHR's X-Requested-With, fetch's Sec-Fetch-Mode other than navigate),
 * not gRPC. Only these are sent to the login page; anything else gets 401, which a script can handle.
 */
export function isLoginNavigation(req: IncomingMessage): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const accept = req.headers.accept;
  if (accept === undefined || !accept.includes('text/html')) return false;
  if (req.headers['x-requested-with'] !== undefined) return false;
  const mode = req.headers['sec-fetch-mode'];
  if (mode !== undefined && mode !== 'navigate') return false;
  return !isGrpcRequest(req);
}

/** `{scheme}://{host}/.tollgate/oidc/callback`, or the provider's redirect_url for `DEFAULT` routes. */
export function redirectUriFor(request: ProxyRequest, provider: OidcProvider): string | null {
  // Validation requires redirect_url for DEFAULT routes; without one there is no safe host to use.
  if (request.route.hostKey === 'DEFAULT' || request.rawHost === '') return provider.settings.redirectUrl;
  return `${request.secure ? 'https' : 'http'}://${request.rawHost}${OIDC_CALLBACK_PATH}`;
}

/** The 302 to the provider's authorization endpoint, with the sealed state cookie. */
export async function loginRedirect(
  request: ProxyRequest,
  provider: OidcProvider,
  configuration: client.Configuration,
  sealer: Sealer,
  nowSeconds: number,
  pendingStateCookies: readonly string[],
  redirectUri: string,
  options: { returnTo?: string; prompt?: string } = {},
): Promise<AuthAnswer> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(configuration, {
    redirect_uri: redirectUri,
    scope: provider.settings.scopes.join(' '),
    response_type: 'code',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...(options.prompt === undefined ? {} : { prompt: options.prompt }),
  });
  const original =
    options.returnTo ?? (request.query === '' ? request.path : `${request.path}?${request.query}`);
  const loginState: LoginState = {
    k: 'state',
    s: state,
    n: nonce,
    v: verifier,
    u: original,
    r: redirectUri,
    p: provider.settings.name,
    exp: Math.floor(nowSeconds) + STATE_TTL_SECONDS,
  };
  const cookies = [
    setCookie(stateCookieName(state), await sealer.seal(loginState), {
      secure: request.secure,
      maxAge: STATE_TTL_SECONDS,
    }),
  ];
  if (pendingStateCookies.length >= MAX_PENDING_LOGINS) {
    for (const name of pendingStateCookies)
      cookies.push(setCookie(name, '', { secure: request.secure, maxAge: 0 }));
  }
  return {
    local: {
      status: 302,
      headers: { location: url.href, 'set-cookie': cookies, 'cache-control': 'no-store' },
      body: '',
    },
  };
}

/** State cookies are named `tollgate_oidc_<start of the state>`: parallel logins do not clobber each other. */
export function stateCookieName(state: string): string {
  return `${STATE_COOKIE_PREFIX}${state.slice(0, 16)}`;
}

export function isLoginState(
  payload: Record<string, unknown> | null,
): payload is Record<string, unknown> & LoginState {
  return (
    payload !== null &&
    payload.k === 'state' &&
    typeof payload.s === 'string' &&
    typeof payload.n === 'string' &&
    typeof payload.v === 'string' &&
    typeof payload.u === 'string' &&
    typeof payload.r === 'string' &&
    typeof payload.p === 'string' &&
    typeof payload.exp === 'number'
  );
}
