import { type Clock, systemClock } from '../auth/clock.ts';
import { recordableQuery } from '../auth/query.ts';
import { loadRevocationList } from '../auth/revocation.ts';
import { ResponseCache } from '../cache/response-cache.ts';
import { tlsPairsOf } from '../config/file-checks.ts';
import type { ListenAddress, MainConfig } from '../config/types.ts';
import type { DrainableServer } from '../lifecycle.ts';
import { applyListenerLimits, listenOn } from '../listener-limits.ts';
import { createProxyListeners } from '../listeners/listeners.ts';
import type { Logger } from '../log.ts';
import { createObserve } from '../observe/observe.ts';
import { followServerLoad } from '../observe/server-load.ts';
import { createPipeline } from '../pipeline/pipeline.ts';
import { answerClientError } from '../proxy/client-error.ts';
import { createProxyHandler } from '../proxy/server.ts';
import { createWebSocketHandler, isWebSocketUpgrade } from '../proxy/websocket.ts';
import { createRuntime, type Runtime } from '../runtime.ts';
import type { Snapshot } from '../snapshot.ts';
import { createFileWatcher, type FileWatcher } from '../sources/files.ts';
import { createIngressCertificates } from '../sources/kubernetes/ingress/certificates.ts';
import { createTlsContextProvider, type TlsContextProvider } from '../sources/tls-certificate.ts';
import { StartError } from '../start-error.ts';
import { createUpstreamObserver } from '../upstream/attempt-observer.ts';
import { createForwarder } from '../upstream/forward.ts';
import { createServerHealth } from '../upstream/health.ts';
import { UpstreamPools } from '../upstream/pools.ts';
import { sameCertificates, unverifiedUpstreamsLog, watchDataFiles } from './files.ts';

export interface DataPlaneOptions {
  logger: Logger;
  /** Token clock (seconds since the epoch); the system clock by default. */
  clock?: Clock | undefined;
  /** What is served until the first applySnapshot. */
  initial: Snapshot;
  /**
   * One worker of a primary (docs/workers.md): the proxy listener(s) bound with SO_REUSEPORT when
   * `reusePort`, and rate-limit counters kept in the primary.
   */
  worker?: { reusePort: boolean };
}

/**
 * What serves proxy requests (docs/architecture.md): the live table, the pipeline, the upstream
 * pools and health, the response cache and the proxy listeners. A configuration reaches it only as
 * a snapshot, through applySnapshot.
 */
export interface DataPlane {
  /** The live routing table; swapped by applySnapshot alone. */
  readonly runtime: Runtime;
  /** The one place the served configuration changes: table, masterkey, SNI certificates. */
  applySnapshot(snapshot: Snapshot): void;
  /** Resolves once what must be up before serving is (tracing's exporter). */
  ready(): Promise<void>;
  /** Binds the proxy listener(s). */
  listen(): Promise<{ proxy: ListenAddress; proxyTls: ListenAddress | null }>;
  /**
   * Watches what the requests read (TLS pair, upstream TLS files, revoked tokens) with `files`, or
   * with a watcher of its own (a worker, whose primary watches the config) closed at cleanup.
   */
  watchFiles(files?: FileWatcher): Promise<void>;
  /** Removes this process's cached responses of a host key under a path prefix (docs/traffic.md#response-cache). */
  purgeCache(hostKey: string, prefix: string): number;
  /** The listeners a shutdown stops and drains. */
  readonly drainable: readonly DrainableServer[];
  /** A shutdown's cleanup steps, once the listeners are drained. */
  readonly cleanup: ReadonlyArray<() => unknown>;
}

export function createDataPlane(main: MainConfig, options: DataPlaneOptions): DataPlane {
  const { logger, initial } = options;
  const worker = options.worker ?? null;
  const runtime = createRuntime(main, logger, initial.table);
  const pools = new UpstreamPools({
    timeouts: main.timeouts,
    limits: main.upstreamLimits,
    upstreamCaFile: main.upstreamCaFile ?? null,
  });
  runtime.onTableSwap((next) => pools.retainOnly(next));
  followServerLoad(() => pools.load(runtime.table()));
  const logUnverified = unverifiedUpstreamsLog(logger);
  logUnverified(initial.table);
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
  let revocations: ReturnType<typeof loadRevocationList>;
  try {
    revocations = loadRevocationList(main.revokedTokensFile ?? null, logger);
  } catch (error) {
    health.close();
    pools.close();
    throw new StartError(`tollgate: ${(error as Error).message}`);
  }
  // The token parameter never reaches the access log or a span, whatever the route (docs/tokens.md),
  // nor a login callback's code and state (docs/observability.md).
  const observe = createObserve(main, logger, (query, path) => recordableQuery(query, path, main.tokenParam));
  // Each process has its own store (docs/traffic.md#response-cache); a purge reaches every worker.
  const cache = new ResponseCache({ globalMaxBytes: main.cache?.maxBytes ?? null, forward });
  runtime.onTableSwap((next) => cache.retainOnly(next));
  let masterkey = initial.masterkey;
  const pipeline = createPipeline({
    main,
    table: runtime.table,
    health,
    masterkey: () => masterkey,
    revocations: revocations.list,
    clock: options.clock ?? systemClock,
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
  // The Ingress and Gateway API TLS certificates, as the snapshots bring them (docs/ingress.md#tls).
  const ingressCertificates = createIngressCertificates(logger);
  let certificates: Snapshot['certificates'] = [];
  const applyCertificates = (next: Snapshot['certificates']) => {
    if (tls === null || sameCertificates(certificates, next)) return;
    certificates = next;
    ingressCertificates.update(tls.store, next);
  };
  applyCertificates(initial.certificates);
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
  const { plain: proxyServer, tls: tlsServer } = listeners;
  if (tls && tlsServer) tls.attach(tlsServer);
  applyListenerLimits(main, { proxyServer, tlsServer });
  const reusePort = worker?.reusePort ?? false;
  let ownFiles: FileWatcher | null = null;

  return {
    runtime,
    applySnapshot(snapshot) {
      applyCertificates(snapshot.certificates);
      masterkey = snapshot.masterkey;
      // A new masterkey alone comes with the table already served: nothing to swap.
      if (snapshot.table !== runtime.table()) runtime.swapTable(snapshot.table);
    },
    ready: () => observe.ready(),
    async listen() {
      const proxy = await listenOn(proxyServer, main.proxyAddressHttp, 'proxy_address_http', reusePort);
      const proxyTls =
        tlsServer && main.proxyAddressTls
          ? await listenOn(tlsServer, main.proxyAddressTls, 'proxy_address_tls', reusePort)
          : null;
      return { proxy, proxyTls };
    },
    async watchFiles(shared) {
      if (shared === undefined) ownFiles = await createFileWatcher({ logger });
      const files = shared ?? ownFiles;
      if (files === null) return;
      await watchDataFiles({
        files,
        runtime,
        pools,
        tls,
        revokedTokensFile: main.revokedTokensFile ?? null,
        revocations,
        logger,
      });
    },
    purgeCache: (hostKey, prefix) => cache.purge(hostKey, prefix),
    drainable: listeners.drainable,
    cleanup: [
      () => ownFiles?.close(),
      () => tls?.close(),
      () => webSockets.closeAll(),
      () => pipeline.close(),
      () => health.close(),
      () => pools.close(),
      () => observe.close(),
    ],
  };
}
