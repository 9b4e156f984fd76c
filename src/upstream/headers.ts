import type { IncomingHttpHeaders } from 'node:http';
import type { ProxyRequest } from '../proxy/context.ts';

/**
 * Header hygiene (RFC 9110 §7.6.1): hop-by-hop headers describe one connection and must not cross
 * the proxy in either direction. `Expect` is answered by Node's server itself (100-continue), so it
 * must not reach the upstream either. X-Forwarded-* and X-Tollgate-Subject are always rewritten by
 * us; a client-sent copy is dropped so it can never be spoofed.
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const REWRITTEN_BY_PROXY = new Set([
  'expect',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-tollgate-subject',
]);

/** Extra header names listed in a Connection header, lower-cased; null when there are none. */
function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  const joined = Array.isArray(value) ? value.join(',') : value;
  const tokens = new Set<string>();
  for (const token of joined.split(',')) {
    const name = token.trim().toLowerCase();
    if (name && name !== 'close' && name !== 'keep-alive') tokens.add(name);
  }
  return tokens.size > 0 ? tokens : null;
}

/**
 * The headers to send upstream, as a flat `[name, value, …]` list built from the raw headers (so
 * duplicates and original casing survive), minus hop-by-hop and consumed credentials, plus ours.
 */
export function upstreamRequestHeaders(
  request: ProxyRequest,
  forwardedProto: string,
  forwardedHost: string,
): string[] {
  const { rawHeaders, headers } = request.req;
  const named = connectionTokens(headers.connection);
  const consumed = request.consumedHeaders;
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || REWRITTEN_BY_PROXY.has(lower)) continue;
    if (named?.has(lower)) continue;
    if (consumed.length > 0 && consumed.includes(lower)) continue;
    out.push(name, rawHeaders[i + 1] as string);
  }
  out.push('x-forwarded-for', request.forwardedFor, 'x-forwarded-proto', forwardedProto);
  if (forwardedHost) out.push('x-forwarded-host', forwardedHost);
  if (request.subject !== null) out.push('x-tollgate-subject', request.subject);
  return out;
}

/** The upstream's response headers minus hop-by-hop ones, ready for res.writeHead. */
export function clientResponseHeaders(
  upstream: Record<string, string | string[] | undefined>,
  extraCookies: readonly string[],
): IncomingHttpHeaders {
  const named = connectionTokens(upstream.connection);
  const out: IncomingHttpHeaders = {};
  for (const name in upstream) {
    if (HOP_BY_HOP.has(name) || named?.has(name)) continue;
    out[name] = upstream[name] as string;
  }
  if (extraCookies.length > 0) {
    const existing = out['set-cookie'];
    out['set-cookie'] = [
      ...(existing === undefined ? [] : Array.isArray(existing) ? existing : [existing]),
      ...extraCookies,
    ];
  }
  return out;
}
