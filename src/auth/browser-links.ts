import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProxyRequest } from '../request/record.ts';
import { requestTarget } from '../request/targets.ts';
import type { AuthRedirect } from './authenticator.ts';
import type { Clock } from './clock.ts';
import { takeQueryParam } from './query.ts';
import type { ScopeEntry } from './scope.ts';
import type { VerifiedToken } from './tokens.ts';

/**
 * Shared links that work in a browser (docs/tokens.md#links-in-a-browser). A link carries the token
 * in the query, but a page's stylesheets, images, fetch() calls and the links clicked on it do not:
 * a browser navigation authenticated by the query parameter is therefore answered with a 303 to the
 * same URL without it and a cookie holding the token, which jwt routes accept with the same checks.
 *
 * The cookie is HttpOnly (scripts on the page cannot read it), SameSite=Lax (other sites' forms,
 * fetch() and subresources never carry it; only top-level GET navigations do, which is exactly what
 * the link already granted), limited to the token's scope or the route's prefix, and expires with
 * the token.
 */
export interface BrowserLinks {
  /** The 303 + Set-Cookie answer to an authenticated link navigation. */
  exchange(
    request: ProxyRequest,
    token: string,
    check: VerifiedToken,
    scope: ScopeEntry | null,
  ): AuthRedirect;
}

/** What a response to a request whose URL held a token carries, whatever the upstream said. */
const QUERY_TOKEN_RESPONSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'referrer-policy': 'no-referrer',
  'cache-control': 'private, no-store',
});

/** A top-level navigation by a browser (Fetch Metadata); scripts and curl do not send this. */
export function isBrowserNavigation(req: IncomingMessage): boolean {
  return (req.method === 'GET' || req.method === 'HEAD') && req.headers['sec-fetch-mode'] === 'navigate';
}

/**
 * A Path attribute for a normalised prefix. A `;` cannot appear in a cookie attribute, so a prefix
 * holding one is cut back to the segment before it: the cookie then covers a little more, the scope
 * check on every request still covers exactly the scope.
 */
function cookiePath(prefix: string): string {
  const semicolon = prefix.indexOf(';');
  if (semicolon === -1) return prefix;
  return prefix.slice(0, prefix.lastIndexOf('/', semicolon)) || '/';
}

/** Marks the response to a query-token request: never cached by others, never leaks the URL. */
export function markQueryTokenResponse(request: ProxyRequest): void {
  request.responseHeaders = { ...request.responseHeaders, ...QUERY_TOKEN_RESPONSE_HEADERS };
}

/**
 * Marks every answer to a request whose URL carries the token parameter in any spelling (docs/tokens.md),
 * whatever answers it: Tollgate itself (401, 404, 429, a redirect…) through the headers set on `res`,
 * an upstream through the overrides applied last to its headers. Open routes too: the URL holds a
 * credential either way, and the page must not leak it in a Referer or sit in a shared cache.
 */
export function markIfUrlCarriesToken(
  url: string | undefined,
  tokenParam: string,
  res: ServerResponse,
  request: ProxyRequest | null,
): void {
  const question = url?.indexOf('?') ?? -1;
  if (url === undefined || question === -1) return;
  const hash = url.indexOf('#', question);
  const query = url.slice(question + 1, hash === -1 ? undefined : hash);
  const taken = takeQueryParam(query, tokenParam);
  if (taken.value === null && taken.rest === query) return;
  for (const [name, value] of Object.entries(QUERY_TOKEN_RESPONSE_HEADERS))
    if (!res.headersSent) res.setHeader(name, value);
  if (request !== null) markQueryTokenResponse(request);
}

export function createBrowserLinks(options: { cookieName: string; now: Clock }): BrowserLinks {
  return {
    exchange(request, token, check, scope) {
      const location = requestTarget(request);
      const maxAge = Math.max(0, Math.floor(check.expiresAt - options.now()));
      const attributes = [
        `${options.cookieName}=${token}`,
        `Path=${cookiePath(scope?.prefix ?? request.route.prefix)}`,
        `Max-Age=${maxAge}`,
        `Expires=${new Date(check.expiresAt * 1000).toUTCString()}`,
        'HttpOnly',
        'SameSite=Lax',
      ];
      if (request.secure) attributes.push('Secure');
      return { redirect: location, setCookie: attributes.join('; ') };
    },
  };
}
