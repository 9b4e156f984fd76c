import type { CorsConfig } from '../config/policy-types.ts';

/**
 * `cors` (docs/policies.md#cors), compiled: which origins are allowed and the headers that say so.
 * Origins are compared whole, never by unanchored pattern: an exact origin, `*`, or a wildcard whose
 * `*` stands for one or more DNS labels of the host and nothing else (`https://*.example.com` takes
 * `https://a.b.example.com`, not `https://example.com.evil.test` nor `http://a.example.com`).
 */
export interface CorsPolicy {
  /** The Access-Control-Allow-Origin value for this `Origin`, or null when it is not allowed. */
  allowOrigin(origin: string): string | null;
  /**
   * Headers of the 204 answered to an allowed preflight (without Access-Control-Allow-Origin), given
   * its Access-Control-Request-Method and -Headers: `*` in allow_methods / allow_headers answers
   * with what was asked (a browser takes a literal `*` only without credentials).
   */
  preflight(requestMethod: string | undefined, requestHeaders: string | undefined): Record<string, string>;
  /** Headers added to other responses to an allowed origin (without Access-Control-Allow-Origin). */
  readonly response: Readonly<Record<string, string>>;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const SCHEME = /^[a-z][a-z0-9+.-]*$/;
const HOST =
  /^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(:[0-9]{1,5})?$/;
const LABELS = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

/** What is wrong with one `allow_origins` entry, or null. */
export function originProblem(origin: string): string | null {
  if (origin === '*') return null;
  const separator = origin.indexOf('://');
  const scheme = separator === -1 ? '' : origin.slice(0, separator);
  let host = separator === -1 ? '' : origin.slice(separator + 3);
  if (!SCHEME.test(scheme))
    return `'${origin}' is not an origin: write scheme://host[:port], e.g. https://app.example.com`;
  if (host.startsWith('*.')) host = `x${host.slice(1)}`;
  if (!HOST.test(host))
    return `'${origin}' is not an origin (scheme://host[:port], lower case, no path; '*' only as '*.' before the host)`;
  return null;
}

/** The problems of a whole `cors` block (empty when valid). */
export function corsProblems(cors: CorsConfig): string[] {
  const problems: string[] = [];
  if (cors.allowOrigins.length === 0) problems.push('allow_origins lists no origin');
  for (const origin of cors.allowOrigins) {
    const problem = originProblem(origin);
    if (problem !== null) problems.push(problem);
  }
  if (cors.allowOrigins.includes('*') && cors.allowOrigins.length > 1)
    problems.push("'*' allows every origin: list it alone or not at all");
  if (cors.allowOrigins.includes('*') && cors.allowCredentials)
    problems.push(
      "'*' with allow_credentials would let every site read responses with the user's cookies: list the origins",
    );
  for (const method of cors.allowMethods)
    if (!TOKEN.test(method)) problems.push(`'${method}' is not an HTTP method name`);
  for (const name of [...cors.allowHeaders, ...cors.exposeHeaders])
    if (!TOKEN.test(name)) problems.push(`'${name}' is not a header name`);
  return problems;
}

export function compileCors(cors: CorsConfig): CorsPolicy {
  const any = cors.allowOrigins.includes('*');
  const exact = new Set(cors.allowOrigins.filter((origin) => !origin.includes('*')));
  // `https://*.example.com` → scheme `https://` and suffix `.example.com` (port included when written).
  const wildcards = cors.allowOrigins
    .filter((origin) => origin !== '*' && origin.includes('*'))
    .map((origin) => {
      const star = origin.indexOf('*');
      return { head: origin.slice(0, star), tail: origin.slice(star + 1) };
    });
  const credentials: Record<string, string> = cors.allowCredentials
    ? { 'access-control-allow-credentials': 'true' }
    : {};
  const expose: Record<string, string> =
    cors.exposeHeaders.length > 0 ? { 'access-control-expose-headers': cors.exposeHeaders.join(', ') } : {};
  const fixed: Record<string, string> = { ...credentials, ...expose };
  const anyMethod = cors.allowMethods.includes('*');
  const anyHeader = cors.allowHeaders.includes('*');
  if (cors.allowMethods.length > 0 && !anyMethod)
    fixed['access-control-allow-methods'] = cors.allowMethods.join(', ');
  if (cors.allowHeaders.length > 0 && !anyHeader)
    fixed['access-control-allow-headers'] = cors.allowHeaders.join(', ');
  if (cors.maxAgeSeconds !== null) fixed['access-control-max-age'] = String(cors.maxAgeSeconds);
  Object.freeze(fixed);
  const response: Record<string, string> = { ...credentials, ...expose };
  return Object.freeze({
    preflight(requestMethod: string | undefined, requestHeaders: string | undefined) {
      if (!anyMethod && !anyHeader) return fixed;
      const headers = { ...fixed };
      // Echoed only when it is what a browser sends: a method token, a list of header names.
      if (anyMethod && requestMethod !== undefined && TOKEN.test(requestMethod))
        headers['access-control-allow-methods'] = requestMethod;
      const names = requestHeaders?.split(',').map((name) => name.trim());
      if (anyHeader && names?.every((name) => TOKEN.test(name)))
        headers['access-control-allow-headers'] = (names as string[]).join(', ');
      return headers;
    },
    allowOrigin(origin: string): string | null {
      // `*` with credentials (a Gateway API CORS filter may say so; upstreams.yaml may not): the
      // origin itself, as a browser refuses a literal `*` on a credentialed response.
      if (any) return cors.allowCredentials ? origin : '*';
      const lower = origin.toLowerCase();
      if (exact.has(lower)) return origin;
      for (const { head, tail } of wildcards) {
        if (lower.length <= head.length + tail.length) continue;
        if (!lower.startsWith(head) || !lower.endsWith(tail)) continue;
        if (LABELS.test(lower.slice(head.length, lower.length - tail.length))) return origin;
      }
      return null;
    },
    response: Object.freeze(response),
  });
}
