import type { IncomingHttpHeaders } from 'node:http';
import {
  FROM_TRUSTED_PROXIES_ONLY,
  HOP_BY_HOP,
  isManaged,
  normaliseHeaderName,
  OUR_PREFIX,
  OURS,
  REROUTING,
} from '../header-names.ts';
import type { ForwardingRequest } from '../request/record.ts';
import type { HeaderRules } from '../routing/header-rules.ts';

/**
 * Header hygiene (docs/security.md "Headers sent upstream").
 *
 * Names are compared normalised: lower case with `_` and `.` read as `-`, because upstreams that map
 * headers to CGI-style variables (WSGI, PHP, Rack) see `X_Tollgate_Subject`, `X.Tollgate.Subject` and
 * `X-Tollgate-Subject` as the same HTTP_X_TOLLGATE_SUBJECT.
 *
 * - Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection and never cross the proxy.
 * - Our own headers (X-Tollgate-*, X-Forwarded-For/Proto/Host) are always dropped from the client and
 *   written by us, so they cannot be spoofed.
 * - Headers that make an upstream re-route or change the method (X-Original-URL, X-Rewrite-URL,
 *   X-HTTP-Method-Override…) are always dropped: the upstream must act on exactly the method and path
 *   that were authorised, whoever sent them.
 * - Headers that name the client or the original request (Forwarded, X-Real-IP, X-Client-IP,
 *   True-Client-IP, X-Forwarded-Port, X-Forwarded-Prefix…) are dropped unless the TCP peer is one of
 *   `trusted_proxies`; from a trusted proxy they pass unchanged, except `Forwarded`, to which our
 *   own hop is appended (as X-Forwarded-For is).
 * - A name made with `_` instead of `-` is dropped whenever its `-` form is one we manage: no proxy
 *   writes those, only someone hoping an upstream merges them with the real one.
 * - `Connection` may name extra hop-by-hop headers, but never Host, Content-Length or a header we manage.
 * - Several `Cookie` lines (HTTP/2 crumbs) go upstream as one, joined with `; ` (RFC 9113 §8.2.3).
 * - Header rules (`request_headers`, `response_headers`) and forward-auth response headers are applied
 *   here, after that hygiene; validation keeps them off every name above (header-names.ts).
 */

/** A `Connection` header can never make these disappear. */
const NOT_DROPPABLE_BY_CONNECTION = new Set(['host', 'content-length']);

/** Extra header names listed in a Connection header, normalised; null when there are none. */
function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  const joined = Array.isArray(value) ? value.join(',') : value;
  const tokens = new Set<string>();
  for (const token of joined.split(',')) {
    const name = normaliseHeaderName(token.trim());
    if (!name || name === 'close' || name === 'keep-alive') continue;
    if (NOT_DROPPABLE_BY_CONNECTION.has(name) || isManaged(name)) continue;
    tokens.add(name);
  }
  return tokens.size > 0 ? tokens : null;
}

/** Whether a client header may go upstream as it is (our own ones are added separately). */
function forwardable(name: string, normalised: string, peerTrusted: boolean): boolean {
  if (HOP_BY_HOP.has(normalised) || OURS.has(normalised) || normalised.startsWith(OUR_PREFIX)) return false;
  if (REROUTING.has(normalised)) return false;
  // A spelling with `_` or `.` is no proxy's: only someone hoping the upstream folds it onto the real one.
  if (FROM_TRUSTED_PROXIES_ONLY.has(normalised))
    return peerTrusted && !name.includes('_') && !name.includes('.');
  return true;
}

/** The route's request header rules, or its canary's for a request going to a canary server. */
function headerRulesFor(request: ForwardingRequest): HeaderRules | null {
  const { route, upstream } = request;
  const canary = route.canaryRequestHeaders;
  if (canary == null || route.canary == null || upstream == null) return route.requestHeaders;
  return route.servers.indexOf(upstream) >= route.canary.firstServer ? canary : route.requestHeaders;
}

/**
 * The headers to send upstream, as a flat `[name, value, …]` list built from the raw headers (so
 * duplicates and original casing survive), minus hop-by-hop, managed and consumed ones, plus ours.
 */
export function upstreamRequestHeaders(
  request: ForwardingRequest,
  forwardedProto: string,
  forwardedHost: string,
): string[] {
  const { rawHeaders, headers } = request.req;
  const named = connectionTokens(headers.connection);
  const consumed = request.consumedHeaders;
  const rules = headerRulesFor(request);
  const peerTrusted = request.peerTrusted;
  const out: string[] = [];
  let forwarded: string | null = null;
  // Where the first Cookie value sits in `out`, so later crumbs join it (see below).
  let cookieAt = -1;
  let host = false;
  // `upstream_host` (an Ingress `upstream-vhost`): the upstream gets that Host instead of the client's.
  const upstreamHost = request.route.upstreamHost ?? null;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    // HTTP/2 pseudo-headers (`:authority`, `:path`…) describe this hop's request line: the method,
    // path and Host sent upstream are written from what was routed and authorised.
    if (name.charCodeAt(0) === 0x3a) continue;
    const normalised = normaliseHeaderName(name);
    if (normalised === 'host') {
      host = true;
      if (upstreamHost !== null) continue;
    }
    if (!forwardable(name, normalised, peerTrusted)) {
      // `TE: trailers` only says the client takes trailers (gRPC needs the upstream to know); any
      // other transfer coding is this hop's business (docs/traffic.md#grpc).
      if (normalised === 'te' && isTrailersOnly(rawHeaders[i + 1] as string)) out.push('te', 'trailers');
      continue;
    }
    if (named?.has(normalised)) continue;
    if (consumed.length > 0 && consumed.includes(normalised)) continue;
    if (rules?.drop.has(normalised)) continue;
    const value = rawHeaders[i + 1] as string;
    if (normalised === 'forwarded') {
      // Joined into one list so our hop can be appended to it.
      forwarded = forwarded === null ? value : `${forwarded}, ${value}`;
      continue;
    }
    if (normalised === 'cookie') {
      // HTTP/2 splits Cookie into crumbs; they become one `; `-joined line (RFC 9113 §8.2.3), which
      // is what forward auth was shown (Node joins them so), so the upstream reads the approved set.
      if (cookieAt >= 0) {
        out[cookieAt] = `${out[cookieAt]}; ${value}`;
        continue;
      }
      cookieAt = out.length + 1;
    }
    out.push(name, value);
  }
  if (forwarded !== null) {
    out.push('forwarded', `${forwarded}, ${forwardedElement(request.peerIp, forwardedProto, forwardedHost)}`);
  }
  // An HTTP/2 request names its host in `:authority` (the route stage checked any Host agrees).
  if (upstreamHost !== null) out.push('host', upstreamHost);
  else if (!host && request.rawHost !== '') out.push('host', request.rawHost);
  if (rules !== null) out.push(...rules.append);
  // After the rules: what the auth service vouched for is not something a rule can override.
  if (request.upstreamHeaders !== null) out.push(...request.upstreamHeaders);
  out.push('x-forwarded-for', request.forwardedFor, 'x-forwarded-proto', forwardedProto);
  if (forwardedHost) out.push('x-forwarded-host', forwardedHost);
  if (request.subject !== null) out.push('x-tollgate-subject', request.subject);
  return out;
}

function isTrailersOnly(value: string): boolean {
  return value.trim().toLowerCase() === 'trailers';
}

/** Our hop as an RFC 7239 element: the peer we saw (IPv6 bracketed), the scheme and the Host, quoted. */
function forwardedElement(peerIp: string, proto: string, host: string): string {
  const node = peerIp.includes(':') ? `"[${peerIp}]"` : peerIp || 'unknown';
  const element = `for=${node};proto=${proto}`;
  // Host reached us as a valid header value; only `"` and `\` need escaping inside a quoted-string.
  return host ? `${element};host="${host.replaceAll(/["\\]/g, '\\$&')}"` : element;
}

/**
 * The upstream's response headers minus hop-by-hop ones, with the route's `response_headers` rules
 * applied, ready for res.writeHead. Our own cookies and `overrides` come last.
 */
export function clientResponseHeaders(
  upstream: Record<string, string | string[] | undefined>,
  extraCookies: readonly string[],
  overrides: Readonly<Record<string, string>> | null = null,
  rules: HeaderRules | null = null,
): IncomingHttpHeaders {
  const named = connectionTokens(upstream.connection);
  const out: IncomingHttpHeaders = {};
  for (const name in upstream) {
    if (HOP_BY_HOP.has(name) || named?.has(name)) continue;
    if (rules?.drop.has(name)) continue;
    out[name] = upstream[name] as string;
  }
  if (rules !== null) applyResponseRules(out, rules);
  if (extraCookies.length > 0) {
    const existing = out['set-cookie'];
    out['set-cookie'] = [
      ...(existing === undefined ? [] : Array.isArray(existing) ? existing : [existing]),
      ...extraCookies,
    ];
  }
  if (overrides !== null) Object.assign(out, overrides);
  return out;
}

function applyResponseRules(out: IncomingHttpHeaders, rules: HeaderRules): void {
  const { append } = rules;
  for (let i = 0; i < append.length; i += 2) {
    const name = append[i] as string;
    const value = append[i + 1] as string;
    const existing = out[name];
    if (existing === undefined || !rules.added.has(name)) out[name] = value;
    else out[name] = [...(Array.isArray(existing) ? existing : [existing]), value];
  }
}

/** The Link headers of a 103 Early Hints, for res.writeEarlyHints; null when it carries none. */
export function earlyHintHeaders(
  upstream: Record<string, string | string[] | undefined>,
): { link: string | string[] } | null {
  const link = upstream.link;
  if (link === undefined || link.length === 0) return null;
  return { link };
}

/** Adds `name` to the response's Vary unless it is there already (or Vary is `*`). */
export function addVary(out: IncomingHttpHeaders, name: string): void {
  const existing = out.vary;
  if (existing === undefined || existing === '') {
    out.vary = name;
    return;
  }
  const text = Array.isArray(existing) ? existing.join(', ') : existing;
  const lower = name.toLowerCase();
  if (text.split(',').some((token) => token.trim().toLowerCase() === lower || token.trim() === '*')) return;
  out.vary = `${text}, ${name}`;
}
