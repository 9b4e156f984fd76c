import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Route, RoutingTable } from '../routing/types.ts';
import type { ReloadRecord } from './reload-journal.ts';

/**
 * The model behind /status and /status.json on the admin port (docs/observability.md#status): what
 * is routed where, how each server is doing, where the config came from and how its last reload
 * went, the listener's certificates and the workers. Built, like Traefik's runtime view, from what
 * the process already keeps: the live routing table, the metrics it exports (so a number on the page
 * is the number Prometheus scrapes, summed over workers by the primary) and the reload journal.
 *
 * Nothing credential-bearing is ever read into it: a route's auth is its method and how many users
 * or keys it has, never a password hash, key, secret, token, URL or header of an auth service.
 */

/** One process's (or a primary's summed) metrics, as prom-client's getMetricsAsJSON gives them. */
export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

/**
 * The most routes listed: with tens of thousands of routes the page must stay small and cheap to
 * build. Routes needing attention are listed first, so truncation only ever hides healthy ones.
 */
export const MAX_STATUS_ROUTES = 500;
/** Certificates expiring sooner than this are flagged (the chart's alert uses the same bound). */
export const CERTIFICATE_WARNING_DAYS = 14;
const DAY_MS = 86_400_000;

export type RouteState = 'ok' | 'warning' | 'down';

export interface ServerStatus {
  address: string;
  /** In rotation for this route now (tollgate_upstream_up). */
  up: boolean;
  /** Requests sent to the server, all routes together (tollgate_upstream_requests_total). */
  requests: number;
  /** Failed attempts of this route on the server, every kind (tollgate_upstream_errors_total). */
  errors: number;
  /** Requests holding a connection to it now, all routes together (tollgate_upstream_in_flight). */
  in_flight: number;
}

export interface RouteStatus {
  id: string;
  host: string;
  path: string;
  exact: boolean;
  /** basic, apikey, jwt, forward, … or none; `redirect` routes answer before any auth. */
  auth: string;
  /** How many users (basic) or keys (apikey) the route accepts: a count, never a credential. */
  credentials: number | null;
  redirect_to: string | null;
  service: string | null;
  state: RouteState;
  /** Why the state is not ok, in words. */
  problems: string[];
  requests: number;
  responses_5xx: number;
  servers: ServerStatus[];
}

export interface SourceStatus {
  source: string;
  origin: string | null;
  last_attempt: string;
  result: ReloadRecord['result'];
  hash: string | null;
  last_success: string | null;
  problems: readonly string[];
}

export interface CertificateStatus {
  certificate: string;
  names: string[];
  expires_at: string;
  days_left: number;
  /** Expires within CERTIFICATE_WARNING_DAYS (or already has). */
  warning: boolean;
}

export interface WorkerStatus {
  index: number;
  pid: number | null;
  state: string;
  /** Serves the config the primary last sent (false while a swap is in progress). */
  serves_live_config: boolean;
}

export interface WorkersStatus {
  configured: number;
  serving: number;
  restarts: Record<string, number>;
  list: WorkerStatus[];
}

/** An OpenID provider (docs/authentication.md#openid-connect) as its last discovery left it. */
export interface ProviderStatus {
  name: string;
  /** ok; failing: the last discovery failed but earlier metadata still serves; down: its routes answer 503. */
  state: 'ok' | 'failing' | 'down';
  /** What the last failed discovery said, in words; null when it succeeded. */
  problem: string | null;
}

export interface StatusModel {
  generated_at: string;
  phase: string;
  config_hash: string;
  totals: {
    routes: number;
    servers: number;
    routes_down: number;
    routes_warning: number;
    requests: number;
    responses_5xx: number;
  };
  routes: RouteStatus[];
  /** Set when more routes exist than are listed (see MAX_STATUS_ROUTES). */
  routes_truncated: { shown: number; total: number } | null;
  sources: SourceStatus[];
  kubernetes: {
    watches: Array<{ resource: string; up: boolean; last_sync: string | null }>;
    /** Ingresses not served as written (tollgate_ingress_rejected = 1): see their Events. */
    ingresses_rejected: Array<{ namespace: string; name: string }>;
  } | null;
  certificates: CertificateStatus[];
  workers: WorkersStatus | null;
  /** OpenID providers of main.yaml, once each has tried discovery (empty without any). */
  providers: ProviderStatus[];
}

export interface StatusInputs {
  now: number;
  phase: string;
  table: RoutingTable;
  metrics: MetricsSnapshot;
  reloads: readonly ReloadRecord[];
  workers: Omit<WorkersStatus, 'restarts'> | null;
  maxRoutes?: number;
}

export function buildStatus(inputs: StatusInputs): StatusModel {
  const { table, now } = inputs;
  const metrics = indexMetrics(inputs.metrics);
  const requests = sumBy(metrics.get('tollgate_requests_total'), ['route']);
  const failures = sumBy(metrics.get('tollgate_requests_total'), ['route'], (labels) =>
    String(labels.status).startsWith('5'),
  );
  const upstreamErrors = sumBy(metrics.get('tollgate_upstream_errors_total'), ['route', 'server']);
  const up = sumBy(metrics.get('tollgate_upstream_up'), ['route', 'server']);
  const dispatched = sumBy(metrics.get('tollgate_upstream_requests_total'), ['server']);
  const inFlight = sumBy(metrics.get('tollgate_upstream_in_flight'), ['server']);
  const forwardFailures = labelOf(metrics.get('tollgate_forward_auth_failing'), 'route', 'failure');
  const providers = providerStatus(metrics);
  const providerNamed = new Map(providers.map((provider) => [provider.name, provider]));

  const all = table.routes.map((route) => {
    const servers = route.servers.map((server) => {
      const key = `${route.id}\n${server.address}`;
      return {
        address: server.address,
        // No series yet (a server just added): health starts optimistic, as the balancer does.
        up: (up.get(key) ?? 1) > 0,
        requests: dispatched.get(server.address) ?? 0,
        errors: upstreamErrors.get(key) ?? 0,
        in_flight: inFlight.get(server.address) ?? 0,
      };
    });
    const { state, problems } = routeState(route, servers, providerNamed, forwardFailures);
    return {
      id: route.id,
      host: route.hostKey,
      path: route.prefix,
      exact: route.exact,
      auth: route.redirectTo !== null ? 'redirect' : (route.auth?.type ?? 'none'),
      credentials: credentialCount(route),
      redirect_to: route.redirectTo === null ? null : withoutSecrets(route.redirectTo),
      service: route.service,
      state,
      problems,
      requests: requests.get(route.id) ?? 0,
      responses_5xx: failures.get(route.id) ?? 0,
      servers,
    } satisfies RouteStatus;
  });
  const maxRoutes = inputs.maxRoutes ?? MAX_STATUS_ROUTES;
  const order: Record<RouteState, number> = { down: 0, warning: 1, ok: 2 };
  // Stable: within a state, the table's own order.
  const listed = [...all].sort((a, b) => order[a.state] - order[b.state]).slice(0, maxRoutes);

  let totalRequests = 0;
  let total5xx = 0;
  for (const value of requests.values()) totalRequests += value;
  for (const value of failures.values()) total5xx += value;

  return {
    generated_at: new Date(now).toISOString(),
    phase: inputs.phase,
    config_hash: table.hash,
    totals: {
      routes: all.length,
      servers: new Set(table.servers.map((server) => server.address)).size,
      routes_down: all.filter((route) => route.state === 'down').length,
      routes_warning: all.filter((route) => route.state === 'warning').length,
      requests: totalRequests,
      responses_5xx: total5xx,
    },
    routes: listed,
    routes_truncated: all.length > listed.length ? { shown: listed.length, total: all.length } : null,
    sources: inputs.reloads.map((record) => ({
      source: record.source,
      origin: record.origin,
      last_attempt: new Date(record.at).toISOString(),
      result: record.result,
      hash: record.hash,
      last_success: record.lastSuccessAt === null ? null : new Date(record.lastSuccessAt).toISOString(),
      problems: record.problems,
    })),
    kubernetes: kubernetesStatus(metrics),
    certificates: certificates(metrics, now),
    workers:
      inputs.workers === null
        ? null
        : {
            ...inputs.workers,
            restarts: Object.fromEntries(sumBy(metrics.get('tollgate_worker_restarts_total'), ['reason'])),
          },
    providers,
  };
}

function routeState(
  route: Route,
  servers: readonly ServerStatus[],
  providers: ReadonlyMap<string, ProviderStatus>,
  forwardFailures: ReadonlyMap<string, string>,
): { state: RouteState; problems: string[] } {
  // Traefik's runtime view in miniature: a route that cannot serve is down, one that serves with
  // fewer servers than configured is a warning.
  if (route.unavailable !== null) return { state: 'down', problems: ['auth policy could not be built'] };
  if (route.redirectTo !== null) return { state: 'ok', problems: [] };
  // What it answers is what it shows: a route whose login provider cannot be used answers 503.
  const provider = route.auth?.type === 'oidc' ? providers.get(route.auth.oidc?.provider ?? '') : undefined;
  if (provider?.state === 'down')
    return {
      state: 'down',
      problems: [`OpenID provider ${provider.name} unavailable: ${provider.problem ?? 'not discovered yet'}`],
    };
  const forwardFailure = route.auth?.type === 'forward' ? forwardFailures.get(route.id) : undefined;
  if (forwardFailure !== undefined)
    return {
      state: 'down',
      problems: [`forward-auth service ${FORWARD_FAILURES[forwardFailure] ?? forwardFailure} (last check)`],
    };
  if (servers.length === 0)
    return { state: 'down', problems: [route.service ? 'no ready endpoints' : 'no servers'] };
  const down = servers.filter((server) => !server.up).length;
  if (down === servers.length) return { state: 'down', problems: ['no healthy server'] };
  if (down > 0)
    return { state: 'warning', problems: [`${down} of ${servers.length} servers out of rotation`] };
  return { state: 'ok', problems: [] };
}

/** A URL's scheme, host and path: user info and query are left out, they may carry a secret. */
function withoutSecrets(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return '(not shown)';
  }
}

function credentialCount(route: Route): number | null {
  const auth = route.auth;
  if (auth === null) return null;
  if (auth.type === 'basic') return auth.users.length;
  if (auth.type === 'apikey') return auth.keys.length;
  return null;
}

type Labels = Partial<Record<string, string | number>>;

function indexMetrics(snapshot: MetricsSnapshot): Map<string, MetricsSnapshot[number]> {
  return new Map(snapshot.map((metric) => [metric.name, metric]));
}

/** Sums a metric's samples by the given labels, keyed by their values joined with a newline. */
function sumBy(
  metric: MetricsSnapshot[number] | undefined,
  labelNames: readonly string[],
  keep: (labels: Labels) => boolean = () => true,
): Map<string, number> {
  const sums = new Map<string, number>();
  if (metric === undefined) return sums;
  for (const sample of metric.values) {
    const labels = sample.labels as Labels;
    if (!keep(labels)) continue;
    const key = labelNames.map((name) => String(labels[name] ?? '')).join('\n');
    sums.set(key, (sums.get(key) ?? 0) + sample.value);
  }
  return sums;
}

/** What a failed forward-auth check (auth/forward) means, for a person; never the service's URL. */
const FORWARD_FAILURES: Readonly<Record<string, string>> = {
  timeout: 'did not answer in time',
  unreachable: 'cannot be reached',
  bad_status: 'answered neither 2xx nor 401, 403 or a redirect',
  body_too_large: 'answered a refusal over 64 KiB',
};

/** For each value of `key`, the value of `label` of a sample above 0 (a gauge set to 1 while true). */
function labelOf(
  metric: MetricsSnapshot[number] | undefined,
  key: string,
  label: string,
): Map<string, string> {
  const found = new Map<string, string>();
  for (const sample of metric?.values ?? []) {
    if (sample.value <= 0) continue;
    const labels = sample.labels as Labels;
    found.set(String(labels[key] ?? ''), String(labels[label] ?? ''));
  }
  return found;
}

/** What each discovery problem (auth/oidc/provider-health) means, for a person. */
const PROVIDER_PROBLEMS: Readonly<Record<string, string>> = {
  unreachable: 'cannot be reached (connection refused or reset, or no such host)',
  timeout: 'did not answer in time',
  tls: 'its TLS certificate is not trusted (a private CA needs ca_file)',
  http_error: 'answers discovery with an HTTP error',
  bad_metadata: 'answers discovery with something that is not OpenID metadata',
  client_secret: 'client_secret_file cannot be read',
  ca_file: 'ca_file cannot be read or holds no certificate',
};

function providerStatus(metrics: Map<string, MetricsSnapshot[number]>): ProviderStatus[] {
  const up = sumBy(metrics.get('tollgate_oidc_provider_up'), ['provider']);
  const problems = new Map<string, string>();
  for (const sample of metrics.get('tollgate_oidc_provider_problem')?.values ?? []) {
    const labels = sample.labels as Labels;
    if (sample.value <= 0) continue;
    const problem = String(labels.problem ?? '');
    problems.set(String(labels.provider ?? ''), PROVIDER_PROBLEMS[problem] ?? problem);
  }
  return [...up]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => {
      const problem = problems.get(name) ?? null;
      return { name, state: value <= 0 ? 'down' : problem === null ? 'ok' : 'failing', problem };
    });
}

function kubernetesStatus(metrics: Map<string, MetricsSnapshot[number]>): StatusModel['kubernetes'] {
  const up = metrics.get('tollgate_kubernetes_watch_up');
  if (up === undefined || up.values.length === 0) return null;
  const lastSync = sumBy(metrics.get('tollgate_kubernetes_last_sync_timestamp_seconds'), ['resource']);
  const rejected = metrics.get('tollgate_ingress_rejected')?.values ?? [];
  return {
    watches: up.values.map((sample) => {
      const resource = String((sample.labels as Labels).resource ?? '');
      const synced = lastSync.get(resource);
      return {
        resource,
        up: sample.value > 0,
        last_sync: synced ? new Date(synced * 1000).toISOString() : null,
      };
    }),
    ingresses_rejected: rejected
      .filter((sample) => sample.value > 0)
      .map((sample) => {
        const labels = sample.labels as Labels;
        return { namespace: String(labels.namespace ?? ''), name: String(labels.name ?? '') };
      }),
  };
}

function certificates(metrics: Map<string, MetricsSnapshot[number]>, now: number): CertificateStatus[] {
  const expiry = metrics.get('tollgate_tls_certificate_expiry_timestamp_seconds');
  if (expiry === undefined) return [];
  return expiry.values.map((sample) => {
    const labels = sample.labels as Labels;
    const expiresMs = sample.value * 1000;
    const daysLeft = Math.floor((expiresMs - now) / DAY_MS);
    return {
      certificate: String(labels.certificate ?? ''),
      names: String(labels.names ?? '')
        .split(',')
        .filter((name) => name !== ''),
      expires_at: new Date(expiresMs).toISOString(),
      days_left: daysLeft,
      warning: expiresMs - now < CERTIFICATE_WARNING_DAYS * DAY_MS,
    };
  });
}

/**
 * One build at a time, and its result reused for `reuseMs`: a client reloading /status in a loop
 * (or many at once) costs one build per interval, so the admin port's probes are never starved
 * (docs/security.md, "The admin port").
 */
export function sharedFor<T>(reuseMs: number, build: () => Promise<T>, clock = Date.now): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | null = null;
  return () => {
    const now = clock();
    if (last !== null && now - last.at < reuseMs) return last.value;
    const value = build();
    const entry = { at: now, value };
    last = entry;
    // A failed build is not reused.
    value.catch(() => {
      if (last === entry) last = null;
    });
    return value;
  };
}
