import { execFileSync } from 'node:child_process';
/**
 * Tollgate as a bench target: the built dist/main.js with a temp config routing `bench.local` to the
 * upstream, once without auth (`/`) and once behind JWT (`/jwt`), plus a token from its token API.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { V8_LAUNCH_FLAGS } from '../src/v8-launch-flags.ts';
import { createBenchIssuer, issuerRouteYaml } from './external-issuer.ts';
import { GRPC_AUTHORITY } from './grpc.ts';
import { httpRequest, waitForHttp } from './http.ts';
import { createOidcBenchSetup, oidcRouteYaml } from './oidc-session.ts';
import { freePort, makeTempDir, type Started, startProcess } from './processes.ts';

export const BENCH_HOST = 'bench.local';
export const MAIN_JS = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

/** Sizes of the route-lookup targets (docs/routing.md: lookup cost must not grow with the table). */
export const MANY_PATHS = 20_000;
export const MANY_HOSTS = 5_000;

/**
 * The many-paths prefixes: `/svc-00000/api` …, zero-padded so that all have the same length and a
 * longest-first scan meets them in config order (the request below sits in its middle).
 */
export function manyPathsPrefix(index: number): string {
  return `/svc-${String(index).padStart(5, '0')}/api`;
}

/** The request the many-paths target sends: a prefix in the middle of the table, one segment deeper. */
export function manyPathsRequest(): { host: string; path: string } {
  return { host: BENCH_HOST, path: `${manyPathsPrefix(Math.floor(MANY_PATHS / 2))}/items` };
}

/** The request the many-hosts target sends: a host in the middle of the table. */
export function manyHostsRequest(): { host: string; path: string } {
  return { host: `h${Math.floor(MANY_HOSTS / 2)}.${BENCH_HOST}`, path: '/' };
}

export interface RunningTollgate {
  readonly process: Started;
  /** http://127.0.0.1:<proxy port> */
  readonly base: string;
  readonly proxyPort: number;
  /** https://127.0.0.1:<TLS port> when started with `tls`, else null. */
  readonly tlsBase: string | null;
  readonly apiPort: number;
  readonly adminPort: number;
  readonly masterkey: string;
  /** A token of the external issuer that `/issuer` trusts. */
  readonly issuerToken: string;
  /** The Cookie header of a valid session on `/oidc` (bench/oidc-session.ts). */
  readonly oidcCookie: string;
  /** Rejects unless `path` refuses a request without a token (an auth route must be measured as one). */
  expectUnauthorized(path: string): Promise<void>;
}

/** `rate_limit` of the `/limited` route: far above any rate the bench reaches, so nothing is refused. */
export const RATE_LIMIT_NEVER_REACHED = 1_000_000_000;

export function tollgateBuilt(): boolean {
  return existsSync(MAIN_JS);
}

export interface TollgateSetup {
  /** main.yaml `workers` (1: the single process). */
  workers?: number;
  /** How workers share the port (docs/workers.md): SO_REUSEPORT by default, or the cluster module. */
  spreading?: 'reuseport' | 'cluster';
  /**
   * The routing table: `bench` (default) is `bench.local` with `/`, `/jwt` and `/issuer`;
   * `many-paths` is MANY_PATHS two-segment prefixes under `bench.local`; `many-hosts` is MANY_HOSTS
   * hosts with `/` each.
   */
  routes?: 'bench' | 'many-paths' | 'many-hosts';
  /** Also a TLS listener (ALPN h2 + http/1.1) with a fresh self-signed certificate. */
  tls?: boolean;
  /**
   * A gRPC server's port: then the table is GRPC_AUTHORITY → that server (gRPC goes to it as h2c
   * under `upstream_protocol: auto`), and the plain listener takes h2c (`http2_cleartext: true`).
   */
  grpcPort?: number;
  /** Port of the bench's forward-auth service: adds a `/forward` route (`type: forward`) asking it. */
  forwardAuthPort?: number;
  /** Port of the bench's ext_authz service: adds an `/ext-authz` route (`type: ext_authz`) asking it. */
  extAuthzPort?: number;
  /** With `tls`: every handshake must present a certificate issued by this CA (`mode: require`). */
  clientCaFile?: string;
  /** Another build's dist/main.js (the `tollgate-baseline` target, BENCH_BASELINE): A/B in one run. */
  mainJs?: string;
  /** Node's V8 flags; default V8_LAUNCH_FLAGS, as the container image starts Tollgate. */
  v8Flags?: readonly string[];
  /** A collector's URL: tracing on, every request sampled (docs/observability.md#tracing). */
  tracingEndpoint?: string;
  /** Extra environment of the process (e.g. TOLLGATE_UPSTREAM_GRPC_CLIENT for an A/B target). */
  env?: Record<string, string>;
  /** `tracing.protocol` with tracingEndpoint; default the configuration's (http/protobuf). */
  tracingProtocol?: 'http/protobuf' | 'http/json';
  /** `tracing.sample_ratio` with tracingEndpoint; default 1 (every request). */
  tracingSampleRatio?: number;
}

export function manyPathsYaml(server: string): string[] {
  const lines = ['upstreams:', `  "${BENCH_HOST}":`, '    paths:'];
  for (let index = 0; index < MANY_PATHS; index += 1) {
    lines.push(`      "${manyPathsPrefix(index)}":`, `        servers: [${server}]`);
  }
  return lines;
}

export function manyHostsYaml(server: string): string[] {
  const lines = ['upstreams:'];
  for (let index = 0; index < MANY_HOSTS; index += 1) {
    lines.push(`  "h${index}.${BENCH_HOST}":`, '    paths:', '      "/":', `        servers: [${server}]`);
  }
  return lines;
}

/**
 * Access log off and log level warn: the reference nginx runs with `access_log off` too, so neither
 * side pays for a log line per request.
 */
export async function startTollgate(
  upstreamPort: number,
  setup: TollgateSetup = {},
): Promise<RunningTollgate> {
  const workers = setup.workers ?? 1;
  const dir = makeTempDir('tollgate-bench-tollgate-');
  const [proxyPort, apiPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  const masterkey = randomBytes(24).toString('base64url');
  const tlsPort = setup.tls ? await freePort() : null;
  const oidc = await createOidcBenchSetup(dir);
  const tlsLines =
    tlsPort === null
      ? []
      : [
          `proxy_address_tls: "127.0.0.1:${tlsPort}"`,
          ...Object.entries(selfSignedCertificate(dir)).map(([key, path]) => `${key}: "${path}"`),
          ...(setup.clientCaFile === undefined
            ? []
            : [`tls_client_certificates: { ca_file: "${setup.clientCaFile}", mode: require }`]),
        ];
  writeFileSync(
    join(dir, 'main.yaml'),
    [
      `proxy_address_http: "127.0.0.1:${proxyPort}"`,
      ...tlsLines,
      `config_address: "127.0.0.1:${apiPort}"`,
      `admin_address: "127.0.0.1:${adminPort}"`,
      // An OpenID provider and its session secret, for /oidc (bench/oidc-session.ts).
      ...oidc.mainLines,
      'log_level: warn',
      // A profiled process (BENCH_TOLLGATE_NODE_FLAGS) must exit on its own to write its profile.
      ...(process.env.BENCH_TOLLGATE_NODE_FLAGS ? ['shutdown_delay_seconds: 0'] : []),
      'access_log: false',
      `masterkey: "${masterkey}"`,
      `workers: ${workers}`,
      ...(setup.grpcPort === undefined ? [] : ['http2_cleartext: true']),
      ...(setup.tracingEndpoint === undefined
        ? []
        : [
            'tracing:',
            `  endpoint: "${setup.tracingEndpoint}"`,
            `  sample_ratio: ${setup.tracingSampleRatio ?? 1}`,
            ...(setup.tracingProtocol === undefined ? [] : [`  protocol: ${setup.tracingProtocol}`]),
          ]),
      '',
    ].join('\n'),
  );
  const server = `"127.0.0.1:${upstreamPort}"`;
  const issuer = await createBenchIssuer(dir);
  const routes = setup.routes ?? 'bench';
  const table =
    setup.grpcPort !== undefined
      ? [
          'upstreams:',
          `  "${GRPC_AUTHORITY}":`,
          '    paths:',
          `      "/": { servers: ["127.0.0.1:${setup.grpcPort}"] }`,
        ]
      : routes === 'many-paths'
        ? manyPathsYaml(server)
        : routes === 'many-hosts'
          ? manyHostsYaml(server)
          : [
              'upstreams:',
              `  "${BENCH_HOST}":`,
              '    paths:',
              '      "/":',
              `        servers: [${server}]`,
              '      "/jwt":',
              `        servers: [${server}]`,
              '        authorization:',
              '          type: jwt',
              // A limit no bench run reaches: the cost of keeping the count, with workers one IPC
              // round trip to the primary per request (docs/workers.md).
              '      "/limited":',
              `        servers: [${server}]`,
              `        rate_limit: ${RATE_LIMIT_NEVER_REACHED}`,
              ...issuerRouteYaml(server, issuer.jwksFile),
              ...policiesRouteYaml(server),
              // The response cache (docs/traffic.md#response-cache): after the first request every
              // GET is answered from the store (the bench upstream states no freshness: a default TTL).
              '      "/cached":',
              `        servers: [${server}]`,
              '        cache: { max_bytes: 16m, default_ttl_seconds: 3600 }',
              ...oidcRouteYaml(server),
              ...(setup.forwardAuthPort === undefined ? [] : forwardRouteYaml(server, setup.forwardAuthPort)),
              ...(setup.extAuthzPort === undefined ? [] : extAuthzRouteYaml(server, setup.extAuthzPort)),
            ];
  writeFileSync(join(dir, 'upstreams.yaml'), `${table.join('\n')}\n`);
  const started = startProcess(
    workers === 1 ? 'tollgate' : `tollgate (${workers} workers)`,
    process.execPath,
    // Started as the container image starts it (src/v8-launch-flags.ts).
    [
      ...(setup.v8Flags ?? V8_LAUNCH_FLAGS),
      // e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`: every Tollgate of the run profiled (docs/benchmark.md).
      ...(process.env.BENCH_TOLLGATE_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== ''),
      setup.mainJs ?? MAIN_JS,
      'start',
      '--config',
      join(dir, 'main.yaml'),
    ],
    { ...process.env, TOLLGATE_WORKER_SPREAD: setup.spreading ?? 'reuseport', ...setup.env },
  );
  // A large table takes a while to load on a busy machine.
  await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, started, routes === 'bench' ? 15_000 : 120_000);
  const base = `http://127.0.0.1:${proxyPort}`;
  return {
    process: started,
    base,
    proxyPort,
    tlsBase: tlsPort === null ? null : `https://127.0.0.1:${tlsPort}`,
    apiPort,
    adminPort,
    masterkey,
    issuerToken: issuer.token,
    oidcCookie: oidc.cookie,
    async expectUnauthorized(path) {
      const { status } = await httpRequest(`${base}${path}`, { headers: { host: BENCH_HOST } });
      if (status !== 401) throw new Error(`${path} answered ${status} without a token, expected 401`);
    },
  };
}

/** The Origin the `/policies` target sends (allowed by the route's CORS policy). */
export const BENCH_ORIGIN = 'https://app.bench.local';

/**
 * The `/policies` path: every request policy of docs/policies.md at once, each doing its work on
 * every request: the client (127.0.0.1) checked against source and deny ranges, an allowed Origin
 * answered with CORS headers, a body limit, and a regex rewrite (the linear-time engine's cost;
 * `/policies/x` goes up as `/x`).
 */
function policiesRouteYaml(server: string): string[] {
  return [
    '      "/policies":',
    `        servers: [${server}]`,
    '        source_ranges: ["127.0.0.0/8", "::1/128"]',
    '        deny_ranges: ["10.0.0.0/8"]',
    `        cors: { allow_origins: ["${BENCH_ORIGIN}"], allow_credentials: true, expose_headers: [X-Request-Id] }`,
    '        max_body_bytes: 1k',
    '        rewrite: { regex: "^/policies/(.*)", replacement: "/$1" }',
  ];
}

/** The upstreams.yaml lines of the `/forward` path: oauth2-proxy's contract, the recipe of docs/authentication.md. */
function forwardRouteYaml(server: string, authPort: number): string[] {
  return [
    '      "/forward":',
    `        servers: [${server}]`,
    '        authorization:',
    '          type: forward',
    `          url: "http://127.0.0.1:${authPort}/oauth2/auth"`,
    '          auth_response_headers: [X-Auth-Request-User]',
    '          subject_header: X-Auth-Request-User',
  ];
}

/** The `/ext-authz` path: Envoy's Authorization/Check asked over gRPC before every request. */
function extAuthzRouteYaml(server: string, port: number): string[] {
  return [
    '      "/ext-authz":',
    `        servers: [${server}]`,
    '        authorization:',
    '          type: ext_authz',
    `          grpc: { address: "127.0.0.1:${port}" }`,
    // The default 300 ms is a production bound; under a saturating load the queue may wait longer.
    '          timeout_ms: 5000',
  ];
}

/** A self-signed EC certificate for BENCH_HOST in `dir`: main.yaml's tls_certificate and tls_key_file. */
export function selfSignedCertificate(dir: string): { tls_certificate: string; tls_key_file: string } {
  const certificate = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      certificate,
      '-days',
      '2',
      '-subj',
      `/CN=${BENCH_HOST}`,
    ],
    { stdio: 'ignore' },
  );
  return { tls_certificate: certificate, tls_key_file: key };
}

/** A token from the token API, reused for every request of the JWT run. */
export async function issueToken(tollgate: RunningTollgate): Promise<string> {
  const { status, body } = await httpRequest(`http://127.0.0.1:${tollgate.apiPort}/jwt`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ master_key: tollgate.masterkey, owner: 'bench', valid: 60 }),
  });
  const text = body.toString('utf8');
  if (status !== 200) throw new Error(`token API answered ${status}: ${text}`);
  const { token } = JSON.parse(text) as { token?: unknown };
  if (typeof token !== 'string') throw new Error(`token API answered without a token: ${text}`);
  return token;
}
