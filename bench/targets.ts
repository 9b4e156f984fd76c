/**
 * Every target of `npm run bench`, one entry each in TARGETS, and the ratios the bench reports
 * between them, one entry each in RATIOS. To add a target: write one TargetDefinition (an id, and a
 * `start` that launches what it needs and says where to send load, which processes' CPU to count and,
 * if not wrk over HTTP/1.1, which load generator to use), add it to TARGETS, and add the ratios that
 * judge it to RATIOS. The runner (run.ts) does the rest: selection with --targets, the pre-load
 * check, warm-up, interleaved rounds, CPU per request from /proc, the paced latency run for targets
 * marked `paced`, the table and bench/results/latest.json. See bench/README.md.
 */

import { BENCH_SESSION_COOKIE } from './auth-session.ts';
import {
  checkGrpc,
  GRPC_AUTHORITY,
  GRPC_HEADERS,
  GRPC_PATH,
  GRPC_STREAM_PATH,
  grpcGenerator,
  grpcStreamGenerator,
  grpcUnaryClientGenerator,
  startGrpcServer,
} from './grpc.ts';
import { h2load, h2loadBinary } from './h2load.ts';
import { httpRequest, waitForHttp } from './http.ts';
import type { LoadGenerator } from './load.ts';
import { nginxBinary, proxyConfig, proxyConfigH2, startNginx } from './nginx.ts';
import {
  startBenchAuthService,
  startBenchExtAuthzService,
  startOtlpSink,
  startReferenceProxy,
  startSharedUndiciProxies,
} from './node-targets.ts';
import { caddyBinary, haproxyBinary, startCaddy, startHaproxy } from './peers.ts';
import { freePort, makeTempDir, type Started } from './processes.ts';
import {
  type ClientCredentials,
  checkWithCertificate,
  clientCredentials,
  expectHandshakeRefused,
  tlsClientGenerator,
} from './tls-load.ts';
import {
  BENCH_HOST,
  BENCH_ORIGIN,
  issueToken,
  MAIN_JS,
  MANY_HOSTS,
  MANY_PATHS,
  manyHostsRequest,
  manyPathsRequest,
  type RunningTollgate,
  selfSignedCertificate,
  startTollgate,
  tollgateBuilt,
} from './tollgate.ts';

/** What a target's `start` gets: the shared upstream and the run's settings. */
export interface BenchContext {
  /** Port of the fixed-body upstream every proxy forwards to. */
  readonly upstreamPort: number;
  /** The upstream's process (the `direct` target's CPU is its CPU). */
  readonly upstream: Started;
  /** N of the every-core targets (BENCH_WORKERS). */
  readonly workers: number;
  readonly upstreamKind: 'nginx' | 'node';
  /**
   * One instance per key for the whole run, started on first use: several targets served by one
   * process (Tollgate's `/`, `/jwt` and `/issuer` routes) share it.
   */
  shared<T>(key: string, start: () => Promise<T>): Promise<T>;
}

export interface RunningTarget {
  label: string;
  url: string;
  headers: Record<string, string>;
  /** Root processes whose whole trees' CPU is charged to this target (empty: no CPU column). */
  processes: readonly Started[];
  /**
   * Extra checks before any load, after the common one (200 with the exact body), e.g. that an auth
   * route refuses a request without its token: otherwise the run would not measure what it claims.
   */
  verify?: () => Promise<void>;
  /** A load generator other than the default (wrk over HTTP/1.1), e.g. h2load for HTTP/2 targets. */
  generator?: LoadGenerator;
  /** Replaces the common check (an HTTP/1.1 GET answered 200 with the exact body), e.g. a gRPC call. */
  check?: () => Promise<void>;
}

export interface TargetDefinition {
  readonly id: string;
  /** Also measured in the paced latency run (p50/p99/p99.9 at a fixed, moderate rate). */
  readonly paced?: boolean;
  /** Launches what the target needs, or says why it cannot run here (skipped, not an error). */
  start(context: BenchContext): Promise<RunningTarget | { skip: string }>;
}

const host = { host: BENCH_HOST };

/** The forward-auth service the shared Tollgate's `/forward` route asks (bench/reference/auth-service.ts). */
function sharedAuthService(context: BenchContext): Promise<{ port: number; started: Started }> {
  return context.shared('auth-service', () => startBenchAuthService());
}

/** The Envoy ext_authz service the shared Tollgate's `/ext-authz` route asks (bench/reference/ext-authz-service.ts). */
function sharedExtAuthzService(context: BenchContext): Promise<{ port: number; started: Started }> {
  return context.shared('ext-authz-service', () => startBenchExtAuthzService());
}

/** The one-process Tollgate serving `/`, `/jwt`, `/issuer`, `/forward` and `/ext-authz` (shared by several targets). */
function sharedTollgate(context: BenchContext): Promise<RunningTollgate> {
  return context.shared('tollgate-1', async () =>
    startTollgate(context.upstreamPort, {
      forwardAuthPort: (await sharedAuthService(context)).port,
      extAuthzPort: (await sharedExtAuthzService(context)).port,
    }),
  );
}

/** The client CA and certificate of the run's client-certificate targets. */
function sharedClientCredentials(context: BenchContext): Promise<ClientCredentials> {
  return context.shared('client-credentials', async () =>
    clientCredentials(makeTempDir('tollgate-bench-mtls-')),
  );
}

/**
 * TLS with and without client certificates (docs/authentication.md#client-certificates), the same
 * node:https client either way: `tollgate-tls` (TLS, no check) against `tollgate-mtls` (every
 * handshake verified against a CA), requests on kept-alive connections or a handshake per request.
 */
function clientCertificateTarget(
  id: string,
  mtls: boolean,
  mode: 'keepalive' | 'handshake',
): TargetDefinition {
  return tollgateTarget(id, async (context) => {
    const credentials = mtls ? await sharedClientCredentials(context) : null;
    const tollgate = await context.shared(mtls ? 'tollgate-mtls' : 'tollgate-tls', () =>
      startTollgate(context.upstreamPort, {
        tls: true,
        ...(credentials === null ? {} : { clientCaFile: credentials.caFile }),
      }),
    );
    const url = `${tollgate.tlsBase}/`;
    return {
      label: `tollgate ${mtls ? 'mTLS' : 'TLS'} (${mode === 'keepalive' ? 'keep-alive' : 'a handshake per request'})`,
      url,
      headers: host,
      processes: [tollgate.process],
      generator: tlsClientGenerator(mode, credentials),
      ...(credentials === null
        ? {}
        : {
            check: () => checkWithCertificate(url, BENCH_HOST, credentials),
            verify: () => expectHandshakeRefused(url, BENCH_HOST),
          }),
    };
  });
}

function tollgateTarget(
  id: string,
  make: (context: BenchContext) => Promise<RunningTarget>,
  paced = false,
): TargetDefinition {
  return {
    id,
    paced,
    start: (context) =>
      tollgateBuilt() ? make(context) : Promise.resolve({ skip: `${MAIN_JS} not found (run npm run build)` }),
  };
}

/** A C or Go proxy compared with Tollgate: how to find it, start it with `n` workers/threads/cores. */
interface Peer {
  name: string;
  binary(): string | null;
  start(binary: string, id: string, port: number, upstreamPort: number, n: number): Started;
  label(n: number): string;
}

const NGINX: Peer = {
  name: 'nginx',
  binary: nginxBinary,
  start: (binary, id, port, upstreamPort, n) =>
    startNginx(binary, id, (dir) => proxyConfig(dir, port, upstreamPort, n)),
  label: (n) => `nginx (${n} worker${n === 1 ? '' : 's'})`,
};
const HAPROXY: Peer = {
  name: 'haproxy',
  binary: haproxyBinary,
  start: startHaproxy,
  label: (n) => `haproxy (${n} thread${n === 1 ? '' : 's'})`,
};
const CADDY: Peer = {
  name: 'caddy',
  binary: caddyBinary,
  start: startCaddy,
  label: (n) => `caddy (GOMAXPROCS=${n})`,
};

function peerTarget(
  id: string,
  peer: Peer,
  count: (context: BenchContext) => number,
  paced = false,
): TargetDefinition {
  return {
    id,
    paced,
    async start(context) {
      const binary = peer.binary();
      if (binary === null) return { skip: `${peer.name} not installed` };
      const n = count(context);
      const port = await freePort();
      const started = peer.start(binary, id, port, context.upstreamPort, n);
      await waitForHttp(`http://127.0.0.1:${port}/`, started);
      return { label: peer.label(n), url: `http://127.0.0.1:${port}/`, headers: host, processes: [started] };
    },
  };
}

/** The one-process Tollgate with a TLS listener, shared by its h2 and HTTP/1.1 targets. */
async function tlsTarget(context: BenchContext, protocol: 'h2' | 'http/1.1'): Promise<RunningTarget> {
  const binary = h2loadBinary();
  if (binary === null)
    throw new Error('h2load is needed for the HTTP/2 targets (apt-get install nghttp2-client)');
  const tollgate = await context.shared('tollgate-tls', () =>
    startTollgate(context.upstreamPort, { tls: true }),
  );
  return {
    label: protocol === 'h2' ? 'tollgate h2' : 'tollgate HTTP/1.1 over TLS',
    url: `${tollgate.tlsBase}/`,
    headers: host,
    processes: [tollgate.process],
    generator: h2load(binary, protocol),
  };
}

/** The gRPC server of the run, shared by the straight and the proxied gRPC targets. */
function sharedGrpcServer(context: BenchContext) {
  return context.shared('grpc-server', () => startGrpcServer());
}

/** Which upstream HTTP/2 client a Tollgate gRPC target uses (docs/decisions.md): node:http2 or undici. */
type GrpcClient = 'node' | 'undici' | 'baseline';

/** The Tollgate process of the gRPC targets using `client`, shared by the unary and streaming ones. */
function sharedGrpcTollgate(context: BenchContext, grpcPort: number, client: GrpcClient) {
  return context.shared(`tollgate-grpc-${client}`, () =>
    startTollgate(context.upstreamPort, {
      grpcPort,
      env: client === 'undici' ? { TOLLGATE_UPSTREAM_GRPC_CLIENT: 'undici' } : {},
      // `baseline`: node:http2 sessions on the BENCH_BASELINE build, a before/after in the same rounds.
      ...(client === 'baseline' ? { mainJs: process.env.BENCH_BASELINE as string } : {}),
    }),
  );
}

/**
 * What drives a gRPC target: unary calls by h2load, unary calls by a grpc-js client in its own
 * process, or server-streaming messages received by a grpc-js client.
 */
type GrpcCall = 'unary' | 'unary-grpc-js' | 'stream';

/** gRPC calls straight to the grpc-js server or through Tollgate (h2c both ways), driven by `call`. */
async function grpcTarget(
  context: BenchContext,
  via: 'direct' | GrpcClient,
  call: GrpcCall = 'unary',
): Promise<RunningTarget | { skip: string }> {
  const h2loadPath = h2loadBinary();
  if (call === 'unary' && h2loadPath === null)
    return { skip: 'h2load not installed (apt-get install nghttp2-client)' };
  const server = await sharedGrpcServer(context);
  const generator =
    call === 'unary'
      ? grpcGenerator(h2loadPath as string)
      : call === 'unary-grpc-js'
        ? grpcUnaryClientGenerator()
        : grpcStreamGenerator();
  const path = call === 'stream' ? GRPC_STREAM_PATH : GRPC_PATH;
  const headers = { host: GRPC_AUTHORITY, ...GRPC_HEADERS };
  const shape =
    call === 'unary' ? 'gRPC' : call === 'unary-grpc-js' ? 'gRPC, grpc-js client,' : 'gRPC streaming';
  if (via === 'direct') {
    return {
      label: `${shape} direct (grpc-js)`,
      url: `http://127.0.0.1:${server.port}${path}`,
      headers,
      processes: [server.started],
      generator,
      check: () => checkGrpc(`127.0.0.1:${server.port}`, GRPC_AUTHORITY),
    };
  }
  const tollgate = await sharedGrpcTollgate(context, server.port, via);
  return {
    label: `tollgate ${shape} (h2c → h2c, ${via === 'node' ? 'node:http2' : via === 'undici' ? 'undici' : 'baseline build'})`,
    url: `${tollgate.base}${path}`,
    headers,
    processes: [tollgate.process],
    generator,
    check: () => checkGrpc(`127.0.0.1:${tollgate.proxyPort}`, GRPC_AUTHORITY),
  };
}

/** Tollgate with tracing at `ratio` on the BENCH_BASELINE build (skipped without one). */
function tracingBaselineTarget(id: string, ratio: number): TargetDefinition {
  return {
    id,
    async start(context) {
      const mainJs = process.env.BENCH_BASELINE;
      if (mainJs === undefined || mainJs === '') return { skip: 'BENCH_BASELINE (a dist/main.js) not set' };
      const sink = await context.shared('otlp-sink', () => startOtlpSink());
      const tollgate = await startTollgate(context.upstreamPort, {
        mainJs,
        tracingEndpoint: `http://127.0.0.1:${sink.port}`,
        ...(ratio === 1 ? {} : { tracingSampleRatio: ratio }),
      });
      return {
        label: `tollgate + tracing${ratio === 1 ? '' : ` ${ratio}`} (baseline build)`,
        url: `${tollgate.base}/`,
        headers: host,
        processes: [tollgate.process],
      };
    },
  };
}

/** A Tollgate gRPC target: skipped without a build, an error when h2load is missing. */
function tollgateGrpcTarget(id: string, client: GrpcClient, call: GrpcCall): TargetDefinition {
  return tollgateTarget(id, async (context) => {
    const target = await grpcTarget(context, client, call);
    if ('skip' in target) throw new Error(target.skip);
    return target;
  });
}

const one = (): number => 1;
const every = (context: BenchContext): number => context.workers;

export const TARGETS: readonly TargetDefinition[] = [
  {
    id: 'direct',
    async start(context) {
      return {
        label: `direct upstream${context.upstreamKind === 'node' ? ' (node)' : ''}`,
        url: `http://127.0.0.1:${context.upstreamPort}/`,
        headers: host,
        processes: [context.upstream],
      };
    },
  },
  // Peers on one core.
  peerTarget('nginx', NGINX, one, true),
  peerTarget('haproxy', HAPROXY, one),
  peerTarget('caddy', CADDY, one),
  // Node references on one process.
  {
    id: 'http-proxy-3',
    async start(context) {
      const { port, started } = await startReferenceProxy('http-proxy-3', context.upstreamPort);
      return { label: 'http-proxy-3', url: `http://127.0.0.1:${port}/`, headers: host, processes: [started] };
    },
  },
  {
    id: 'undici-minimal',
    paced: true,
    async start(context) {
      const { port, started } = await startReferenceProxy('undici-minimal', context.upstreamPort);
      return {
        label: 'undici (minimal)',
        url: `http://127.0.0.1:${port}/`,
        headers: host,
        processes: [started],
      };
    },
  },
  // Tollgate, one process: the same process serves the three routes.
  tollgateTarget(
    'tollgate',
    async (context) => {
      const tollgate = await sharedTollgate(context);
      return { label: 'tollgate', url: `${tollgate.base}/`, headers: host, processes: [tollgate.process] };
    },
    true,
  ),
  tollgateTarget('tollgate-jwt', async (context) => {
    const tollgate = await sharedTollgate(context);
    const token = await issueToken(tollgate);
    return {
      label: 'tollgate + JWT',
      url: `${tollgate.base}/jwt`,
      headers: { ...host, authorization: `Bearer ${token}` },
      processes: [tollgate.process],
      verify: () => tollgate.expectUnauthorized('/jwt'),
    };
  }),
  // Request policies (docs/policies.md): source ranges, CORS, body limit and a regex rewrite on
  // one route, beside the plain `/` of the same process.
  tollgateTarget('tollgate-policies', async (context) => {
    const tollgate = await sharedTollgate(context);
    return {
      label: 'tollgate + request policies',
      url: `${tollgate.base}/policies/items`,
      headers: { ...host, origin: BENCH_ORIGIN },
      processes: [tollgate.process],
      verify: async () => {
        const { status } = await httpRequest(`${tollgate.base}/policies/items`, {
          method: 'POST',
          headers: host,
          body: 'x'.repeat(2048),
        });
        if (status !== 413) throw new Error(`/policies answered ${status} to a 2 KiB body, expected 413`);
      },
    };
  }),
  // A GET answered from the response cache (docs/traffic.md#response-cache), beside the proxied `/`
  // of the same process: what a hit costs against a trip to the upstream.
  tollgateTarget('tollgate-cached', async (context) => {
    const tollgate = await sharedTollgate(context);
    return {
      label: 'tollgate, cache hit',
      url: `${tollgate.base}/cached`,
      headers: host,
      processes: [tollgate.process],
      verify: async () => {
        await httpRequest(`${tollgate.base}/cached`, { headers: host });
        const { headers } = await httpRequest(`${tollgate.base}/cached`, { headers: host });
        if (headers['x-cache'] !== 'HIT')
          throw new Error(`/cached answered X-Cache ${headers['x-cache']}, expected HIT`);
      },
    };
  }),
  tollgateTarget('tollgate-rate-limit', async (context) => {
    const tollgate = await sharedTollgate(context);
    return {
      label: 'tollgate + rate_limit',
      url: `${tollgate.base}/limited`,
      headers: host,
      processes: [tollgate.process],
    };
  }),
  tollgateTarget('tollgate-issuer', async (context) => {
    const tollgate = await sharedTollgate(context);
    return {
      label: 'tollgate + issuer JWT',
      url: `${tollgate.base}/issuer`,
      headers: { ...host, authorization: `Bearer ${tollgate.issuerToken}` },
      processes: [tollgate.process],
      verify: () => tollgate.expectUnauthorized('/issuer'),
    };
  }),
  // An OpenID session (docs/authentication.md#openid-connect): a sealed cookie opened (cached after
  // the first request), allow rules, identity headers. Goal: <= 1.1 x the CPU of the open route.
  tollgateTarget('tollgate-oidc-session', async (context) => {
    const tollgate = await sharedTollgate(context);
    return {
      label: 'tollgate + OpenID session',
      url: `${tollgate.base}/oidc`,
      headers: { ...host, cookie: tollgate.oidcCookie, accept: 'application/json' },
      processes: [tollgate.process],
      verify: async () => {
        const { status } = await httpRequest(`${tollgate.base}/oidc`, {
          headers: { ...host, accept: 'application/json' },
        });
        if (status === 200) throw new Error('/oidc answered 200 without a session');
      },
    };
  }),
  // Forward auth (docs/authentication.md#forward-auth): one check per request against an auth
  // service on loopback; the service's CPU is charged to the target too.
  tollgateTarget('tollgate-forward', async (context) => {
    const tollgate = await sharedTollgate(context);
    const authService = await sharedAuthService(context);
    return {
      label: 'tollgate + forward auth (auth service on loopback)',
      url: `${tollgate.base}/forward`,
      headers: { ...host, cookie: BENCH_SESSION_COOKIE },
      processes: [tollgate.process, authService.started],
      verify: () => tollgate.expectUnauthorized('/forward'),
    };
  }),
  // External authorization (docs/authentication.md#external-authorization): one Authorization/Check
  // over gRPC per request to a service on loopback; the service's CPU is charged to the target too.
  tollgateTarget('tollgate-ext-authz', async (context) => {
    const tollgate = await sharedTollgate(context);
    const service = await sharedExtAuthzService(context);
    return {
      label: 'tollgate + ext_authz (gRPC service on loopback)',
      url: `${tollgate.base}/ext-authz`,
      headers: host,
      processes: [tollgate.process, service.started],
    };
  }),
  clientCertificateTarget('tollgate-tls-keepalive', false, 'keepalive'),
  clientCertificateTarget('tollgate-mtls-keepalive', true, 'keepalive'),
  clientCertificateTarget('tollgate-tls-handshake', false, 'handshake'),
  clientCertificateTarget('tollgate-mtls-handshake', true, 'handshake'),
  // An earlier build, to compare changes in the same interleaved rounds: BENCH_BASELINE=<its dist/main.js>
  // (e.g. `git worktree add /tmp/base <commit> && cd /tmp/base && npx tsc -p tsconfig.json`).
  {
    id: 'tollgate-baseline',
    paced: true,
    async start(context) {
      const mainJs = process.env.BENCH_BASELINE;
      if (mainJs === undefined || mainJs === '') return { skip: 'BENCH_BASELINE (a dist/main.js) not set' };
      const tollgate = await startTollgate(context.upstreamPort, { mainJs });
      return {
        label: 'tollgate (baseline build)',
        url: `${tollgate.base}/`,
        headers: host,
        processes: [tollgate.process],
      };
    },
  },
  // Tracing on, every request sampled, spans exported to a sink on loopback (docs/observability.md#tracing):
  // against `tollgate` (tracing off) in the same rounds. The sink's CPU is a collector's, not charged.
  tollgateTarget('tollgate-tracing', async (context) => {
    const sink = await context.shared('otlp-sink', () => startOtlpSink());
    const tollgate = await startTollgate(context.upstreamPort, {
      tracingEndpoint: `http://127.0.0.1:${sink.port}`,
    });
    return {
      label: 'tollgate + tracing (sample_ratio 1)',
      url: `${tollgate.base}/`,
      headers: host,
      processes: [tollgate.process],
    };
  }),
  // The same with OTLP/HTTP JSON: which encoding costs the proxy less CPU per span (docs/benchmark.md#tracing-cost).
  tollgateTarget('tollgate-tracing-json', async (context) => {
    const sink = await context.shared('otlp-sink', () => startOtlpSink());
    const tollgate = await startTollgate(context.upstreamPort, {
      tracingEndpoint: `http://127.0.0.1:${sink.port}`,
      tracingProtocol: 'http/json',
    });
    return {
      label: 'tollgate + tracing, OTLP JSON',
      url: `${tollgate.base}/`,
      headers: host,
      processes: [tollgate.process],
    };
  }),
  // A tenth of the requests sampled: what the unsampled nine pay (docs/benchmark.md#tracing-cost).
  tollgateTarget('tollgate-tracing-0.1', async (context) => {
    const sink = await context.shared('otlp-sink', () => startOtlpSink());
    const tollgate = await startTollgate(context.upstreamPort, {
      tracingEndpoint: `http://127.0.0.1:${sink.port}`,
      tracingSampleRatio: 0.1,
    });
    return {
      label: 'tollgate + tracing (sample_ratio 0.1)',
      url: `${tollgate.base}/`,
      headers: host,
      processes: [tollgate.process],
    };
  }),
  // `tollgate-tracing` on the BENCH_BASELINE build: a change to tracing judged against its predecessor
  // in the same rounds; at 0.1, what a change costs the unsampled nine in ten.
  tracingBaselineTarget('tollgate-tracing-baseline', 1),
  tracingBaselineTarget('tollgate-tracing-0.1-baseline', 0.1),
  // The same build started as plain `node dist/main.js`, without the young-generation cap
  // (src/v8-launch-flags.ts): what the cap does to the paced p99, in the same rounds (docs/benchmark.md).
  {
    id: 'tollgate-default-young',
    paced: true,
    async start(context) {
      const tollgate = await startTollgate(context.upstreamPort, { v8Flags: [] });
      return {
        label: "tollgate (V8's default young generation)",
        url: `${tollgate.base}/`,
        headers: host,
        processes: [tollgate.process],
      };
    },
  },
  // Route lookup at scale (docs/routing.md): the same process work but a large table.
  tollgateTarget('tollgate-paths-20k', async (context) => {
    const tollgate = await startTollgate(context.upstreamPort, { routes: 'many-paths' });
    const request = manyPathsRequest();
    return {
      label: `tollgate, ${MANY_PATHS.toLocaleString('en-US')} paths`,
      url: `${tollgate.base}${request.path}`,
      headers: { host: request.host },
      processes: [tollgate.process],
    };
  }),
  tollgateTarget('tollgate-hosts-5k', async (context) => {
    const tollgate = await startTollgate(context.upstreamPort, { routes: 'many-hosts' });
    const request = manyHostsRequest();
    return {
      label: `tollgate, ${MANY_HOSTS.toLocaleString('en-US')} hosts`,
      url: `${tollgate.base}${request.path}`,
      headers: { host: request.host },
      processes: [tollgate.process],
    };
  }),
  // HTTP/2 over TLS (docs/traffic.md#http2), all driven by h2load: Tollgate's TLS listener speaking
  // h2 and HTTP/1.1, and nginx with `http2 on`.
  tollgateTarget('tollgate-h2', (context) => tlsTarget(context, 'h2')),
  tollgateTarget('tollgate-h1-tls', (context) => tlsTarget(context, 'http/1.1')),
  {
    id: 'nginx-h2',
    async start(context) {
      const binary = nginxBinary();
      const h2loadPath = h2loadBinary();
      if (binary === null || h2loadPath === null) return { skip: 'nginx or h2load not installed' };
      const port = await freePort();
      const started = startNginx(binary, 'nginx-h2', (dir) => {
        const { tls_certificate, tls_key_file } = selfSignedCertificate(dir);
        return proxyConfigH2(dir, port, context.upstreamPort, tls_certificate, tls_key_file);
      });
      await waitForHttp(`https://127.0.0.1:${port}/`, started);
      return {
        label: 'nginx h2 (1 worker)',
        url: `https://127.0.0.1:${port}/`,
        headers: host,
        processes: [started],
        generator: h2load(h2loadPath, 'h2'),
      };
    },
  },
  // gRPC unary calls (docs/traffic.md#grpc), straight and through Tollgate, in the same rounds.
  // The upstream side on node:http2 sessions, and on undici's HTTP/2 client for comparison
  // (docs/decisions.md): the same server, the same rounds.
  { id: 'grpc-direct', start: (context) => grpcTarget(context, 'direct') },
  tollgateGrpcTarget('tollgate-grpc', 'node', 'unary'),
  tollgateGrpcTarget('tollgate-grpc-undici', 'undici', 'unary'),
  {
    id: 'tollgate-grpc-baseline',
    async start(context) {
      if (!process.env.BENCH_BASELINE) return { skip: 'BENCH_BASELINE (a dist/main.js) not set' };
      return grpcTarget(context, 'baseline');
    },
  },
  // Unary calls by a grpc-js client in its own process: the issue's own measure of the gRPC goal.
  { id: 'grpc-js-direct', start: (context) => grpcTarget(context, 'direct', 'unary-grpc-js') },
  tollgateGrpcTarget('tollgate-grpc-js', 'node', 'unary-grpc-js'),
  // Server streaming, messages per second received by a grpc-js client in its own process.
  { id: 'grpc-stream-direct', start: (context) => grpcTarget(context, 'direct', 'stream') },
  tollgateGrpcTarget('tollgate-grpc-stream', 'node', 'stream'),
  tollgateGrpcTarget('tollgate-grpc-stream-undici', 'undici', 'stream'),
  // Every core: N = BENCH_WORKERS (docs/workers.md).
  peerTarget('nginx-workers', NGINX, every),
  peerTarget('haproxy-workers', HAPROXY, every),
  peerTarget('caddy-workers', CADDY, every),
  {
    id: 'undici-minimal-workers',
    async start(context) {
      const { port, started } = await startSharedUndiciProxies(context.upstreamPort, context.workers);
      return {
        label: `undici (minimal) ×${context.workers}`,
        url: `http://127.0.0.1:${port}/`,
        headers: host,
        processes: started,
      };
    },
  },
  ...(['reuseport', 'cluster'] as const).map((spreading) =>
    tollgateTarget(
      spreading === 'reuseport' ? 'tollgate-workers' : 'tollgate-workers-cluster',
      async (context) => {
        const tollgate = await startTollgate(context.upstreamPort, { workers: context.workers, spreading });
        return {
          label: `tollgate ×${context.workers}${spreading === 'cluster' ? ' (cluster)' : ''}`,
          url: `${tollgate.base}/`,
          headers: host,
          processes: [tollgate.process],
        };
      },
    ),
  ),
  // With workers a rate limit is one budget kept by the primary: one IPC round trip per request.
  tollgateTarget('tollgate-workers-rate-limit', async (context) => {
    const tollgate = await startTollgate(context.upstreamPort, { workers: context.workers });
    return {
      label: `tollgate ×${context.workers} + rate_limit`,
      url: `${tollgate.base}/limited`,
      headers: host,
      processes: [tollgate.process],
    };
  }),
];

/** Which figure of two targets a ratio compares. */
export type RatioMetric =
  /** requests/s of the closed-loop run (higher is better). */
  | 'throughput'
  /** CPU µs per request of the closed-loop run (lower is better). */
  | 'cpu'
  /** p99 latency of the paced run (lower is better). */
  | 'paced-p99';

export interface RatioDefinition {
  /** `{N}` is replaced by BENCH_WORKERS. */
  readonly name: string;
  readonly numerator: string;
  readonly denominator: string;
  readonly metric: RatioMetric;
  /** The bar an issue set: at least (throughput) or at most (cpu, latency) this value. */
  readonly goal?: number;
  /** What the figure means when it is a calibration, not a goal. */
  readonly note?: string;
}

export const RATIOS: readonly RatioDefinition[] = [
  // CPU per request: Tollgate's own work over a bare proxy (docs/benchmark.md).
  {
    name: 'tollgate / undici-minimal',
    numerator: 'tollgate',
    denominator: 'undici-minimal',
    metric: 'cpu',
    goal: 1.15,
  },
  {
    name: 'tollgate({N}) / undici-minimal({N})',
    numerator: 'tollgate-workers',
    denominator: 'undici-minimal-workers',
    metric: 'cpu',
    goal: 1.15,
  },
  {
    name: 'tollgate+policies / tollgate',
    numerator: 'tollgate-policies',
    denominator: 'tollgate',
    metric: 'cpu',
    goal: 1.05,
  },
  {
    name: 'tollgate+OpenID session / tollgate',
    numerator: 'tollgate-oidc-session',
    denominator: 'tollgate',
    metric: 'cpu',
    goal: 1.1,
  },
  {
    name: 'tollgate+rate_limit / tollgate',
    numerator: 'tollgate-rate-limit',
    denominator: 'tollgate',
    metric: 'cpu',
    note: 'keeping a per-client count in the process',
  },
  {
    name: 'tollgate({N})+rate_limit / tollgate({N})',
    numerator: 'tollgate-workers-rate-limit',
    denominator: 'tollgate-workers',
    metric: 'cpu',
    note: 'the count kept by the primary: one IPC round trip per request',
  },
  {
    name: 'tollgate / nginx',
    numerator: 'tollgate',
    denominator: 'nginx',
    metric: 'cpu',
    note: 'Node against C',
  },
  {
    name: 'tollgate / haproxy',
    numerator: 'tollgate',
    denominator: 'haproxy',
    metric: 'cpu',
    note: 'Node against C',
  },
  {
    name: 'tollgate / caddy',
    numerator: 'tollgate',
    denominator: 'caddy',
    metric: 'cpu',
    note: 'Node against Go',
  },
  {
    name: 'tollgate cache hit / tollgate',
    numerator: 'tollgate-cached',
    denominator: 'tollgate',
    metric: 'cpu',
    note: 'a GET from the response cache against the same GET proxied',
  },
  {
    name: 'tollgate+tracing / tollgate',
    numerator: 'tollgate-tracing',
    denominator: 'tollgate',
    metric: 'cpu',
    goal: 1.3,
  },
  {
    name: 'tollgate+tracing 0.1 / tollgate',
    numerator: 'tollgate-tracing-0.1',
    denominator: 'tollgate',
    metric: 'cpu',
    goal: 1.05,
  },
  {
    name: 'tollgate+tracing-json / tollgate',
    numerator: 'tollgate-tracing-json',
    denominator: 'tollgate',
    metric: 'cpu',
    note: 'OTLP JSON instead of protobuf',
  },
  {
    name: 'tollgate+tracing / its baseline build',
    numerator: 'tollgate-tracing',
    denominator: 'tollgate-tracing-baseline',
    metric: 'cpu',
    note: 'this build against BENCH_BASELINE, both traced',
  },
  {
    name: 'tollgate+tracing 0.1 / its baseline build',
    numerator: 'tollgate-tracing-0.1',
    denominator: 'tollgate-tracing-0.1-baseline',
    metric: 'cpu',
    note: 'this build against BENCH_BASELINE, both at sample_ratio 0.1',
  },
  {
    name: 'tollgate / tollgate baseline build',
    numerator: 'tollgate',
    denominator: 'tollgate-baseline',
    metric: 'cpu',
    note: 'this build against BENCH_BASELINE',
  },
  // Throughput.
  { name: 'tollgate / nginx', numerator: 'tollgate', denominator: 'nginx', metric: 'throughput', goal: 0.45 },
  {
    name: 'tollgate cache hit / tollgate',
    numerator: 'tollgate-cached',
    denominator: 'tollgate',
    metric: 'throughput',
    note: 'a GET from the response cache against the same GET proxied',
  },
  {
    name: 'tollgate / undici-minimal',
    numerator: 'tollgate',
    denominator: 'undici-minimal',
    metric: 'throughput',
    goal: 0.9,
  },
  {
    name: 'tollgate+JWT / tollgate',
    numerator: 'tollgate-jwt',
    denominator: 'tollgate',
    metric: 'throughput',
    goal: 0.9,
  },
  {
    name: 'tollgate+forward auth / tollgate',
    numerator: 'tollgate-forward',
    denominator: 'tollgate',
    metric: 'throughput',
    note: 'one extra HTTP round trip per request, to a Node auth service on the same 2 cores',
  },
  {
    name: 'tollgate+ext_authz / tollgate',
    numerator: 'tollgate-ext-authz',
    denominator: 'tollgate',
    metric: 'throughput',
    note: 'one gRPC Authorization/Check per request, to a grpc-js service on the same cores',
  },
  {
    name: 'tollgate+ext_authz / tollgate (CPU)',
    numerator: 'tollgate-ext-authz',
    denominator: 'tollgate',
    metric: 'cpu',
    note: "Tollgate's and the service's CPU per request over Tollgate's alone",
  },
  {
    name: 'tollgate mTLS / TLS (keep-alive)',
    numerator: 'tollgate-mtls-keepalive',
    denominator: 'tollgate-tls-keepalive',
    metric: 'throughput',
    note: 'a request on a verified connection: the check is per connection, not per request',
  },
  {
    name: 'tollgate mTLS / TLS (keep-alive, CPU)',
    numerator: 'tollgate-mtls-keepalive',
    denominator: 'tollgate-tls-keepalive',
    metric: 'cpu',
  },
  {
    name: 'tollgate mTLS / TLS (a handshake per request)',
    numerator: 'tollgate-mtls-handshake',
    denominator: 'tollgate-tls-handshake',
    metric: 'throughput',
    note: 'verifying the client chain in every full handshake',
  },
  {
    name: 'tollgate mTLS / TLS (a handshake per request, CPU)',
    numerator: 'tollgate-mtls-handshake',
    denominator: 'tollgate-tls-handshake',
    metric: 'cpu',
  },
  {
    name: 'tollgate+issuer JWT / tollgate',
    numerator: 'tollgate-issuer',
    denominator: 'tollgate',
    metric: 'throughput',
    goal: 0.9,
  },
  {
    name: 'tollgate 20,000 paths / tollgate',
    numerator: 'tollgate-paths-20k',
    denominator: 'tollgate',
    metric: 'throughput',
    goal: 0.95,
  },
  {
    name: 'tollgate 5,000 hosts / tollgate',
    numerator: 'tollgate-hosts-5k',
    denominator: 'tollgate',
    metric: 'throughput',
    goal: 0.95,
  },
  {
    name: 'undici-minimal / nginx',
    numerator: 'undici-minimal',
    denominator: 'nginx',
    metric: 'throughput',
    note: 'calibration: a bare Node proxy against nginx',
  },
  {
    name: 'http-proxy-3 / nginx',
    numerator: 'http-proxy-3',
    denominator: 'nginx',
    metric: 'throughput',
    note: 'calibration: an http-proxy-3 proxy against nginx',
  },
  {
    name: 'tollgate / caddy',
    numerator: 'tollgate',
    denominator: 'caddy',
    metric: 'throughput',
    note: 'Node against Go',
  },
  // Every core.
  {
    name: 'tollgate({N}) / undici-minimal({N})',
    numerator: 'tollgate-workers',
    denominator: 'undici-minimal-workers',
    metric: 'throughput',
    goal: 0.9,
  },
  {
    name: 'tollgate({N}) / tollgate(1)',
    numerator: 'tollgate-workers',
    denominator: 'tollgate',
    metric: 'throughput',
    goal: 1.2,
  },
  {
    name: 'tollgate({N}) / nginx({N})',
    numerator: 'tollgate-workers',
    denominator: 'nginx-workers',
    metric: 'throughput',
    note: 'Node against nginx, both on every core',
  },
  {
    name: 'tollgate({N}) / caddy({N})',
    numerator: 'tollgate-workers',
    denominator: 'caddy-workers',
    metric: 'throughput',
    note: 'Node against Go, both on every core',
  },
  {
    name: 'undici-minimal({N}) / undici-minimal(1)',
    numerator: 'undici-minimal-workers',
    denominator: 'undici-minimal',
    metric: 'throughput',
    note: 'what N Node processes gain here, the load generator sharing the cores',
  },
  {
    name: 'tollgate({N}) cluster / reuseport',
    numerator: 'tollgate-workers-cluster',
    denominator: 'tollgate-workers',
    metric: 'throughput',
    note: "the cluster module's round-robin against the kernel spreading connections",
  },
  // HTTP/2 over TLS, h2load on both sides.
  {
    name: 'tollgate h2 / tollgate HTTP/1.1 (TLS)',
    numerator: 'tollgate-h2',
    denominator: 'tollgate-h1-tls',
    metric: 'throughput',
    goal: 0.8,
  },
  {
    name: 'tollgate h2 / nginx h2',
    numerator: 'tollgate-h2',
    denominator: 'nginx-h2',
    metric: 'throughput',
    note: 'Node against C, both terminating TLS and speaking h2',
  },
  {
    name: 'tollgate h2 / nginx h2',
    numerator: 'tollgate-h2',
    denominator: 'nginx-h2',
    metric: 'cpu',
    note: 'Node against C',
  },
  {
    name: 'tollgate gRPC / gRPC direct',
    numerator: 'tollgate-grpc',
    denominator: 'grpc-direct',
    metric: 'throughput',
    goal: 0.5,
  },
  {
    name: 'tollgate gRPC / gRPC direct',
    numerator: 'tollgate-grpc',
    denominator: 'grpc-direct',
    metric: 'cpu',
    note: 'Tollgate CPU per call over the grpc-js server’s',
  },
  {
    name: 'tollgate gRPC / its baseline build',
    numerator: 'tollgate-grpc',
    denominator: 'tollgate-grpc-baseline',
    metric: 'cpu',
    note: 'this build against BENCH_BASELINE, CPU per call',
  },
  {
    name: 'tollgate gRPC / gRPC direct (grpc-js client)',
    numerator: 'tollgate-grpc-js',
    denominator: 'grpc-js-direct',
    metric: 'throughput',
    goal: 0.5,
    note: 'unary calls by a grpc-js client process, 64 in flight on one channel',
  },
  {
    name: 'tollgate gRPC (undici) / gRPC direct',
    numerator: 'tollgate-grpc-undici',
    denominator: 'grpc-direct',
    metric: 'throughput',
    note: 'the upstream side on undici’s HTTP/2 client instead of node:http2 sessions',
  },
  {
    name: 'tollgate gRPC node:http2 / undici',
    numerator: 'tollgate-grpc',
    denominator: 'tollgate-grpc-undici',
    metric: 'cpu',
    note: 'CPU per call of the two upstream clients (docs/decisions.md)',
  },
  {
    name: 'tollgate gRPC streaming / gRPC streaming direct',
    numerator: 'tollgate-grpc-stream',
    denominator: 'grpc-stream-direct',
    metric: 'throughput',
    goal: 0.7,
  },
  {
    name: 'tollgate gRPC streaming (undici) / direct',
    numerator: 'tollgate-grpc-stream-undici',
    denominator: 'grpc-stream-direct',
    metric: 'throughput',
    note: 'the upstream side on undici’s HTTP/2 client',
  },
  {
    name: 'tollgate gRPC streaming node:http2 / undici',
    numerator: 'tollgate-grpc-stream',
    denominator: 'tollgate-grpc-stream-undici',
    metric: 'cpu',
    note: 'CPU per message of the two upstream clients',
  },
  // Latency at a moderate, fixed rate.
  { name: 'tollgate / nginx', numerator: 'tollgate', denominator: 'nginx', metric: 'paced-p99', goal: 2 },
  {
    name: 'undici-minimal / nginx',
    numerator: 'undici-minimal',
    denominator: 'nginx',
    metric: 'paced-p99',
    note: 'what a bare Node proxy reaches',
  },
  {
    name: 'tollgate / tollgate default young generation',
    numerator: 'tollgate',
    denominator: 'tollgate-default-young',
    metric: 'paced-p99',
    note: 'the young-generation cap (--max-semi-space-size) against V8’s default',
  },
];
