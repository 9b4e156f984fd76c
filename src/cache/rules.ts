import CachePolicy from 'http-cache-semantics';
import type { CacheConfig } from '../config/policy-types.ts';
import type { ProxyRequest } from '../request/record.ts';

/**
 * What may be stored, and under which identity (docs/traffic.md#response-cache). RFC 9111's
 * shared-cache rules are http-cache-semantics' (storable, freshness, Vary, revalidation); on top of
 * them, and checked first, the rules that keep one person's response from another:
 *
 * - never a response with Set-Cookie, `Vary: *` or `Vary: Authorization`, `private` or `no-store`;
 * - on an authenticated route, a response is shared by everyone the route lets in only when the
 *   upstream says `public` or `s-maxage`; any other is stored for its subject alone (its key holds
 *   the subject), or not at all when the method gives none;
 * - no heuristic freshness: a response without max-age, s-maxage or Expires is stored only when the
 *   path gives a `default_ttl_seconds`.
 */

/** The partition of entries shared by everyone the route lets in. */
export const SHARED = '';

/** http-cache-semantics as a shared cache, with no freshness it was not told. */
const POLICY_OPTIONS: CachePolicy.Options = { shared: true, cacheHeuristic: 0, immutableMinTimeToLive: 0 };

export type Storage =
  | { readonly store: true; readonly partition: string; readonly policy: CachePolicy }
  | { readonly store: false; readonly reason: string };

/** Who is asking, as far as the cache is concerned: only the route's auth and its subject count. */
export interface Asker {
  readonly authenticated: boolean;
  /** The subject the auth stage set, or null (an open route, or a method that names nobody). */
  readonly subject: string | null;
}

export function askerOf(request: ProxyRequest): Asker {
  return {
    authenticated: request.route.auth !== null,
    subject: request.subject ?? request.identity?.subject ?? null,
  };
}

/** The partition of an asker's own entries, or null when it has none. */
export function subjectPartition(asker: Asker): string | null {
  return asker.authenticated && asker.subject !== null ? `s:${asker.subject}` : null;
}

/** Cache-Control directives, lower case; a directive without a value is `true`. */
export function parseCacheControl(value: string | undefined): Map<string, string | true> {
  const out = new Map<string, string | true>();
  if (value === undefined) return out;
  for (const part of value.split(',')) {
    const equals = part.indexOf('=');
    const name = (equals === -1 ? part : part.slice(0, equals)).trim().toLowerCase();
    if (name === '') continue;
    out.set(
      name,
      equals === -1
        ? true
        : part
            .slice(equals + 1)
            .trim()
            .replace(/^"|"$/g, ''),
    );
  }
  return out;
}

/** The response's Vary names, lower case. */
export function varyNames(vary: string | undefined): string[] {
  if (vary === undefined) return [];
  return vary
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
}

/** Response headers as the library wants them: one string per name (Set-Cookie never gets here). */
export function plainHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/**
 * The request as http-cache-semantics sees it: the normalised host and path?query (token removed),
 * always GET (a HEAD is answered from the GET's entry), and the client's headers for Vary. On an
 * authenticated route the credentials are left out: the identity rules above decided already, and
 * the key holds the subject.
 */
export function policyRequest(request: ProxyRequest, url: string): CachePolicy.Request {
  const headers: Record<string, string> = {};
  const incoming = request.req.headers;
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || name.charCodeAt(0) === 0x3a) continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  headers.host = request.host;
  if (request.route.auth !== null) delete headers.authorization;
  return { url, method: 'GET', headers };
}

/** Whether a response states its freshness itself (RFC 9111 §4.2.1), as opposed to a heuristic. */
function explicitFreshness(cc: Map<string, string | true>, headers: Record<string, string>): boolean {
  return cc.has('max-age') || cc.has('s-maxage') || headers.expires !== undefined;
}

/** The headers the policy is built from: the upstream's, with the path's default TTL when it gave none. */
export function withDefaultTtl(
  headers: Record<string, string>,
  config: Readonly<CacheConfig>,
): Record<string, string> {
  const cc = parseCacheControl(headers['cache-control']);
  if (explicitFreshness(cc, headers) || config.defaultTtlSeconds <= 0) return headers;
  const own = headers['cache-control'];
  const ttl = `s-maxage=${config.defaultTtlSeconds}`;
  return { ...headers, 'cache-control': own === undefined || own.trim() === '' ? ttl : `${own}, ${ttl}` };
}

/**
 * Whether the upstream's answer (headers already plain) may be stored for this asker, and how.
 * `request` is the library's view of the request (policyRequest).
 */
export function storageFor(
  asker: Asker,
  request: CachePolicy.Request,
  status: number,
  headers: Record<string, string>,
  config: Readonly<CacheConfig>,
): Storage {
  if (headers['set-cookie'] !== undefined) return refused('the response sets a cookie');
  const vary = varyNames(headers.vary);
  if (vary.includes('*')) return refused('Vary: *');
  if (vary.includes('authorization')) return refused('Vary: Authorization');
  const cc = parseCacheControl(headers['cache-control']);
  if (cc.has('no-store')) return refused('Cache-Control: no-store');
  if (cc.has('private')) return refused('Cache-Control: private');
  if (!explicitFreshness(cc, headers) && config.defaultTtlSeconds <= 0)
    return refused('no explicit freshness and no default_ttl_seconds');
  let partition = SHARED;
  if (asker.authenticated && !cc.has('public') && !cc.has('s-maxage')) {
    const own = subjectPartition(asker);
    if (own === null)
      return refused('an authenticated response, neither public nor s-maxage, with no subject');
    partition = own;
  }
  const length = headers['content-length'];
  if (length !== undefined && Number(length) > config.maxObjectBytes)
    return refused('larger than max_object_bytes');
  const policy = new CachePolicy(
    request,
    { status, headers: withDefaultTtl(headers, config) },
    POLICY_OPTIONS,
  );
  if (!policy.storable()) return refused('not storable (RFC 9111)');
  // Stale at once and nothing to revalidate it with: it could never be used.
  if (policy.timeToLive() <= 0 && headers.etag === undefined && headers['last-modified'] === undefined)
    return refused('stale on arrival');
  return { store: true, partition, policy };
}

/**
 * The policy a 304 to our revalidation refreshes (revalidatedPolicy): the 304's headers replace the
 * stored ones they name, so a default TTL given to the stored copy stays unless the 304 states its
 * own freshness. `matches` false: the 304 is not about the stored copy, which must not be updated.
 */
export function revalidated(
  policy: CachePolicy,
  request: CachePolicy.Request,
  headers: Record<string, string>,
): { policy: CachePolicy; matches: boolean } {
  const result = policy.revalidatedPolicy(request, {
    status: 304,
    headers,
  }) as CachePolicy.RevalidationPolicy & {
    matches?: boolean;
  };
  return { policy: result.policy, matches: result.matches !== false && !result.modified };
}

/** Seconds past freshness a stale copy may still be served while the upstream fails (RFC 5861). */
export function staleIfErrorAllows(policy: CachePolicy, cacheControl: string | undefined): boolean {
  const window = Number(parseCacheControl(cacheControl).get('stale-if-error'));
  return Number.isFinite(window) && window > 0 && policy.maxAge() + window > policy.age();
}

function refused(reason: string): Storage {
  return { store: false, reason };
}
