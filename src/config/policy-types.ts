/**
 * Per-path request policies (docs/policies.md) in domain terms: what upstreams.yaml's path keys
 * `rewrite`, `max_body_bytes`, `cors`, `source_ranges` and `deny_ranges` say, and what the Ingress
 * annotations of docs/ingress.md#request-policies translate to. One shape for every source of routes,
 * compiled once by routing/policies into the route's RoutePolicy.
 */

/** `rewrite`: the path sent upstream. */
export type RewriteConfig =
  /** The matched route prefix is replaced by `prefix` (`/api` → `/v2`: `/api/x` goes up as `/v2/x`). */
  | { kind: 'prefix'; prefix: string }
  /**
   * When `regex` matches the (normalised) path, the whole path becomes `replacement` with `$1`…
   * filled in, as nginx's `rewrite` does; otherwise the path is sent as it is.
   */
  | { kind: 'regex'; regex: string; replacement: string; caseInsensitive?: boolean };

/** `cors` (docs/policies.md#cors). Header and method names as written; origins lower case. */
export interface CorsConfig {
  /** Exact origins (`https://app.example.com`), full-match wildcards (`https://*.example.com`), or `*`. */
  allowOrigins: string[];
  allowMethods: string[];
  allowHeaders: string[];
  exposeHeaders: string[];
  allowCredentials: boolean;
  /** Access-Control-Max-Age of preflight answers; null = not sent. */
  maxAgeSeconds: number | null;
}

/** `cache` (docs/traffic.md#response-cache): this path's response cache. */
export interface CacheConfig {
  /** What this path's store may hold, in bytes. */
  maxBytes: number;
  /** A response larger than this is served, not stored (default 1m). */
  maxObjectBytes: number;
  /** Freshness given to a response that states none; 0 = such a response is not stored. */
  defaultTtlSeconds: number;
}

export interface PathPolicies {
  rewrite?: RewriteConfig;
  /** Request body limit in bytes; 0 = unlimited (overrides a global limit). Absent = the global one. */
  maxBodyBytes?: number;
  cors?: CorsConfig;
  /** CIDRs (or single addresses) the client address must be in; absent = any. */
  sourceRanges?: string[];
  /** CIDRs the client address must not be in (checked first). */
  denyRanges?: string[];
  /** Sent upstream as X-Forwarded-Prefix (an Ingress `x-forwarded-prefix`); client copies are dropped. */
  forwardedPrefix?: string;
  /** A request for `/` is redirected (302) here (an Ingress `app-root`). */
  appRoot?: string;
  /**
   * A regular expression the whole request path must match from its start (an Ingress path with
   * `use-regex`, case-insensitive as ingress-nginx's); the route's prefix is its literal beginning.
   */
  pathRegex?: string;
  cache?: CacheConfig;
}
