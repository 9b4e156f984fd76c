import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { registerEventLoopDelay } from './event-loop.ts';
import { RequestCounter, RouteHistogram } from './route-metrics.ts';
import { serverLoadNow } from './server-load.ts';

/**
 * Every Tollgate metric family, declared in one place so names, labels and help texts are reviewed
 * together (docs/observability.md). Labels come from config keys (route = host key + path key), never from
 * raw request values, so cardinality is bounded by the config.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });
/** tollgate_event_loop_delay_seconds: stalls of this process's event loop (observe/event-loop). */
export const eventLoopDelay = registerEventLoopDelay(registry);

export const logLinesDropped = new Counter({
  name: 'tollgate_log_lines_dropped_total',
  help: 'Log lines dropped because stdout did not take them and the log buffer was full.',
  registers: [registry],
});

// The two families written on every request: allocation-free recorders (observe/route-metrics).
export const requestsTotal = new RequestCounter({
  name: 'tollgate_requests_total',
  help: 'Proxied requests by route, method and response status.',
  registry,
});

export const requestDuration = new RouteHistogram({
  name: 'tollgate_request_duration_seconds',
  help: 'Time from request arrival to the end of the response, by route.',
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registry,
});

export const upstreamErrorsTotal = new Counter({
  name: 'tollgate_upstream_errors_total',
  help: 'Failed upstream attempts by route, server and kind (connect, tls, timeout, reset, protocol).',
  labelNames: ['route', 'server', 'kind'] as const,
  registers: [registry],
});

export const upstreamRejectedTotal = new Counter({
  name: 'tollgate_upstream_rejected_total',
  help: 'Requests answered 503 upstream_busy because a server had no free connection, by route, server and reason (queue_full, queue_timeout).',
  labelNames: ['route', 'server', 'reason'] as const,
  registers: [registry],
});

export const upstreamRetriesTotal = new Counter({
  name: 'tollgate_upstream_retries_total',
  help: "Attempts sent again under a Gateway API rule's retry, by route and reason (status: a retried status code; connect, reset, timeout, protocol: a failure before any answer).",
  labelNames: ['route', 'reason'] as const,
  registers: [registry],
});

export const mirrorRequestsTotal = new Counter({
  name: 'tollgate_mirror_requests_total',
  help: 'Gateway API RequestMirror copies by result (sent, failed, dropped, no_server, skipped_body).',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const clientSendTimeoutsTotal = new Counter({
  name: 'tollgate_client_send_timeouts_total',
  help: 'Responses reset because the client took no byte of them for client_send_timeout_seconds, by route.',
  labelNames: ['route'] as const,
  registers: [registry],
});

export const authFailuresTotal = new Counter({
  name: 'tollgate_auth_failures_total',
  help: 'Requests refused by authentication, by route, method and reason code.',
  labelNames: ['route', 'method', 'reason'] as const,
  registers: [registry],
});

export const passwordChecksTotal = new Counter({
  name: 'tollgate_password_checks_total',
  help: 'Hashed Basic passwords actually checked (scrypt runs; cached and shared answers are not counted).',
  registers: [registry],
});

export const forwardAuthDuration = new Histogram({
  name: 'tollgate_forward_auth_duration_seconds',
  help: 'Time a forward-auth check took, by route and result (allowed, denied, error).',
  labelNames: ['route', 'result'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

export const forwardAuthFailing = new Gauge({
  name: 'tollgate_forward_auth_failing',
  help: "1 while a route's last forward-auth check got no usable answer (it answered 503), by route and failure (timeout, unreachable, bad_status, body_too_large).",
  labelNames: ['route', 'failure'] as const,
  aggregator: 'max',
  registers: [registry],
});

export const rateLimitedTotal = new Counter({
  name: 'tollgate_rate_limited_total',
  help: 'Requests answered 429 by the rate limiter, by route.',
  labelNames: ['route'] as const,
  registers: [registry],
});

export const rateLimitBackendUp = new Gauge({
  name: 'tollgate_rate_limit_backend_up',
  help: '1 when the shared (Redis) rate-limit store answers, 0 while falling back to local limits.',
  // With workers (docs/workers.md) each reports its own connection: 0 if any of them is cut off.
  aggregator: 'min',
  registers: [registry],
});

export const tokensIssuedTotal = new Counter({
  name: 'tollgate_tokens_issued_total',
  help: 'JWTs issued by the token API.',
  registers: [registry],
});

export const tokenRequestsRefusedTotal = new Counter({
  name: 'tollgate_token_requests_refused_total',
  help: 'Token API requests refused, by reason.',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const configReloadsTotal = new Counter({
  name: 'tollgate_config_reloads_total',
  help: 'Attempts to apply a changed file, by file (upstreams.yaml, main.yaml, tls_certificate, masterkey_file, …) and result (success, failure; restart_required for main.yaml).',
  labelNames: ['file', 'result'] as const,
  registers: [registry],
});

export const configInfo = new Gauge({
  name: 'tollgate_config_info',
  help: 'Always 1, labelled with the config identity of the live upstreams.yaml (secrets left out, not the sha256 of the file): docs/configuration.md#config-identity.',
  labelNames: ['hash'] as const,
  registers: [registry],
});

export const configLastReloadSuccess = new Gauge({
  name: 'tollgate_config_last_reload_success_timestamp_seconds',
  help: 'Unix time the live content of each watched file was loaded (at start or by a reload), by file.',
  labelNames: ['file'] as const,
  aggregator: 'max',
  registers: [registry],
});

export const upstreamUp = new Gauge({
  name: 'tollgate_upstream_up',
  help: '1 when the server is in rotation for the route, 0 while ejected.',
  labelNames: ['route', 'server'] as const,
  // With workers each keeps its own passive health: 0 as soon as one of them ejected the server.
  aggregator: 'min',
  registers: [registry],
});

// Read from the connection slots at scrape time (observe/server-load): nothing more on the request path.
export const upstreamInFlight = new Gauge({
  name: 'tollgate_upstream_in_flight',
  help: 'Requests holding a connection to the server now, all routes together, by server.',
  labelNames: ['server'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const load of serverLoadNow()) this.set({ server: load.address }, load.inFlight);
  },
});

export const upstreamRequestsTotal = new Counter({
  name: 'tollgate_upstream_requests_total',
  help: 'Requests sent to the server (every attempt, retries included), all routes together, by server.',
  labelNames: ['server'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const load of serverLoadNow()) this.inc({ server: load.address }, load.dispatched);
  },
});

export const tlsCertificateExpiry = new Gauge({
  name: 'tollgate_tls_certificate_expiry_timestamp_seconds',
  help: 'Unix time a certificate of the TLS listener expires (its notAfter), by certificate (the main.yaml key) and the names it serves.',
  labelNames: ['certificate', 'names'] as const,
  // With workers each loads the same files: the earliest expiry is the one that matters.
  aggregator: 'min',
  registers: [registry],
});

export const revokedTokens = new Gauge({
  name: 'tollgate_revoked_tokens',
  help: 'Token ids listed in revoked_tokens_file and in force.',
  registers: [registry],
});

export const oidcProviderUp = new Gauge({
  name: 'tollgate_oidc_provider_up',
  help: 'Whether an OpenID provider (oidc_providers) has usable metadata, so its routes serve (1) or answer 503 (0), by provider.',
  labelNames: ['provider'] as const,
  // With workers: a provider one worker cannot use already fails that worker's requests.
  aggregator: 'min',
  registers: [registry],
});

export const oidcProviderProblem = new Gauge({
  name: 'tollgate_oidc_provider_problem',
  help: "1 while an OpenID provider's last discovery failed, by provider and problem (unreachable, timeout, tls, http_error, bad_metadata, client_secret, ca_file).",
  labelNames: ['provider', 'problem'] as const,
  aggregator: 'max',
  registers: [registry],
});

export const jwksRefreshesTotal = new Counter({
  name: 'tollgate_jwks_refreshes_total',
  help: 'Fetches of an external issuer key set (jwks_uri), by issuer and result (success, failure).',
  labelNames: ['issuer', 'result'] as const,
  registers: [registry],
});

// The response cache (docs/traffic.md#response-cache), per process; /metrics sums the workers.
export const cacheHitsTotal = new Counter({
  name: 'tollgate_cache_hits_total',
  help: 'Responses served from the response cache, by route and result (hit: fresh; stale: stale-while-revalidate or stale-if-error).',
  labelNames: ['route', 'result'] as const,
  registers: [registry],
});

export const cacheMissesTotal = new Counter({
  name: 'tollgate_cache_misses_total',
  help: 'Cacheable requests of a cached route that went to the upstream (no copy, or one to revalidate), by route.',
  labelNames: ['route'] as const,
  registers: [registry],
});

export const cacheCoalescedTotal = new Counter({
  name: 'tollgate_cache_coalesced_total',
  help: "Cache misses that waited for another request's upstream fetch of the same URL instead of making their own, by route.",
  labelNames: ['route'] as const,
  registers: [registry],
});

export const cacheBytes = new Gauge({
  name: 'tollgate_cache_bytes',
  help: 'Bytes held by the response cache (bodies, headers and keys), summed over the workers.',
  registers: [registry],
});

/**
 * The primary's own families (docs/workers.md), registered only when there is a primary, so a
 * single-process Tollgate exposes exactly the metrics it always did.
 */
export function registerWorkerMetrics() {
  return {
    restartsTotal: new Counter({
      name: 'tollgate_worker_restarts_total',
      help: 'Worker processes replaced by the primary, by reason (crash, config).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    serving: new Gauge({
      name: 'tollgate_workers_serving',
      help: 'Worker processes serving the live config; equals the configured workers when all is well.',
      registers: [registry],
    }),
  };
}

let tracingMetrics: ReturnType<typeof createTracingMetrics> | null = null;

/**
 * Tracing's families (docs/observability.md#tracing), registered only in a process that exports
 * spans, so one without `tracing:` exposes exactly the metrics it always did.
 */
export function registerTracingMetrics() {
  tracingMetrics ??= createTracingMetrics();
  return tracingMetrics;
}

function createTracingMetrics() {
  const dropped = new Counter({
    name: 'tollgate_trace_spans_dropped_total',
    help: 'Sampled spans never delivered to the collector, by reason (queue_full: the export queue was full; export_failed: the collector refused them or did not answer in time).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  // Both series from the start: a dashboard's rate() sees the first drop.
  for (const reason of ['queue_full', 'export_failed']) dropped.labels(reason).inc(0);
  return {
    dropped,
    exported: new Counter({
      name: 'tollgate_trace_spans_exported_total',
      help: 'Spans the collector accepted.',
      registers: [registry],
    }),
  };
}
