import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Routed, Unrouted } from '../request/record.ts';
import type { Answer } from '../request/verdict.ts';
import { DEFAULT_HOST, type NormalisedPath, normaliseHost, normaliseTarget } from '../routing/normalise.ts';
import type { Route, RoutingTable } from '../routing/types.ts';
import {
  type ClientAddress,
  plainIp,
  resolveClientAddress,
  type TrustTest,
} from '../upstream/client-address.ts';
import { refuse } from './verdict.ts';

/**
 * The first stage: turns an incoming request into a ProxyRequest — normalised host and path, the
 * matching route of `table` (the one current at arrival), the client's address — or the 400/404 to
 * answer. Shared by plain requests and WebSocket upgrades. `res` is only carried along for the
 * upstream layer; nothing is written to it here.
 */
export function routeRequest(
  req: IncomingMessage,
  res: ServerResponse,
  table: RoutingTable,
  isTrustedProxy: TrustTest,
  startedAt: number,
): Routed {
  const peerIp = plainIp(req.socket.remoteAddress);
  const forwardedFor = req.headers['x-forwarded-for'];
  const address = resolveClientAddress(
    peerIp,
    Array.isArray(forwardedFor) ? forwardedFor.join(', ') : forwardedFor,
    isTrustedProxy,
  );
  const target = normaliseTarget(req.url ?? '');
  if (hasDuplicateHost(req.rawHeaders)) {
    // Two Host headers make "which site is this?" ambiguous between us and the upstream (nginx: 400).
    return unrouted(refuse('bad_request', {}, 'more than one Host header'), address, target);
  }
  // HTTP/2 names the host in `:authority`; a Host header beside it must name the same one (RFC 9113
  // §8.3.1), or we and the upstream (which reads Host) could disagree on which site this is.
  const authority = req.headers[':authority'] as string | undefined;
  const hostHeader = req.headers.host;
  if (
    authority !== undefined &&
    hostHeader !== undefined &&
    authority.toLowerCase() !== hostHeader.toLowerCase()
  ) {
    return unrouted(
      refuse('bad_request', {}, 'the :authority and Host headers name different hosts'),
      address,
      target,
    );
  }
  const rawHost = authority ?? hostHeader;
  const host = normaliseHost(rawHost);
  if (host === null)
    return unrouted(refuse('bad_request', {}, 'the Host header is missing or malformed'), address, target);
  if (!target.ok) return unrouted(refuse('bad_path'), address, target);
  const tls = (req.socket as TLSSocket).encrypted === true;
  const secure = tls || (address.peerTrusted && req.headers['x-forwarded-proto'] === 'https');
  // The request itself (and `secure`) is read only by routes with conditions (Gateway API matches,
  // and the kind of listener a route was attached through).
  // Tollgate's login endpoints belong to the host's oidc route, or to nobody: never to an upstream.
  const login = routeOwningLogin(table, host, target.path);
  const route = login === undefined ? table.match(host, target.path, req, target.query, secure) : login;
  if (route === null) return unrouted(refuse('not_found'), address, target);
  // A regex path (an Ingress with use-regex) is routed by its literal start, then must match whole.
  const pattern = route.policy?.pathPattern;
  if (pattern != null && !pattern.test(target.path)) return unrouted(refuse('not_found'), address, target);
  if (
    target.path.indexOf(';') !== -1 &&
    table.match(host, withoutPathParameters(target.path), req, target.query, secure) !== route
  ) {
    // `/admin;x` and `/;x/admin` route to `/` here, but servlet containers (Tomcat, Jetty, Spring)
    // drop `;parameters` and serve `/admin`: a bypass of /admin's policy. When the two readings pick
    // different routes we cannot know which one the upstream uses, so we refuse, like `..;`.
    return unrouted(refuse('bad_path'), address, target);
  }
  return {
    ok: true,
    request: {
      req,
      res,
      table,
      route,
      host,
      rawHost: rawHost ?? '',
      path: target.path,
      query: target.query,
      secure,
      peerIp,
      clientIp: address.clientIp,
      forwardedFor: address.forwardedFor,
      peerTrusted: address.peerTrusted,
      startedAt,
      upstreamPath: target.path,
      body: null,
      subject: null,
      identity: null,
      forwardQuery: target.query,
      consumedHeaders: [],
      upstreamHeaders: null,
      responseCookies: [],
      responseHeaders: null,
      candidates: route.servers,
      upstream: null,
      responseBytes: 0,
      completed: null,
      cutShort: null,
      trace: null,
      cacheTap: null,
    },
  };
}

/** Where Tollgate's own login endpoints live (auth/oidc): never an upstream's path. */
const LOGIN_PREFIX = '/.tollgate/oidc/';

/**
 * For `/.tollgate/oidc/…` (the callback and logout of an OpenID login, docs/authentication.md): the
 * first oidc route of the host key serving this host (the host itself, else the wildcard covering
 * it, else DEFAULT, as routing/match chooses), whichever path it covers, so the callback works on
 * every host a route serves; null (404) when that host key has no oidc route, so a callback's code
 * never reaches an upstream. undefined for any other path (one character compared on the hot path).
 */
function routeOwningLogin(table: RoutingTable, host: string, path: string): Route | null | undefined {
  if (path.charCodeAt(1) !== 0x2e || !path.startsWith(LOGIN_PREFIX)) return undefined;
  const { hostKeys, loginRoutes } = loginIndexOf(table);
  const hostKey = hostKeyServing(hostKeys, host);
  return hostKey === null ? null : (loginRoutes.get(hostKey) ?? null);
}

/** Per table, built on its first login request: its host keys, and each one's first oidc route. */
const loginIndexes = new WeakMap<
  RoutingTable,
  { hostKeys: ReadonlySet<string>; loginRoutes: ReadonlyMap<string, Route> }
>();
function loginIndexOf(table: RoutingTable) {
  let index = loginIndexes.get(table);
  if (index === undefined) {
    const hostKeys = new Set<string>();
    const loginRoutes = new Map<string, Route>();
    for (const route of table.routes) {
      hostKeys.add(route.hostKey);
      if (route.auth?.type === 'oidc' && !loginRoutes.has(route.hostKey))
        loginRoutes.set(route.hostKey, route);
    }
    index = { hostKeys, loginRoutes };
    loginIndexes.set(table, index);
  }
  return index;
}

/** The host key routing/match answers `host` from: exact, else the longest wildcard suffix, else DEFAULT. */
function hostKeyServing(keys: ReadonlySet<string>, host: string): string | null {
  if (keys.has(host)) return host;
  for (let dot = host.indexOf('.'); dot > 0; dot = host.indexOf('.', dot + 1)) {
    const wildcard = `*${host.slice(dot)}`;
    if (keys.has(wildcard)) return wildcard;
  }
  return keys.has(DEFAULT_HOST) ? DEFAULT_HOST : null;
}

/**
 * The path as servlet containers route it: `;parameters` removed from every segment and the empty
 * segments that leaves merged (`/a;x/b` → `/a/b`, `/;x/a` → `/a`).
 */
function withoutPathParameters(path: string): string {
  const names: string[] = [];
  for (const segment of path.split('/')) {
    const semicolon = segment.indexOf(';');
    const name = semicolon === -1 ? segment : segment.slice(0, semicolon);
    if (name !== '') names.push(name);
  }
  return `/${names.join('/')}`;
}

/** A refusal before routing. A plain function, not a closure made for every request. */
function unrouted(verdict: Answer, address: ClientAddress, target: NormalisedPath): Unrouted {
  return {
    ok: false,
    verdict,
    clientIp: address.clientIp,
    peerTrusted: address.peerTrusted,
    path: target.ok ? target.path : null,
    query: target.ok ? target.query : '',
  };
}

function hasDuplicateHost(rawHeaders: readonly string[]): boolean {
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length !== 4 || name.toLowerCase() !== 'host') continue;
    if (seen) return true;
    seen = true;
  }
  return false;
}
