import type {
  AuthorizationConfig,
  HealthCheckConfig,
  RetryConfig,
  StickySessions,
  UpstreamProtocol,
} from '../config/types.ts';
import type { BackendPolicies } from './backend-policies.ts';
import type { MatchRequest, RouteConditions } from './conditions.ts';
import type { HeaderRules } from './header-rules.ts';
import type { RoutePolicy } from './policies.ts';
import type { RequestRedirectConfig } from './request-redirect.ts';

/**
 * How a server is dialled (docs/traffic.md#tls-to-upstreams): TLS settings, if any, and the
 * path's `upstream_protocol`. Frozen, compiled once per (re)load; the request only reads it.
 */
export interface UpstreamTransport {
  /** null: plain TCP. */
  readonly tls: UpstreamTlsSettings | null;
  readonly protocol: UpstreamProtocol;
  /** The path's `timeouts.connect_seconds` in ms; null = main.yaml's `upstream_connect_timeout_seconds`. */
  readonly connectTimeoutMs?: number | null;
  /** Identity of these settings: part of every pool key (undici drops a connection when they change). */
  readonly key: string;
}

export interface UpstreamTlsSettings {
  /** The path's `ca_file`, or null for main.yaml's `upstream_ca_file` (if any) beside the system CAs. */
  readonly caFile: string | null;
  /** The name sent as SNI (unless an IP) and checked against the certificate. */
  readonly serverName: string;
  readonly certificateFile: string | null;
  readonly keyFile: string | null;
  readonly verify: boolean;
  /** PEM from a Secret (an Ingress `proxy-ssl-secret`), used instead of the files; absent = none. */
  readonly inline?: Readonly<{ ca: string | null; cert: string | null; key: string | null }> | null;
}

/** One upstream server of a route. Frozen; shared by every route that names the same address. */
export interface UpstreamServer {
  /**
   * Opaque, stable identifier derived from the configured address (not from process memory), so
   * every replica with the same config computes the same id. Used in sticky cookies: never the IP.
   */
  readonly id: string;
  /** The address as configured (`10.0.0.5:8080`), used in logs and metric labels. */
  readonly address: string;
  /** `http://host:port` or `https://host:port`, IPv6 hosts bracketed. */
  readonly origin: string;
  readonly transport: UpstreamTransport;
  /** origin + transport key: servers with equal pool keys share connections. */
  readonly poolKey: string;
}

/** Everything a request needs once it matched, resolved at compile time. Frozen. */
export interface Route extends BackendPolicies {
  /** Metric/log label: host key + path key, e.g. `api.example.com/v1` or `DEFAULT/`. */
  readonly id: string;
  /** Lower-cased host key or `DEFAULT`. */
  readonly hostKey: string;
  /** Normalised path prefix (`/` or `/v1`, no trailing slash except the root); the whole path when `exact`. */
  readonly prefix: string;
  /** Only the path `prefix` itself matches (an Ingress `pathType: Exact`). */
  readonly exact: boolean;
  /** Set when the route must answer 503 `auth_misconfigured` (its policy could not be built). */
  readonly unavailable: string | null;
  /**
   * Method, header and query conditions (a Gateway API match, routing/conditions); null or absent
   * for every route of upstreams.yaml and Ingresses.
   */
  readonly conditions?: RouteConditions | null;
  /** Set when the route's backend cannot be resolved: it answers 500 `backend_not_resolved` (docs/gateway-api.md). */
  readonly backendError?: string | null;
  /** The share of requests answered 500 for unresolvable backendRefs beside resolved ones; absent = none. */
  readonly backendErrorShare?: number | null;
  /** A Gateway API RequestRedirect: every request is redirected (routing/request-redirect); absent = none. */
  readonly requestRedirect?: RequestRedirectConfig | null;
  /** A Gateway API rule's `retry` (upstream/retry.ts); absent or null = failover only. */
  readonly retry?: Readonly<RetryConfig> | null;
  readonly servers: readonly UpstreamServer[];
  /**
   * The `service:` reference the servers were discovered from, as written, or null for listed
   * servers. A service route may have no server: it then answers 503 no_ready_endpoints.
   */
  readonly service: string | null;
  /** Effective policy: the global `authorization` when present, else the path's own, else null. */
  readonly auth: AuthorizationConfig | null;
  /** Global `to_https` or the path's. */
  readonly toHttps: boolean;
  /** Path `rate_limit` ?? global `rate_limit` ?? null (unlimited). */
  readonly rateLimit: number | null;
  readonly sticky: StickySessions | null;
  readonly healthCheck: HealthCheckConfig | null;
  /** `redirect_to` (no trailing slash): every request is answered 301/308 there; null = none. */
  readonly redirectTo: string | null;
  /** Path `auth_failure_limit` ?? global ?? null (no guard); only used when `auth` is set. */
  readonly authFailureLimit: number | null;
  /** Rules for the request sent upstream (global and path merged), or null. */
  readonly requestHeaders: HeaderRules | null;
  /**
   * Rules for a request sent to a server of the canary side (`canary.firstServer` on) instead of
   * `requestHeaders`, where the canary has its own (docs/gateway-api.md#filters); absent = none.
   */
  readonly canaryRequestHeaders?: HeaderRules | null;
  /** Rules for the upstream's response on its way to the client, or null. */
  readonly responseHeaders: HeaderRules | null;
  /** Source ranges, CORS, app root, body limit, rewrite (docs/policies.md); null = none of them. */
  readonly policy?: RoutePolicy | null;
  /** Gateway API RequestMirror targets (upstream/mirror); absent or null = none. */
  readonly mirrors?: readonly RouteMirror[] | null;
}

/** Where copies of a route's requests go: one Service's servers, for a share (0–1] of requests. */
export interface RouteMirror {
  /** The Service as written (`name.namespace:port`), for logs. */
  readonly service: string;
  readonly share: number;
  /** Its ready servers now; none = nothing is mirrored to it. */
  readonly servers: readonly UpstreamServer[];
}

/** The compiled, immutable routing table. A request takes one reference at arrival and keeps it. */
export interface RoutingTable {
  /**
   * The config identity published in tollgate_config_info{hash}, /readyz and logs: equal on every
   * replica serving the same routes with the same masterkey, and revealing nothing about secrets
   * (routing/identity).
   */
  readonly hash: string;
  /**
   * sha256 of the upstreams.yaml bytes this table was compiled from: for change detection only
   * (a file rewritten with the same bytes is not reloaded). Never published: it can be guessed at.
   */
  readonly sourceHash: string;
  readonly routes: readonly Route[];
  /** Every distinct server of every route. */
  readonly servers: readonly UpstreamServer[];
  /**
   * `host` must already be normalised (routing/normalise), `path` normalised too; `request` is read
   * and `query` (raw, without `?`) only by routes with conditions (routing/conditions); `secure`
   * (the request's, default false) only by routes attached through one kind of Gateway listener.
   */
  match(host: string, path: string, request?: MatchRequest, query?: string, secure?: boolean): Route | null;
}
