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
  /** Headers of the 204 answered to an allowed preflight (without Access-Control-Allow-Origin). */
  readonly preflight: Readonly<Record<string, string>>;
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
  const preflight: Record<string, string> = { ...credentials };
  if (cors.allowMethods.length > 0) preflight['access-control-allow-methods'] = cors.allowMethods.join(', ');
  if (cors.allowHeaders.length > 0) preflight['access-control-allow-headers'] = cors.allowHeaders.join(', ');
  if (cors.maxAgeSeconds !== null) preflight['access-control-max-age'] = String(cors.maxAgeSeconds);
  const response: Record<string, string> = { ...credentials };
  if (cors.exposeHeaders.length > 0)
    response['access-control-expose-headers'] = cors.exposeHeaders.join(', ');
  return Object.freeze({
    allowOrigin(origin: string): string | null {
      // `*` is only ever configured without credentials (validation), so `*` itself is the answer.
      if (any) return '*';
      const lower = origin.toLowerCase();
      if (exact.has(lower)) return origin;
      for (const { head, tail } of wildcards) {
        if (lower.length <= head.length + tail.length) continue;
        if (!lower.startsWith(head) || !lower.endsWith(tail)) continue;
        if (LABELS.test(lower.slice(head.length, lower.length - tail.length))) return origin;
      }
      return null;
    },
    preflight: Object.freeze(preflight),
    response: Object.freeze(response),
  });
}
