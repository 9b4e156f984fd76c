/**
 * The validated configuration, in domain terms. Nothing here is YAML-shaped: config/validate turns the
 * parsed documents into these types (or a list of ConfigIssues), and routing/compile turns an
 * UpstreamsConfig into the immutable RoutingTable the hot path uses.
 */

import type { RouteConditions } from '../routing/conditions.ts';
import type { RequestRedirectConfig } from '../routing/request-redirect.ts';
import type { PathPolicies } from './policy-types.ts';
import type { ServiceRef } from './service-ref.ts';

/** main.yaml `workers`: a count, or `auto` for the CPUs this container may use (docs/workers.md). */
export type WorkersSetting = number | 'auto';

/** More workers than this is a typo, not a machine: each one is a whole Node process. */
export const MAX_WORKERS = 256;

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent';

/** A listen address from main.yaml, e.g. `0.0.0.0:8080` or `[::1]:9090`. */
export interface ListenAddress {
  host: string;
  port: number;
}

export interface Timeouts {
  /** Upstream TCP connect (main.yaml `upstream_connect_timeout_seconds`, default 5). */
  upstreamConnectMs: number;
  /** Upstream response headers (`upstream_response_timeout_seconds`, default 60) → 504. */
  upstreamResponseHeadersMs: number;
  /** Idle keep-alive on client connections (`keepalive_timeout_seconds`, default 60). */
  clientKeepAliveMs: number;
  /** Time a client has to send its request headers (`client_header_timeout_seconds`, default 30). */
  clientHeadersMs: number;
  /** A new connection silent this long is closed (`client_first_byte_timeout_seconds`, default 10). */
  clientFirstByteMs: number;
  /** A request body pausing this long between chunks is cut (`client_body_timeout_seconds`, default 30). */
  clientBodyIdleMs: number;
  /** A response the client takes no byte of for this long is reset (`client_send_timeout_seconds`, default 60). */
  clientSendMs: number;
}

/** Per-upstream-server connection limits (docs/configuration.md "Upstream connections"). */
export interface UpstreamLimits {
  /** Requests in flight to one server (`upstream_max_connections`, default 512). */
  maxConnectionsPerServer: number;
  /** Of those, at most this many for one route (`upstream_max_connections_per_route`, default 3/4 of the above). */
  maxConnectionsPerRoute: number;
  /** Requests that may wait for a free connection to one server (`upstream_queue_size`, default 256). */
  queueSize: number;
  /** How long one waits before a 503 (`upstream_queue_timeout_seconds`, default 3). */
  queueTimeoutMs: number;
}

/** One `tls_certificates` entry: a PEM certificate (full chain) and its unencrypted key. */
export interface TlsPairFiles {
  certificate: string;
  key: string;
  /** `client_certificates`: this pair's client-certificate check; absent = main.yaml's `tls_client_certificates`. */
  clientCertificates?: ClientCertificateSettings | null;
}

/**
 * `client_certificates` of a TLS pair, or main.yaml's `tls_client_certificates` (the listener's
 * default): handshakes for its names ask for a client certificate (docs/authentication.md#client-certificates).
 */
export interface ClientCertificateSettings {
  /** Absolute path of the PEM CA bundle client certificates must chain to. */
  caFile: string;
  /** Absolute path of a PEM CRL (one per CA of the chain), or null. */
  crlFile: string | null;
  /** `require`: no valid certificate, no handshake. `optional`: the request goes on, a route decides. */
  mode: 'require' | 'optional';
  /** Certificates above the client's up to a CA of caFile (1 = issued by one of them directly). */
  verifyDepth: number;
}

/** main.yaml `http2:` (docs/configuration.md "HTTP/2"): what one client connection may ask of us. */
export interface Http2Limits {
  /** Streams one connection may have open at once (`max_concurrent_streams`, default 128). */
  maxConcurrentStreams: number;
  /** Bytes of one request's header list, names and values (`max_header_list_bytes`, default 16384). */
  maxHeaderListBytes: number;
  /** Streams a client may reset per second before its connection is closed (`max_resets_per_second`, default 100). */
  maxResetsPerSecond: number;
}

/** main.yaml `kubernetes:` (docs/kubernetes.md). Each null means "the default". */
export interface KubernetesSettings {
  /** Absolute path of a kubeconfig; null = $KUBECONFIG, then the pod's service account, then ~/.kube/config. */
  kubeconfig: string | null;
  /** null = the pod's namespace (service account), else the kubeconfig context's, else `default`. */
  namespace: string | null;
  /** Name of a ConfigMap whose `upstreams.yaml` key replaces the file, read through the API. */
  upstreamsConfigMap: string | null;
  /** `ingress_class`: serve Ingress objects of this IngressClass name (docs/ingress.md); null = off. */
  ingressClass?: string | null;
  /** `gateway_class`: serve Gateways of this GatewayClass name (docs/gateway-api.md); null = off. */
  gatewayClass?: string | null;
  /** `gateway_names`: only these Gateways (`namespace/name`) of that class are served; null = all. */
  gatewayNames?: string[] | null;
  /** `watch_namespaces`: the namespaces whose Ingresses are read; null = every namespace the RBAC allows. */
  watchNamespaces?: string[] | null;
  /** `publish_service`: `namespace/name` of Tollgate's own Service, written into Ingress status. */
  publishService?: { namespace: string; name: string } | null;
  /** `publish_address`: IPs or host names written into Ingress status instead. */
  publishAddress?: string[] | null;
}

export interface MainConfig {
  /** Absolute path of main.yaml. */
  file: string;
  proxyAddressHttp: ListenAddress;
  proxyAddressTls: ListenAddress | null;
  /** Absolute paths; both set exactly when proxyAddressTls is set. */
  tlsCertificate: string | null;
  tlsKeyFile: string | null;
  /**
   * `tls_certificates`: more pairs, chosen by SNI (docs/traffic.md#several-certificates). Absolute
   * paths; `tls_certificate`/`tls_key_file`, when set, come first in the served set.
   */
  tlsCertificates: TlsPairFiles[];
  /** `tls_client_certificates`: the default for every pair without its own `client_certificates`. */
  tlsClientCertificates?: ClientCertificateSettings | null;
  /** `http2_cleartext`: the plain listener also takes HTTP/2 with prior knowledge (h2c). */
  http2Cleartext: boolean;
  http2: Http2Limits;
  configAddress: ListenAddress;
  adminAddress: ListenAddress;
  /** Absolute path of upstreams.yaml. */
  upstreamsConf: string;
  logLevel: LogLevel;
  accessLog: boolean;
  /** `masterkey` (or alias `master_key`) as written in main.yaml; see config/masterkey for precedence. */
  masterkey: string | null;
  /** Absolute path of `masterkey_file`, when set. */
  masterkeyFile: string | null;
  tokenParam: string;
  maxTokenMinutes: number;
  /** Absolute path of `revoked_tokens_file` (one revoked jti per line), when set. */
  revokedTokensFile?: string | null;
  httpsPort: number;
  /** CIDRs as written, e.g. `10.0.0.0/8`, `::1/128`. */
  trustedProxies: string[];
  timeouts: Timeouts;
  /** Proxy client connections open at once (`max_client_connections`, default 10000). */
  maxClientConnections: number;
  upstreamLimits: UpstreamLimits;
  /** Seconds /readyz reports 503 while still serving, after SIGTERM (default 5). */
  shutdownDelaySeconds: number;
  /** Seconds in-flight requests get to finish once accepting stops (default 25). */
  shutdownGraceSeconds: number;
  /** `redis://…` for shared rate-limit counters, or null for in-memory. */
  rateLimitRedis: string | null;
  /** Proxy processes: 1 (one process, no primary) or more, or `auto` (see workers/count). */
  workers: WorkersSetting;
  /** The `kubernetes:` block; absent when main.yaml has none. */
  kubernetes?: KubernetesSettings;
  /** `oidc_providers`, by name; absent when main.yaml has none. */
  oidcProviders?: Record<string, OidcProviderSettings>;
  /** Absolute path of `session_secret_file` (one secret a line, each at least 32 bytes). */
  sessionSecretFile?: string | null;
  /** `session_max_age_seconds` (default 8 h): no session outlives it, refreshed or not. */
  sessionMaxAgeSeconds?: number;
  /**
   * Absolute path of `upstream_ca_file` (PEM): trusted for `https://` servers beside the system CAs
   * (docs/traffic.md#tls-to-upstreams). Absent when not set.
   */
  upstreamCaFile?: string | null;
  /** The `tracing:` block (docs/observability.md#tracing); absent when main.yaml has none. */
  tracing?: TracingSettings;
  /** `cache: { max_bytes }`: what every path's response cache holds together (docs/traffic.md#response-cache). */
  cache?: { maxBytes: number };
}

/** OpenTelemetry export settings (docs/observability.md#tracing), checked by config/validate-tracing. */
export interface TracingSettings {
  /** The collector's OTLP/HTTP base URL as written (`http://collector:4318`); spans go to `/v1/traces`. */
  endpoint: string;
  protocol: 'http/protobuf' | 'http/json';
  /** Share of new traces sampled, 0 to 1; an incoming traceparent's decision is followed. */
  sampleRatio: number;
  serviceName: string;
  /** Finished spans waiting for export at most; more are dropped (and counted). */
  queueSize: number;
  /** Longest a finished span waits before its batch is sent. */
  batchDelayMs: number;
}

/** An upstream server address as configured: `ip:port`, `[v6]:port` or `hostname:port`. */
export interface ServerAddress {
  /** Exactly as written in the config (used in logs and metric labels). */
  raw: string;
  /** Hostname or IP, without brackets. */
  host: string;
  port: number;
  /** Written `https://host:port`: dialled over TLS (docs/traffic.md#tls-to-upstreams). */
  tls?: boolean;
  /** `{ address, weight }`: its share of new requests (docs/traffic.md#weighted-servers); absent = 1. */
  weight?: number;
}

/**
 * A path's `upstream_protocol`: `auto` (ALPN on TLS servers, HTTP/1.1 on plain ones, gRPC to plain
 * ones as h2c), or one protocol for every request (docs/traffic.md#http2-to-upstreams).
 */
export type UpstreamProtocol = 'auto' | 'http1' | 'h2' | 'h2c';

export const UPSTREAM_PROTOCOLS: readonly UpstreamProtocol[] = ['auto', 'http1', 'h2', 'h2c'];

/** A path's `upstream_tls` (docs/traffic.md#tls-to-upstreams). Files are absolute paths. */
export interface UpstreamTlsConfig {
  /** PEM bundle trusted beside the system CAs, instead of main.yaml's `upstream_ca_file`. */
  caFile: string | null;
  /** SNI and the name the certificate must carry; null = the server's host part. */
  serverName: string | null;
  /** Client certificate and key for mTLS: both or neither. */
  certificateFile: string | null;
  keyFile: string | null;
  /** False only when `verify: false` is written out. */
  verify: boolean;
  /**
   * PEM read from a Kubernetes Secret (an Ingress `proxy-ssl-secret`) instead of files: `ca` beside
   * the system CAs, `cert` + `key` for mTLS. Absent for upstreams.yaml's file-based settings.
   */
  inline?: { ca: string | null; cert: string | null; key: string | null } | null;
}

export interface BasicUser {
  username: string;
  /** Exactly one of password / passwordHash is set. passwordHash is `scrypt$…` (see auth/password). */
  password: string | null;
  passwordHash: string | null;
}

export interface NamedApiKey {
  name: string;
  key: string;
}

export type AuthMethod = 'basic' | 'apikey' | 'jwt' | 'forward' | 'oidc' | 'client_certificate' | 'ext_authz';

/**
 * An `authorization.allow` block (docs/authentication.md#who-may-pass): each list present must match
 * (AND), any value of a list matches (OR). null = the key is absent. Emails and domains are lower case.
 */
export interface AllowRules {
  subjects: string[] | null;
  emails: string[] | null;
  emailDomains: string[] | null;
  groups: string[] | null;
  claims: Record<string, string[]> | null;
  /** Patterns on a client certificate's URI SANs (`spiffe://td/ns/payments/*`); absent = no rule. */
  uriSans?: string[] | null;
  /** Patterns on a client certificate's DNS SANs (`*.payments.svc`); absent = no rule. */
  dnsSans?: string[] | null;
  /** An RE2 expression the verified client certificate's whole CN must match (Ingress `auth-tls-match-cn`); absent = no rule. */
  commonNames?: string | null;
}

/** main.yaml `oidc_providers.<name>` (docs/authentication.md#openid-connect). */
export interface OidcProviderSettings {
  name: string;
  /** Exact issuer URL; discovery at `{issuer}/.well-known/openid-configuration`. */
  issuer: string;
  clientId: string;
  /** Absolute path of the file holding the client secret (config/file-checks reads it). */
  clientSecretFile: string;
  scopes: string[];
  groupsClaim: string;
  subjectClaim: string;
  passAccessToken: boolean;
  /** `require_verified_email`: an ID token without `email_verified` gives no email (default false). */
  requireVerifiedEmail: boolean;
  /** `ca_file`: a private CA (PEM bundle, absolute path) trusted for the provider's TLS; null = system CAs. */
  caFile?: string | null;
  /** `cookie_domain`: sessions are shared by the hosts under this domain (no leading dot); null = host-only. */
  cookieDomain?: string | null;
  /** `post_logout_redirect_url`: where the logout ends; null = the host's `/`. */
  postLogoutRedirectUrl?: string | null;
  /** The callback URL for routes under `DEFAULT` (no host of their own); null = the request's host. */
  redirectUrl: string | null;
}

/**
 * An `authorization` object. `type: api` is normalised to `apikey`, `data` to `creds`.
 * For basic, `creds: "user:pass"` is folded into `users`; for apikey, `creds: key` into `keys`
 * (with the name `apikey`). So consumers only read `users` / `keys`.
 */
export interface AuthorizationConfig {
  type: AuthMethod;
  users: BasicUser[];
  keys: NamedApiKey[];
  /** type jwt only; absent means the defaults: Tollgate's own tokens, browser links on. */
  jwt?: JwtSettings;
  /** The realm of the challenge (an Ingress `auth-realm`); absent = `tollgate`. */
  realm?: string;
  /** type forward only (always set for it): the auth service to ask. */
  forward?: ForwardAuthSettings;
  /** type oidc only (always set for it): the main.yaml `oidc_providers` entry that logs people in. */
  oidc?: { provider: string };
  /** Who may pass once authenticated; absent = everyone the method accepts. */
  allow?: AllowRules;
  /** type client_certificate only (always set for it). */
  clientCertificate?: ClientCertificateAuth;
  /** type ext_authz only (always set for it): the authorization service to ask. */
  extAuthz?: ExtAuthzSettings;
}

/** Where a client certificate's subject is read from, in order (the first present wins). */
export type SubjectSource = 'uri_san' | 'dns_san' | 'email_san' | 'cn';

/** `type: client_certificate` (docs/authentication.md#client-certificates). */
export interface ClientCertificateAuth {
  subjectFrom: SubjectSource[];
  /** `forward_client_certificate`: X-Forwarded-Client-Cert (`xfcc`), ssl-client-cert (`pem`) or none. */
  forward: 'xfcc' | 'pem' | 'none';
  /**
   * A request without a verified certificate passes with no subject (Ingress `auth-tls-verify-client:
   * optional`); the certificate, when there is one, still sets the subject and is forwarded.
   */
  anonymous?: boolean;
  /**
   * Where a request without an acceptable certificate is redirected (302) instead of answered 401
   * (Ingress `auth-tls-error-page`); absent = 401.
   */
  errorPage?: string;
}

/** `type: ext_authz` (docs/authentication.md#external-authorization): Envoy's Authorization/Check over gRPC. */
export interface ExtAuthzSettings {
  /** `host:port` of the gRPC service. */
  address: string;
  /** `grpc.tls`: null = plaintext (h2c); else TLS, trusting `caFile` (absolute) or the system CAs. */
  tls: { caFile: string | null; serverName: string | null } | null;
  timeoutMs: number;
  /** Request body bytes sent with the check (0 = none). */
  includeBodyBytes: number;
  /** An unusable answer lets the request through instead of 503 `auth_unavailable`. */
  failOpen: boolean;
}

/**
 * `type: forward` (docs/authentication.md#forward-auth): every request of the route is first sent,
 * without its body, to an auth service (oauth2-proxy, Authelia…) that answers 2xx to let it through,
 * 401/403/3xx to be relayed to the client, anything else to fail closed (503 auth_unavailable).
 * Header names are lower case. Other sources of config (Ingress annotations) fill the same fields:
 * `auth-url` → url, `auth-response-headers` → authResponseHeaders, `auth-signin` → signinUrl.
 */
export interface ForwardAuthSettings {
  /** Absolute http(s) URL the check is sent to (`url`, or `creds`/`data` as Aralez configs write it). */
  url: string;
  /** Client request headers passed to the auth service (`auth_request_headers`, default cookie, authorization). */
  authRequestHeaders: string[];
  /**
   * Auth service response headers copied into the upstream request on 2xx (`auth_response_headers`);
   * client-sent copies of these names never reach the upstream, whatever the auth service answered.
   */
  authResponseHeaders: string[];
  /** Response header whose value is the subject (X-Tollgate-Subject, access log), or null. */
  subjectHeader: string | null;
  /** Whole check, connect to body (`timeout_seconds`, default 5). */
  timeoutMs: number;
  /**
   * `signin_url`: a 401 from the auth service becomes a 302 to this URL with `rd=` the original URL
   * (what nginx's auth_request + error_page and ingress-nginx `auth-signin` do); null relays the 401.
   */
  signinUrl: string | null;
}

/** One header written by a rule: `name` lower case, `value` as configured. */
export interface HeaderValue {
  name: string;
  value: string;
}

/**
 * `request_headers` / `response_headers` (docs/configuration.md#header-rules): applied in the order
 * remove, set (replaces every copy), add (appends). Names are lower case.
 */
export interface HeaderOps {
  set: HeaderValue[];
  add: HeaderValue[];
  remove: string[];
}

/** An OpenID issuer whose tokens a jwt policy accepts (docs/tokens.md#external-issuers). */
export interface ExternalIssuer {
  /** Exact `iss` value. */
  issuer: string;
  /** Accepted `aud` values (one must match). */
  audience: string[];
  /** Exactly one of jwksUri / jwksFile is set; jwksFile is absolute. */
  jwksUri: string | null;
  jwksFile: string | null;
  /** Claim sent upstream as X-Tollgate-Subject (default `sub`). */
  subjectClaim: string;
}

export interface JwtSettings {
  /** Tokens signed with the masterkey (issuer `tollgate`) are accepted. */
  acceptTollgate: boolean;
  external: ExternalIssuer[];
  /** Link navigations are exchanged for a cookie (docs/tokens.md#links-in-a-browser). */
  browserLinks: boolean;
}

export interface HealthCheckConfig {
  path: string;
  intervalSeconds: number;
}

/** A path of a host; build one with config/path-config `pathConfig`, which fills every field's "none". */
export interface PathConfig {
  /**
   * The path key in routing form (routing/normalise normalisePrefix): `/v1/` is written `/v1`,
   * `/café` is `/caf%C3%A9`. Two keys with one routing form are refused by validation.
   */
  prefix: string;
  /** Listed servers; empty when the path names a `service` instead (exactly one of the two is set). */
  servers: ServerAddress[];
  /** `service: "web:8080"`: the servers are the Service's ready endpoints (docs/kubernetes.md). */
  service: ServiceRef | null;
  toHttps: boolean;
  authorization: AuthorizationConfig | null;
  /** Requests per second per client IP; overrides the global value when set. */
  rateLimit: number | null;
  healthCheck: HealthCheckConfig | null;
  /** Matches the path exactly, not as a prefix (an Ingress `pathType: Exact`, docs/ingress.md). */
  exact: boolean;
  /**
   * Why this route cannot be served safely (an Ingress whose auth Secret is missing): it answers 503
   * `auth_misconfigured` instead of forwarding, so a broken policy closes the path, never opens it.
   */
  unavailable: string | null;
  /** Sticky sessions for this path alone (an Ingress annotation); overrides the global setting. */
  stickySessions: StickySessions | null;
  /** Where the path came from when not from upstreams.yaml, e.g. `ingress/apps/web` (logs, metrics). */
  origin: string | null;
  /** Rules for the request sent upstream; null = none at this level. */
  requestHeaders: HeaderOps | null;
  /** Rules for the response sent to the client; null = none at this level. */
  responseHeaders: HeaderOps | null;
  /** `redirect_to`: every request is answered 301/308 to this URL + the request path and query. */
  redirectTo: string | null;
  /** Failed authentications per client IP per host per minute before 429; overrides the global value. */
  authFailureLimit: number | null;
  /** `upstream_tls`, or null for the defaults. */
  upstreamTls: UpstreamTlsConfig | null;
  /** `upstream_protocol`; `auto` unless written. */
  upstreamProtocol: UpstreamProtocol;
  /** Request policies: rewrite, body limit, CORS, source ranges (docs/policies.md); null = none. */
  policies: PathPolicies | null;
  /** `timeouts`, `upstream_host`, `redirect` and a canary split (config/validate-backend); null = none. */
  timeouts: PathTimeouts | null;
  upstreamHost: string | null;
  redirect: FixedRedirect | null;
  canary: CanaryConfig | null;
  /** Gateway API match conditions (routing/conditions); never set by upstreams.yaml. */
  conditions: RouteConditions | null;
  /** Why the backend cannot be resolved (a Gateway API backendRef): the path answers 500. */
  backendError: string | null;
  /**
   * The share (0–1) of requests that belong to backendRefs which cannot be resolved while others
   * can: those requests answer 500, the rest go to the resolved ones (docs/gateway-api.md).
   */
  backendErrorShare: number | null;
  /** A Gateway API RequestRedirect filter (routing/request-redirect); never set by upstreams.yaml. */
  requestRedirect: RequestRedirectConfig | null;
  /** A Gateway API rule's `retry` (upstream/retry.ts); never set by upstreams.yaml. */
  retry: RetryConfig | null;
  /** Gateway API RequestMirror filters (upstream/mirror): copies sent to these Services; never set by upstreams.yaml. */
  mirrors: MirrorConfig[] | null;
}

/**
 * A Gateway API rule's `retry` (docs/gateway-api.md#retries): the answers retried, how many times,
 * the wait before each retry, and the rule's `timeouts.request`, which bounds every attempt together.
 */
export interface RetryConfig {
  /** Status codes (400-599) whose answer is retried; empty = only failures without an answer. */
  codes: readonly number[];
  /** Retries after the first attempt. */
  attempts: number;
  backoffMs: number;
  /** The whole request, every attempt and wait included; null = no bound but each attempt's. */
  budgetMs: number | null;
}

/** One RequestMirror filter: the Service a copy of the request goes to, for this share (0–1] of requests. */
export interface MirrorConfig {
  service: ServiceRef;
  share: number;
}

/** A path's `timeouts` (docs/traffic.md#timeouts): each null = main.yaml's value. */
export interface PathTimeouts {
  connectMs: number | null;
  responseMs: number | null;
  idleMs: number | null;
}

/** `redirect: { url, code }` (an Ingress `permanent-redirect`/`temporal-redirect`): this URL exactly. */
export interface FixedRedirect {
  url: string;
  code: 301 | 302 | 303 | 307 | 308;
}

/**
 * A canary Ingress's split of a main Ingress's path (docs/ingress.md#canary-ingresses): its servers
 * take `weight` of `weightTotal` new requests, or every request a header or cookie sends there.
 */
export interface CanaryConfig {
  /** The canary's Service (its endpoints are the canary servers). */
  service: ServiceRef | null;
  /** Where the canary came from, e.g. `ingress/apps/web-canary` (logs). */
  origin: string;
  weight: number;
  weightTotal: number;
  /** Header name (lower case) that routes by value: `always`/`never`, or `headerValue` when set. */
  header: string | null;
  headerValue: string | null;
  /** Cookie name whose value `always`/`never` routes. */
  cookie: string | null;
  /**
   * Request header rules for requests sent to the canary's servers instead of the path's (a Gateway
   * API backendRef's own RequestHeaderModifier); absent = the path's.
   */
  requestHeaders?: HeaderOps | null;
}

export interface HostConfig {
  /**
   * The host key in routing form (routing/normalise normaliseHostKey): lower case, no trailing dot,
   * IPv6 canonical without brackets, IPv4-mapped IPv6 as IPv4; or `DEFAULT`.
   */
  name: string;
  paths: PathConfig[];
}

export interface StickySessions {
  /** Cookie Max-Age in seconds, or null for a session cookie. */
  maxAgeSeconds: number | null;
}

export interface UpstreamsConfig {
  /** Absolute path of upstreams.yaml. */
  file: string;
  /**
   * sha256 hex of the file's bytes, for change detection only. Never published: a hash of a file
   * holding passwords lets them be guessed offline. The published identity is RoutingTable.hash.
   */
  hash: string;
  /** `kubernetes` allows `service:` paths; `file` lists every server by address. */
  provider: 'file' | 'kubernetes';
  masterkey: string | null;
  /** null when sticky sessions are off. */
  stickySessions: StickySessions | null;
  toHttps: boolean;
  rateLimit: number | null;
  authorization: AuthorizationConfig | null;
  requestHeaders: HeaderOps | null;
  responseHeaders: HeaderOps | null;
  authFailureLimit: number | null;
  /** Global `max_body_bytes` (docs/policies.md#max_body_bytes); null = no limit. */
  maxBodyBytes: number | null;
  /** In file order. */
  hosts: HostConfig[];
}

/** One problem found in a config file. */
export interface ConfigIssue {
  file: string;
  /** 1-based; 0 when the problem has no position (e.g. the file is missing). */
  line: number;
  column: number;
  /** YAML path such as `upstreams.api.example.com.paths./v1.servers[2]`, or '' for the document. */
  path: string;
  message: string;
}
