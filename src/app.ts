import type http from 'node:http';
import type { Http2SecureServer } from 'node:http2';
import type { AddressInfo, Server } from 'node:net';
import { createAdminServer, processSources } from './admin/server.ts';
import { createTokenApiServer } from './api/server.ts';
import { type Clock, systemClock } from './auth/clock.ts';
import { recordableQuery } from './auth/query.ts';
import { type LoadedRevocations, loadRevocationList, watchRevokedTokens } from './auth/revocation.ts';
import { ResponseCache } from './cache/response-cache.ts';
import {
  ADMIN_CONNECTIONS,
  applyClientLimits,
  openFileLimit,
  safeConnectionCap,
  TOKEN_API_CONNECTIONS,
} from './client-limits.ts';
import { tlsPairsOf } from './config/file-checks.ts';
import { serviceRefText } from './config/service-ref.ts';
import type { ListenAddress, MainConfig, UpstreamsConfig } from './config/types.ts';
import { createLifecycle } from './lifecycle.ts';
import { boundAddressesField, listen } from './listen.ts';
import { createProxyListeners } from './listeners/listeners.ts';
import { createLogger, type Logger } from './log.ts';
import { createObserve } from './observe/observe.ts';
import { followServerLoad } from './observe/server-load.ts';
import { createPipeline } from './pipeline/pipeline.ts';
import { answerClientError } from './proxy/client-error.ts';
import { createProxyHandler } from './proxy/server.ts';
import { createWebSocketHandler, isWebSocketUpgrade } from './proxy/websocket.ts';
import { compileRoutingTable } from './routing/compile.ts';
import type { RoutingTable } from './routing/types.ts';
import { createRuntime, type Runtime } from './runtime.ts';
import { createUpstreamsApplier, type UpstreamsApplier } from './sources/apply-upstreams.ts';
import { createFileWatcher, type FileWatcher } from './sources/files.ts';
import { createIngressCertificates } from './sources/kubernetes/ingress/certificates.ts';
import type { KubernetesProvider } from './sources/kubernetes/provider.ts';
import { usesKubernetes } from './sources/kubernetes/use.ts';
import { createMasterkeySource, type MasterkeySource } from './sources/masterkey.ts';
import { type RuntimeFiles, watchRuntimeFiles } from './sources/runtime-files.ts';
import { createTlsContextProvider, type TlsContextProvider } from './sources/tls-certificate.ts';
import { createUpstreamObserver } from './upstream/attempt-observer.ts';
import { createForwarder } from './upstream/forward.ts';
import { createServerHealth } from './upstream/health.ts';
import { UpstreamPools } from './upstream/pools.ts';
import type { ConfigSnapshot } from './workers/messages.ts';

/** A loaded and validated configuration: what config/load returns for main.yaml + upstreams.yaml. */
export interface TollgateConfig {
  main: MainConfig;
  upstreams: UpstreamsConfig;
}

export interface TollgateOptions {
  /** Token clock (seconds since the epoch); the system clock by default. */
  clock?: Clock;
  /** Defaults to a JSON logger on stdout at main.yaml's `log_level`. */
  logger?: Logger;
  /** Watch the files read at runtime (docs/reload.md) once listening (default true). */
  watch?: boolean;
  /**
   * Run as one worker of a primary (docs/workers.md): serve the proxy listener(s) only, bound with
   * SO_REUSEPORT when `reusePort`, and keep rate-limit counters in the primary. The primary serves
   * the admin and token API listeners, watches the files and sends each new config (applyConfig).
   */
  worker?: { reusePort: boolean };
}

/** Where each listener is actually bound (port 0 in main.yaml becomes the port the kernel chose). */
export interface BoundAddresses {
  proxy: ListenAddress;
  proxyTls: ListenAddress | null;
  api: ListenAddress;
  admin: ListenAddress;
}

export interface Tollgate {
  readonly logger: Logger;
  /** The live routing table and lifecycle phase (readiness, reloads). */
  readonly runtime: Runtime;
  /** Binds every listener, starts watching the config files, turns readiness on. */
  listen(): Promise<BoundAddresses>;
  /** The bound addresses; throws before listen() resolved. */
  addresses(): BoundAddresses;
  /** Checks the config files now (what SIGHUP does) and resolves once the check is done. */
  reload(reason?: string): Promise<void>;
  /**
   * A worker's way to take a config its primary validated (docs/workers.md): the masterkey the
   * primary resolved, then the upstreams config, compiled and swapped in. Returns the new table's hash.
   * Throws, keeping the live table, when the masterkey and upstreams.yaml disagree.
   */
  applyConfig(snapshot: WorkerConfig): string;
  /**
   * The graceful shutdown (docs/reload.md): readiness off, `shutdown_delay_seconds` of serving,
   * stop accepting, drain in-flight requests for up to `shutdown_grace_seconds`, release everything.
   * Calling it again returns the same promise.
   */
  close(reason?: string): Promise<void>;
  /** Removes this process's cached responses of a host key under a path prefix (docs/traffic.md#response-cache). */
  purgeCache(hostKey: string, prefix: string): number;
}

/** What a worker is sent with each config (docs/workers.md); see workers/messages. */
export type WorkerConfig = Omit<ConfigSnapshot, 'seq'>;

/** A start-up problem, already worded as the one line to print (the CLI adds nothing to it). */
export class StartError extends Error {}

export interface PreparedConfig {
  table: RoutingTable;
  masterkeys: MasterkeySource;
  /** Legal but probably unintended setups, to print or log before serving. */
  warnings: string[];
}

/**
 * What `start` and `validate` share after loading: the compiled table and the masterkey (from
 * masterkey_file or the environment). Throws StartError when either cannot be had.
 */
export function prepareConfig(config: TollgateConfig): PreparedConfig {
  // Validation refused everything compile could trip on (docs/configuration.md), so this cannot fail.
  const table = compileRoutingTable(config.upstreams);
  let masterkeys: MasterkeySource;
  try {
    masterkeys = createMasterkeySource(config.main, config.upstreams);
  } catch (error) {
    throw new StartError(`tollgate: ${(error as Error).message}`);
  }
  const warnings: string[] = [];
  const jwtRoutes = table.routes.filter((route) => route.auth?.type === 'jwt');
  if (jwtRoutes.length > 0 && masterkeys.current() === null) {
    // Fail closed, but say so: with no masterkey every token is refused and no token can be issued.
    warnings.push(
      `no masterkey is configured, so every request to the jwt routes (${jwtRoutes.map((r) => r.id).join(', ')}) ` +
        'will be refused; set masterkey, masterkey_file or TOLLGATE_MASTERKEY',
    );
  }
  return { table, masterkeys, warnings };
}

/**
 * Builds one Tollgate from a validated config: the proxy listener(s), the token API and the admin
 * listener, wired to one routing table that reloads swap whole. Nothing is bound until listen(), and
 * nothing here touches process-wide state (signals, exit codes, argv): that is src/cli.ts's job.
 */
export function createTollgate(config: TollgateConfig, options: TollgateOptions = {}): Tollgate {
  const { main } = config;
  const { table, masterkeys, warnings } = prepareConfig(config);
  const logger = options.logger ?? createLogger(main.logLevel);
  const clock = options.clock ?? systemClock;
  // A worker's primary has already said it, once for the set.
  if (!options.worker) for (const warning of warnings) logger.warn(warning);

  const runtime = createRuntime(main, logger, table);
  const pools = new UpstreamPools({
    timeouts: main.timeouts,
    limits: main.upstreamLimits,
    upstreamCaFile: main.upstreamCaFile ?? null,
  });
  runtime.onTableSwap((next) => pools.retainOnly(next));
  followServerLoad(() => pools.load(runtime.table()));
  const logUnverified = unverifiedUpstreamsLog(logger);
  logUnverified(table);
  runtime.onTableSwap(logUnverified);
  const health = createServerHealth({ logger, checkDispatcher: (server) => pools.checkPool(server) });
  health.sync(runtime.table());
  runtime.onTableSwap((next) => health.sync(next));

  // Every upstream attempt, HTTP or WebSocket, feeds passive health and the error counter here.
  const upstreamObserver = createUpstreamObserver(health, logger);
  const forward = createForwarder({
    pools,
    observer: upstreamObserver,
    responseTimeoutMs: main.timeouts.upstreamResponseHeadersMs,
    sendTimeoutMs: main.timeouts.clientSendMs,
  });
  let revocations: LoadedRevocations;
  try {
    revocations = loadRevocationList(main.revokedTokensFile ?? null, logger);
  } catch (error) {
    health.close();
    pools.close();
    throw new StartError(`tollgate: ${(error as Error).message}`);
  }
  const worker = options.worker ?? null;
  // The token parameter never reaches the access log or a span, whatever the route (docs/tokens.md),
  // nor a login callback's code and state (docs/observability.md).
  const observe = createObserve(main, logger, (query, path) => recordableQuery(query, path, main.tokenParam));
  // Each process has its own store (docs/traffic.md#response-cache); a purge reaches every worker.
  const cache = new ResponseCache({ globalMaxBytes: main.cache?.maxBytes ?? null, forward });
  runtime.onTableSwap((next) => cache.retainOnly(next));
  const pipeline = createPipeline({
    main,
    table: runtime.table,
    health,
    masterkey: masterkeys.current,
    revocations: revocations.list,
    clock,
    logger,
    rateLimitShared: worker ? 'cluster' : 'process',
    tracing: observe.tracing,
    cache,
  });
  const { recorder } = observe;
  const handler = createProxyHandler({
    pipeline,
    forward,
    recorder,
    logger,
    sendTimeoutMs: main.timeouts.clientSendMs,
  });
  const webSockets = createWebSocketHandler({
    runtime,
    pipeline,
    recorder,
    pools,
    observer: upstreamObserver,
  });

  let tls: TlsContextProvider | null = null;
  // A worker's Ingress TLS certificates, as the primary sends them (docs/ingress.md#tls).
  const ingressCertificates = createIngressCertificates(logger);
  const tlsPairs = tlsPairsOf(main);
  if (tlsPairs.length > 0) {
    try {
      tls = createTlsContextProvider({ pairs: tlsPairs, logger });
    } catch (error) {
      pipeline.close();
      health.close();
      pools.close();
      throw new StartError(`tollgate: cannot load the TLS certificates: ${(error as Error).message}`);
    }
  }
  // HTTP/1.1, h2c and TLS with ALPN h2 + http/1.1, all handing requests to the same handler.
  const listeners = createProxyListeners(
    main,
    {
      request: handler.handleRequest,
      checkContinue: handler.handleExpectContinue,
      upgrade: webSockets.handleUpgrade,
      shouldUpgrade: isWebSocketUpgrade,
      clientError: answerClientError,
    },
    tls ? tls.serverOptions() : null,
    tls ? (req) => tls?.misdirected(req) ?? false : undefined,
  );
  const proxyServer = listeners.plain;
  const tlsServer = listeners.tls;
  if (tls && tlsServer) tls.attach(tlsServer);
  // A worker's primary answers admin and token API requests for the whole set.
  const adminServer = worker
    ? null
    : createAdminServer(runtime, {
        ...processSources(runtime),
        purgeCache: async (hostKey, prefix) => ({ purged: cache.purge(hostKey, prefix) }),
      });
  const tokenApiServer = worker
    ? null
    : createTokenApiServer({ main, masterkey: masterkeys.current, logger, now: clock });
  applyListenerLimits(main, { proxyServer, tlsServer, tokenApiServer, adminServer });

  let hotReload: Pick<RuntimeFiles, 'trigger' | 'settled' | 'close'> | null = null;
  let kubernetes: KubernetesProvider | null = null;
  let bound: BoundAddresses | null = null;
  const reusePort = worker?.reusePort ?? false;
  const lifecycle = createLifecycle({
    runtime,
    main,
    logger,
    servers: [...listeners.drainable, ...(tokenApiServer ? [tokenApiServer] : [])],
    keepUntilExit: adminServer ? [adminServer] : [],
    cleanup: [
      () => hotReload?.close(),
      () => kubernetes?.close(),
      () => tls?.close(),
      () => webSockets.closeAll(),
      () => pipeline.close(),
      () => health.close(),
      () => pools.close(),
      () => observe.close(),
    ],
  });

  let closing: Promise<void> | null = null;
  const close = (reason = 'close') => {
    closing ??= lifecycle.shutdown(reason);
    return closing;
  };

  return {
    logger,
    runtime,
    async listen() {
      try {
        await observe.ready();
        bound = {
          // A worker reports the primary's admin and API addresses as configured.
          admin: adminServer
            ? await listenOn(adminServer, main.adminAddress, 'admin_address')
            : main.adminAddress,
          proxy: await listenOn(proxyServer, main.proxyAddressHttp, 'proxy_address_http', reusePort),
          api: tokenApiServer
            ? await listenOn(tokenApiServer, main.configAddress, 'config_address')
            : main.configAddress,
          proxyTls:
            tlsServer && main.proxyAddressTls
              ? await listenOn(tlsServer, main.proxyAddressTls, 'proxy_address_tls', reusePort)
              : null,
        };
        if (worker) {
          // A worker watches only what its own requests read; the primary watches the config.
          const workerFiles = await watchWorkerFiles(
            logger,
            tls,
            main.revokedTokensFile ?? null,
            revocations,
          );
          hotReload = workerFiles;
          await followUpstreamTlsFiles(workerFiles, runtime, pools, logger);
        }
        // Workers take their servers from the primary; a single process asks the API itself.
        if (!worker && usesKubernetes(main, config.upstreams)) {
          // Loaded only here: the client library is heavy (sources/kubernetes/use.ts).
          const { startKubernetesProvider } = await import('./sources/kubernetes/provider.ts');
          try {
            const own = bound;
            kubernetes = startKubernetesProvider({
              main,
              initial: config.upstreams,
              runtime,
              logger,
              ownListeners: () => [own.proxy, own.api, own.admin, ...(own.proxyTls ? [own.proxyTls] : [])],
              certificates: tls?.store ?? null,
            });
          } catch (error) {
            throw new StartError(`tollgate: kubernetes: ${(error as Error).message}`);
          }
        }
        const provider = kubernetes;
        const kubernetesHooks = provider
          ? {
              compile: provider.compile,
              onReloaded: (_: RoutingTable, next: UpstreamsConfig) => provider.configApplied(next),
            }
          : undefined;
        let upstreamsApplier: UpstreamsApplier | null = null;
        if (!worker && options.watch !== false) {
          // One watcher for every file read at runtime: upstreams.yaml, main.yaml, masterkey_file, TLS.
          const runtimeFiles = await watchRuntimeFiles({
            runtime,
            logger,
            masterkeys,
            tls,
            compileUpstreams: kubernetesHooks?.compile,
            onUpstreamsReloaded: kubernetesHooks?.onReloaded,
            // A ConfigMap read through the API replaces the file, which then only served the start.
            watchUpstreamsFile: !main.kubernetes?.upstreamsConfigMap,
          }).catch((error: Error) => {
            throw new StartError(`tollgate: ${error.message}`);
          });
          hotReload = runtimeFiles;
          upstreamsApplier = runtimeFiles.upstreams;
          await followUpstreamTlsFiles(runtimeFiles.files, runtime, pools, logger);
          if (main.revokedTokensFile) {
            await watchRevokedTokens(runtimeFiles.files, main.revokedTokensFile, revocations, logger);
          }
        }
        provider?.attach(
          upstreamsApplier ??
            createUpstreamsApplier({
              runtime,
              logger,
              beforeSwap: (next) => masterkeys.reload(next),
              ...kubernetesHooks,
            }),
        );
      } catch (error) {
        // Nothing is served half-way: release what was bound, then report the first problem.
        lifecycle.startFailed(error);
        await close('start-up failed');
        throw error instanceof Error && error.message.startsWith('cannot listen')
          ? new StartError(`tollgate: ${error.message}`)
          : error;
      }
      const addresses = bound;
      const boundAddresses = boundAddressesField(addresses);
      const announceReady = () => {
        runtime.phase = 'ready';
        logger.info(
          { hash: runtime.table().hash, routes: runtime.table().routes.length, addresses: boundAddresses },
          // A worker's primary says 'tollgate ready' for the whole set, once every worker serves.
          worker ? 'worker serving' : 'tollgate ready',
        );
      };
      const provider = kubernetes;
      if (provider === null || provider.synced()) announceReady();
      else {
        // Readiness waits for the first list of every watch (docs/kubernetes.md); serving does not.
        // The listeners already serve: say where, so the ports are known before readiness.
        logger.info(
          { addresses: boundAddresses },
          'waiting for the first Kubernetes sync before reporting ready',
        );
        void provider.whenSynced().then(() => {
          if (runtime.phase === 'starting') announceReady();
        });
      }
      return addresses;
    },
    addresses() {
      if (bound === null) throw new Error('tollgate is not listening yet');
      return bound;
    },
    async reload(reason = 'manual') {
      if (hotReload === null) return;
      hotReload.trigger(reason);
      await hotReload.settled();
    },
    applyConfig({ upstreams, masterkey, endpoints, certificates }) {
      if (tls) ingressCertificates.update(tls.store, certificates);
      const servers = new Map(endpoints);
      const next = compileRoutingTable(upstreams, (ref) => servers.get(serviceRefText(ref)) ?? []);
      // The worker's main.yaml names no masterkey source (the primary resolved it), so the key
      // given here is the only one, as a masterkey_file's would be.
      if (masterkey !== null) masterkeys.replaceFileKey(masterkey);
      masterkeys.reload(upstreams);
      runtime.swapTable(next);
      return next.hash;
    },
    close,
    purgeCache: (hostKey, prefix) => cache.purge(hostKey, prefix),
  };
}

/**
 * Bounds what clients can hold on every listener (docs/security.md): silent connections, stalled
 * bodies, and connection counts, with the admin and token API caps kept apart so probes and reloads
 * still work while the proxy port is flooded.
 */
export function applyListenerLimits(
  main: MainConfig,
  servers: {
    proxyServer: http.Server | null;
    tlsServer: Http2SecureServer | null;
    tokenApiServer: http.Server | null;
    adminServer: http.Server | null;
  },
): void {
  const timeouts = {
    firstByteMs: main.timeouts.clientFirstByteMs,
    bodyIdleMs: main.timeouts.clientBodyIdleMs,
  };
  const proxyConnections = safeConnectionCap(
    main.maxClientConnections,
    openFileLimit(),
    servers.tlsServer ? 2 : 1,
  );
  if (servers.proxyServer)
    applyClientLimits(servers.proxyServer, { ...timeouts, maxConnections: proxyConnections });
  if (servers.tlsServer)
    applyClientLimits(servers.tlsServer, { ...timeouts, maxConnections: proxyConnections }, true);
  // A worker of a primary has neither, and the primary no proxy listener (docs/workers.md).
  if (servers.tokenApiServer)
    applyClientLimits(servers.tokenApiServer, { ...timeouts, maxConnections: TOKEN_API_CONNECTIONS });
  // The admin listener evicts held connections at ADMIN_CONNECTIONS itself (admin/server.ts); this
  // is the hard ceiling behind it.
  if (servers.adminServer)
    applyClientLimits(servers.adminServer, { ...timeouts, maxConnections: ADMIN_CONNECTIONS * 2 });
}

/**
 * `verify: false` is never silent (docs/traffic.md#tls-to-upstreams): every route dialling a server
 * without checking its certificate is named at start and on each reload, once per set of routes
 * (Kubernetes endpoint changes swap the table often).
 */
function unverifiedUpstreamsLog(logger: Logger): (table: RoutingTable) => void {
  let logged = '';
  return (table) => {
    const routes = table.routes
      .filter((route) => route.servers.some((server) => server.transport.tls?.verify === false))
      .map((route) => route.id);
    const key = routes.join('\n');
    if (key === logged) return;
    logged = key;
    if (routes.length === 0) return;
    logger.warn(
      { routes },
      'upstream_tls verify: false: these routes do not check their upstream certificates',
    );
  };
}

/** The upstream TLS files the live routes name, followed as the table changes (upstream/tls-files). */
async function followUpstreamTlsFiles(
  files: FileWatcher,
  runtime: Runtime,
  pools: UpstreamPools,
  logger: Logger,
): Promise<void> {
  let following: Promise<void> = pools.tlsFiles.follow(files, runtime.table(), logger);
  await following;
  runtime.onTableSwap((next) => {
    following = following.then(() => pools.tlsFiles.follow(files, next, logger));
  });
}

async function watchWorkerFiles(
  logger: Logger,
  tls: TlsContextProvider | null,
  revokedTokensFile: string | null,
  revocations: LoadedRevocations,
): Promise<FileWatcher> {
  const files = await createFileWatcher({ logger });
  await tls?.watch(files);
  if (revokedTokensFile) await watchRevokedTokens(files, revokedTokensFile, revocations, logger);
  return files;
}

async function listenOn(
  server: Server,
  address: ListenAddress,
  key: string,
  reusePort = false,
): Promise<ListenAddress> {
  await listen(server, address, key, { reusePort });
  const { port } = server.address() as AddressInfo;
  return { host: address.host, port };
}
