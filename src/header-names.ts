/**
 * Which header names Tollgate manages (docs/security.md "Headers sent upstream"). Shared by the
 * forwarder (upstream/headers.ts, which drops and writes them) and config validation (header rules and
 * forward-auth header lists may not touch them), so the two can never disagree.
 *
 * Names are compared normalised: lower case with `_` and `.` read as `-`, because upstreams that map
 * headers to CGI-style variables (WSGI, PHP, Rack) see `X_Tollgate_Subject`, `X.Tollgate.Subject` and
 * `X-Tollgate-Subject` as the same HTTP_X_TOLLGATE_SUBJECT.
 */

/** Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection and never cross the proxy. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
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

/** Written by us on every forwarded request; `expect` is answered by Node's server itself. */
export const OURS: ReadonlySet<string> = new Set([
  'expect',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  // A client certificate as the proxy vouches for it (auth/client-certificate): never the client's copy.
  'x-forwarded-client-cert',
  'ssl-client-cert',
]);
export const OUR_PREFIX = 'x-tollgate-';

/** Never forwarded: they would let the upstream serve another path or method than the one authorised. */
export const REROUTING: ReadonlySet<string> = new Set([
  'x-original-url',
  'x-rewrite-url',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  'x-original-method',
]);

/** Describe the client or the original request: believed only from trusted proxies. */
export const FROM_TRUSTED_PROXIES_ONLY: ReadonlySet<string> = new Set([
  'forwarded',
  'x-real-ip',
  'x-client-ip',
  'true-client-ip',
  'x-cluster-client-ip',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-forwarded-server',
  'x-forwarded-ssl',
  'x-forwarded-scheme',
  'x-original-forwarded-for',
  'x-original-host',
  'x-url-scheme',
  'front-end-https',
  // What an auth layer behind Tollgate (nginx auth_request, oauth2-proxy) reads as the original
  // request: from a client they would make it authorise another path or method than the one served.
  // Forward auth writes its own -Uri and -Method to the auth service (auth/forward.ts), never these.
  'x-forwarded-uri',
  'x-forwarded-method',
  'x-original-uri',
  'x-auth-request-redirect',
]);

/**
 * Lower case, `_` and `.` read as `-`: the name as CGI-style upstreams will see it (some frameworks
 * map `.` to `_` in variable names as they do `-`, so `X.Tollgate.Subject` must count as ours too).
 */
export function normaliseHeaderName(name: string): string {
  const lower = name.toLowerCase();
  return lower.includes('_') || lower.includes('.') ? lower.replaceAll(/[_.]/g, '-') : lower;
}

/** A name Tollgate drops from clients and writes itself, or never forwards (normalised input). */
export function isManaged(normalised: string): boolean {
  return (
    OURS.has(normalised) ||
    normalised.startsWith(OUR_PREFIX) ||
    REROUTING.has(normalised) ||
    FROM_TRUSTED_PROXIES_ONLY.has(normalised)
  );
}

/** RFC 9110 §5.1 field-name: a token. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Why a configured header rule or forward-auth list may not name `name`, or null when it may. Framing
 * headers (Host, Content-Length) are ours to keep consistent with what is actually sent.
 */
export function unconfigurableHeaderReason(name: string): string | null {
  if (!TOKEN.test(name)) return `'${name}' is not a valid header name`;
  const normalised = normaliseHeaderName(name);
  if (HOP_BY_HOP.has(normalised)) return `'${name}' is a hop-by-hop header: it never crosses the proxy`;
  // Every X-Forwarded-* too: the forward-auth check writes -Method and -Uri, and no rule may fake them.
  if (isManaged(normalised) || normalised.startsWith('x-forwarded-'))
    return `'${name}' is written or guarded by Tollgate itself and cannot be configured`;
  if (normalised === 'host' || normalised === 'content-length') {
    return `'${name}' describes the request itself and cannot be configured`;
  }
  return null;
}
