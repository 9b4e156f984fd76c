import cluster, { type Worker } from 'node:cluster';
import type { Server } from 'node:net';
import { createAdminServer, type Readiness } from '../admin/server.ts';
import { createTokenApiServer } from '../api/server.ts';
import { applyListenerLimits, prepareConfig, StartError, type TollgateConfig } from '../app.ts';
import { serviceRefText } from '../config/service-ref.ts';
import type { MainConfig, UpstreamsConfig } from '../config/types.ts';
import { createLifecycle } from '../lifecycle.ts';
import { boundAddressesField, listen } from '../listen.ts';
import { abandonLogs, createLogger, type Logger } from '../log.ts';
import { rateLimitBackendUp, registerWorkerMetrics, registry } from '../observe/metrics.ts';
import { reloadRecords } from '../observe/reload-journal.ts';
import { buildStatus } from '../observe/status.ts';
import { serveClusterCounters } from '../pipeline/cluster-counters.ts';
import { createRuntime } from '../runtime.ts';
import type { KubernetesProvider } from '../sources/kubernetes/provider.ts';
import { serviceRefs, usesKubernetes } from '../sources/kubernetes/use.ts';
import type { MasterkeySource } from '../sources/masterkey.ts';
import { type RuntimeFiles, watchRuntimeFiles } from '../sources/runtime-files.ts';
import { withLaunchFlags } from '../v8-launch-flags.ts';
import {
  type ConfigSnapshot,
  isWorkerMessage,
  type PrimaryMessage,
  type WorkerMessage,
  type WorkerPorts,
} from './messages.ts';
import { createClusterMetrics } from './metrics.ts';
import { CrashHistory, DEFAULT_RESTART_POLICY, type RestartPolicy } from './restarts.ts';

export interface PrimaryOptions {
  /** How many worker processes (at least 2; one worker is the plain single process). */
  workers: number;
  logger?: Logger;
  restartPolicy?: RestartPolicy;
  /** How often the primary collects the workers' metrics between scrapes (see workers/metrics). */
  metricsPollMs?: number;
}

export interface Primary {
  /** Binds the admin and token API listeners, starts every worker, resolves once all serve. */
  listen(): Promise<void>;
  /** Checks the config files now (SIGHUP), resolves once the check is done. */
  reload(reason?: string): Promise<void>;
  /**
   * Readiness off, every worker drains (docs/workers.md), then the primary's own listeners close.
   * Resolves with the exit code: 0 when every worker drained and exited cleanly.
   */
  close(reason?: string): Promise<number>;
  /** Stops at once: every worker is killed. For a second signal during a drain. */
  kill(): void;
}

/** How long the primary waits for the metrics of a worker that does not answer, per request. */
const METRICS_TIMEOUT_MS = 1_000;
/** After the workers' own delay and grace, how long the primary still waits before killing them. */
const EXIT_MARGIN_MS = 5_000;

type SlotState = 'starting' | 'serving' | 'draining' | 'down';

/** One of the N places a worker runs in; a replacement takes the place of the worker it replaces. */
interface Slot {
  readonly index: number;
  worker: Worker | null;
  state: SlotState;
  /** The config (by sequence number) the worker said it serves. */
  seq: number;
  history: CrashHistory;
  /** Why the primary killed this slot's worker itself: its replacement is counted under this reason. */
  replacing: 'config' | null;
  restartTimer: NodeJS.Timeout | null;
}

/**
 * The primary of a set of workers (docs/workers.md). It owns everything that must be one for the
 * whole set: the config files (watched and validated here, sent to every worker), the admin port
 * (readiness of all workers, their summed metrics), the token API (one wrong-key limiter), the
 * shared rate-limit counters (rate-limiter-flexible's cluster master), and the workers' lives.
 * Workers only compile the config they are sent and serve the proxy listeners.
 */
export function createPrimary(config: TollgateConfig, options: PrimaryOptions): Primary {
  const { main } = config;
  const logger = options.logger ?? createLogger(main.logLevel);
  const policy = options.restartPolicy ?? DEFAULT_RESTART_POLICY;
  const prepared = prepareConfig(config);
  const { table, warnings } = prepared;
  for (const warning of warnings) logger.warn(warning);

  // The primary's table is never served: it is the config every worker is told to serve.
  const runtime = createRuntime(main, logger, table);
  // The config every worker is told to serve; `seq` grows with each one.
  let live: ConfigSnapshot = {
    seq: 1,
    upstreams: config.upstreams,
    masterkey: prepared.masterkeys.current(),
    endpoints: [],
    certificates: [],
  };
  // upstreams.yaml as live, before any Ingress route is merged in.
  let base = config.upstreams;
  // With provider: kubernetes the primary alone watches the API and sends the endpoints on.
  let kubernetes: KubernetesProvider | null = null;
  const endpointsOf = (upstreams: UpstreamsConfig): ConfigSnapshot['endpoints'] => {
    const provider = kubernetes;
    if (provider === null) return [];
    return serviceRefs(upstreams).map((ref) => [serviceRefText(ref), [...provider.endpointsOf(ref)]]);
  };
  let hash = table.hash;
  // What workers are started with: main.yaml, with a port 0 replaced by the port the first worker got,
  // and no masterkey source of its own (the key comes with every snapshot).
  let workerMain: MainConfig = { ...main, masterkey: null, masterkeyFile: null };
  let proxyPorts: WorkerPorts | null = null;

  const workerMetrics = registerWorkerMetrics();
  // The gauge is the minimum over processes; the primary's memory store is always there, so its own
  // 1 leaves the workers' view of Redis (when configured) to decide.
  rateLimitBackendUp.set(1);
  const clusterMetrics = createClusterMetrics();
  // Counters of every worker's limiters live here, so a budget is one for the whole set.
  serveClusterCounters();

  const slots: Slot[] = Array.from({ length: options.workers }, (_, index) => ({
    index,
    worker: null,
    state: 'down',
    seq: 0,
    history: new CrashHistory(policy),
    replacing: null,
    restartTimer: null,
  }));
  const slotOf = (worker: Worker) => slots.find((slot) => slot.worker === worker);
  // A worker can exit between isConnected() and the write (one that failed to bind, at start): the
  // write then fails with EPIPE, which without a callback is an 'error' event that ends the primary.
  // Its exit is handled where workers' exits are, so the failed send is only noted.
  const sendTo = (worker: Worker | null, message: PrimaryMessage) => {
    if (!worker?.isConnected()) return;
    worker.send(message, undefined, undefined, (error: Error | null) => {
      if (error)
        logger.debug({ err: error, message: message.tollgate }, 'message to an exiting worker not sent');
    });
  };

  let started = false;
  let shuttingDown = false;
  let startup: { resolve: () => void; reject: (error: Error) => void } | null = null;
  let allExited: (() => void) | null = null;
  let exitCode = 0;

  const servingCurrent = () =>
    slots.filter((slot) => slot.state === 'serving' && slot.seq === live.seq).length;

  /** The hash every serving worker serves, or null while they disagree (a swap in progress). */
  const liveHash = (): string | null => {
    const serving = slots.filter((slot) => slot.state === 'serving');
    return serving.length > 0 && serving.every((slot) => slot.seq === live.seq) ? hash : null;
  };

  const readiness = (): Readiness => {
    const now = performance.now();
    const serving = servingCurrent();
    const counts = { workers: slots.length, workers_serving: serving };
    if (runtime.phase !== 'ready') return { ready: false, body: { status: runtime.phase, ...counts } };
    if (slots.some((slot) => slot.history.crashLooping(now)))
      return { ready: false, body: { status: 'crash_loop', ...counts } };
    if (serving < slots.length) return { ready: false, body: { status: 'workers_not_serving', ...counts } };
    return { ready: true, body: { status: 'ready', config_hash: hash, ...counts } };
  };

  // Metrics: every scrape asks every worker for a fresh snapshot, and so does a timer in between.
  let metricsRequest = 0;
  const metricsWaiters = new Map<number, { waiting: Set<Worker>; done: () => void }>();
  const collectMetrics = () =>
    new Promise<void>((resolve) => {
      const id = ++metricsRequest;
      const waiting = new Set(slots.flatMap((slot) => (slot.worker?.isConnected() ? [slot.worker] : [])));
      if (waiting.size === 0) return resolve();
      const timer = setTimeout(() => done(), METRICS_TIMEOUT_MS);
      const done = () => {
        clearTimeout(timer);
        metricsWaiters.delete(id);
        resolve();
      };
      metricsWaiters.set(id, { waiting, done });
      for (const worker of waiting) sendTo(worker, { tollgate: 'metrics-request', id });
    });
  const metricsPoll = setInterval(() => void collectMetrics(), options.metricsPollMs ?? 5_000);
  metricsPoll.unref();
  const metrics = async () => {
    await collectMetrics();
    workerMetrics.serving.set(servingCurrent());
    return clusterMetrics.render(registry, liveHash());
  };

  // /status: the primary's table and reloads, the workers' numbers as summed for /metrics, and
  // what the primary knows of each worker from their messages (docs/workers.md).
  const status = async () => {
    await collectMetrics();
    workerMetrics.serving.set(servingCurrent());
    return buildStatus({
      now: Date.now(),
      phase: runtime.phase,
      table: runtime.table(),
      metrics: await clusterMetrics.snapshot(registry, liveHash()),
      reloads: reloadRecords(),
      workers: {
        configured: slots.length,
        serving: servingCurrent(),
        list: slots.map((slot) => ({
          index: slot.index,
          pid: slot.worker?.process.pid ?? null,
          state: slot.state,
          serves_live_config: slot.state === 'serving' && slot.seq === live.seq,
        })),
      },
    });
  };
  // DELETE /cache: every worker empties its own store and says how much (docs/traffic.md#response-cache).
  let purgeRequest = 0;
  const purgeWaiters = new Map<number, { waiting: Set<Worker>; purged: number; done: () => void }>();
  const purgeCache = (host: string, prefix: string) =>
    new Promise<{ purged: number; missing?: number }>((resolve) => {
      const id = ++purgeRequest;
      const waiting = new Set(slots.flatMap((slot) => (slot.worker?.isConnected() ? [slot.worker] : [])));
      const state = { waiting, purged: 0, done: () => {} };
      const timer = setTimeout(() => state.done(), METRICS_TIMEOUT_MS);
      state.done = () => {
        clearTimeout(timer);
        purgeWaiters.delete(id);
        resolve(
          state.waiting.size === 0
            ? { purged: state.purged }
            : { purged: state.purged, missing: state.waiting.size },
        );
      };
      if (waiting.size === 0) return state.done();
      purgeWaiters.set(id, state);
      for (const worker of waiting) sendTo(worker, { tollgate: 'cache-purge', id, host, prefix });
    });
  const adminServer = createAdminServer(runtime, { readiness, metrics, status, purgeCache });
  // A rotated masterkey_file is applied here first (token API), then sent to every worker.
  const masterkeys: MasterkeySource = {
    ...prepared.masterkeys,
    current: () => prepared.masterkeys.current(),
    reload: (next) => prepared.masterkeys.reload(next),
    replaceFileKey(key) {
      prepared.masterkeys.replaceFileKey(key);
      broadcast(base, hash);
    },
  };
  const tokenApiServer = createTokenApiServer({ main, masterkey: masterkeys.current, logger });
  applyListenerLimits(main, { proxyServer: null, tlsServer: null, tokenApiServer, adminServer });
  let hotReload: RuntimeFiles | null = null;

  // Workers take the young-generation cap even when the primary was started without it: they are
  // the ones serving requests (src/v8-launch-flags.ts).
  cluster.setupPrimary({ execArgv: withLaunchFlags(process.execArgv) });
  const fork = (slot: Slot) => {
    slot.restartTimer = null;
    slot.replacing = null;
    slot.state = 'starting';
    slot.worker = cluster.fork({ TOLLGATE_WORKER: String(slot.index) });
  };

  const onMessage = (worker: Worker, message: unknown) => {
    if (!isWorkerMessage(message)) return;
    const slot = slotOf(worker);
    if (slot === undefined) return;
    handle(slot, worker, message);
  };

  const handle = (slot: Slot, worker: Worker, message: WorkerMessage) => {
    switch (message.tollgate) {
      case 'hello':
        if (shuttingDown) return void worker.process.kill('SIGKILL');
        sendTo(worker, { tollgate: 'start', main: workerMain, config: live });
        return;
      case 'serving':
        // Started while the set was shutting down: it missed the shutdown message, so it gets one now.
        if (shuttingDown) return sendTo(worker, { tollgate: 'shutdown' });
        if (slot.state !== 'serving') slot.history.serving(performance.now());
        slot.state = 'serving';
        slot.seq = message.seq;
        // Started on a config that has been replaced meanwhile: it gets the live one now.
        if (message.seq !== live.seq) sendTo(worker, { tollgate: 'config', config: live });
        else
          logger.debug({ worker: worker.process.pid, hash: message.hash }, 'worker serves the live config');
        if (proxyPorts === null) {
          // The first worker bound port 0 (if so configured) to a real port: every other worker,
          // and every replacement, joins that one, since SO_REUSEPORT shares only a port both name.
          // With fixed ports all were forked at once and none is left down here.
          proxyPorts = message.ports;
          workerMain = pinPorts(workerMain, message.ports);
          for (const other of slots) if (other.state === 'down' && other.restartTimer === null) fork(other);
        }
        if (!started && servingCurrent() === slots.length) startup?.resolve();
        return;
      case 'config-failed':
        // Never leave a worker behind on an old table: replace it; the replacement starts on the live one.
        logger.error(
          { worker: worker.process.pid, hash, err: message.error },
          'a worker could not apply the live config; replacing it',
        );
        slot.replacing = 'config';
        worker.process.kill('SIGKILL');
        return;
      case 'start-failed':
        // The worker's message is already the one line a single process would print.
        if (!started) startup?.reject(new StartError(message.error));
        else logger.error({ worker: worker.process.pid, err: message.error }, 'a worker could not start');
        return;
      case 'draining':
        slot.state = 'draining';
        return;
      case 'cache-purged': {
        const waiter = purgeWaiters.get(message.id);
        if (waiter === undefined || !waiter.waiting.delete(worker)) return;
        waiter.purged += message.count;
        if (waiter.waiting.size === 0) waiter.done();
        return;
      }
      case 'metrics': {
        clusterMetrics.update(worker.id, message.snapshot);
        const waiter = metricsWaiters.get(message.id);
        if (waiter === undefined) return;
        waiter.waiting.delete(worker);
        if (waiter.waiting.size === 0) waiter.done();
        return;
      }
    }
  };

  const onExit = (worker: Worker, code: number | null, signal: string | null) => {
    const slot = slotOf(worker);
    if (slot === undefined) return;
    clusterMetrics.retire(worker.id);
    for (const waiter of [...metricsWaiters.values(), ...purgeWaiters.values()]) {
      waiter.waiting.delete(worker);
      if (waiter.waiting.size === 0) waiter.done();
    }
    slot.worker = null;
    slot.state = 'down';
    if (shuttingDown) {
      if (code !== 0) exitCode = 1;
      logger.info({ worker: worker.process.pid, code, signal }, 'worker exited');
      if (slots.every((other) => other.worker === null)) allExited?.();
      return;
    }
    if (!started) {
      startup?.reject(
        new StartError(`tollgate: a worker exited during start (${signal ?? `exit code ${code}`})`),
      );
      return;
    }
    const reason = slot.replacing ?? 'crash';
    workerMetrics.restartsTotal.inc({ reason });
    const now = performance.now();
    const delayMs = slot.history.crashed(now);
    logger.error(
      {
        worker: worker.process.pid,
        code,
        signal,
        reason,
        restart_in_ms: delayMs,
        crashes_in_a_row: slot.history.crashesInARow,
      },
      'worker exited; replacing it',
    );
    if (slot.history.crashLooping(now)) {
      logger.error(
        { crashes_in_a_row: slot.history.crashesInARow, stable_after_ms: policy.stableAfterMs },
        'workers are crash-looping: readiness is off until a replacement keeps serving',
      );
    }
    slot.restartTimer = setTimeout(() => fork(slot), delayMs);
  };

  const broadcast = (next: UpstreamsConfig, nextHash: string) => {
    base = next;
    // Workers get upstreams.yaml with the Ingress routes merged in (docs/ingress.md).
    const served = kubernetes ? kubernetes.effective(next) : next;
    live = {
      seq: live.seq + 1,
      upstreams: served,
      masterkey: masterkeys.current(),
      endpoints: endpointsOf(served),
      certificates: kubernetes?.certificates() ?? [],
    };
    hash = nextHash;
    for (const slot of slots) {
      if (slot.state === 'serving') sendTo(slot.worker, { tollgate: 'config', config: live });
    }
  };

  // Every swap of the primary's table (a reload, a ConfigMap, an endpoint change) is sent on. A
  // reload's new config is handed over (onUpstreamsReloaded) just after its swap, so the sending
  // waits for the end of the current task.
  let reloadedConfig: UpstreamsConfig | null = null;
  let swapQueued = false;
  runtime.onTableSwap(() => {
    if (swapQueued) return;
    swapQueued = true;
    queueMicrotask(() => {
      swapQueued = false;
      const next = reloadedConfig ?? base;
      reloadedConfig = null;
      broadcast(next, runtime.table().hash);
    });
  });

  const lifecycle = createLifecycle({
    runtime,
    main,
    logger,
    servers: [tokenApiServer],
    cleanup: [() => hotReload?.close(), () => kubernetes?.close(), () => clearInterval(metricsPoll)],
  });

  const stopWorkers = () =>
    new Promise<void>((resolve) => {
      for (const slot of slots) {
        if (slot.restartTimer) clearTimeout(slot.restartTimer);
        slot.restartTimer = null;
      }
      if (slots.every((slot) => slot.worker === null)) return resolve();
      const deadline = setTimeout(
        () => {
          logger.warn('workers still running after the shutdown grace; killing them');
          exitCode = 1;
          for (const slot of slots) slot.worker?.process.kill('SIGKILL');
        },
        (main.shutdownDelaySeconds + main.shutdownGraceSeconds) * 1000 + EXIT_MARGIN_MS,
      );
      allExited = () => {
        clearTimeout(deadline);
        resolve();
      };
      for (const slot of slots) sendTo(slot.worker, { tollgate: 'shutdown' });
    });

  let closing: Promise<number> | null = null;
  const close = (reason = 'close') => {
    closing ??= (async () => {
      shuttingDown = true;
      startup?.reject(new StartError('tollgate: stopped during start'));
      const [drained] = await Promise.all([stopWorkers().then(() => exitCode), lifecycle.shutdown(reason)]);
      cluster.off('message', onMessage);
      cluster.off('exit', onExit);
      await new Promise<void>((resolve) => adminServer.close(() => resolve()));
      return drained;
    })();
    return closing;
  };

  return {
    async listen() {
      cluster.on('message', onMessage);
      cluster.on('exit', onExit);
      try {
        const admin = await listenOn(adminServer, main.adminAddress, 'admin_address');
        const api = await listenOn(tokenApiServer, main.configAddress, 'config_address');
        if (usesKubernetes(main, config.upstreams)) {
          // Loaded only here: the client library is heavy (sources/kubernetes/use.ts).
          const { startKubernetesProvider } = await import('../sources/kubernetes/provider.ts');
          // Before the workers, so the first of them can start with endpoints already listed.
          try {
            kubernetes = startKubernetesProvider({
              main,
              initial: config.upstreams,
              runtime,
              logger,
              // The workers' proxy ports are known once the first serves (port 0 until then).
              ownListeners: () => [
                admin,
                api,
                workerMain.proxyAddressHttp,
                ...(workerMain.proxyAddressTls ? [workerMain.proxyAddressTls] : []),
              ],
            });
          } catch (error) {
            throw new StartError(`tollgate: kubernetes: ${(error as Error).message}`);
          }
        }
        await new Promise<void>((resolve, reject) => {
          startup = { resolve, reject };
          // With a port 0 to resolve, the others start once the first is serving (see 'serving').
          const portsKnown =
            main.proxyAddressHttp.port !== 0 &&
            (main.proxyAddressTls === null || main.proxyAddressTls.port !== 0);
          for (const slot of portsKnown ? slots : slots.slice(0, 1)) fork(slot);
        });
        startup = null;
        started = true;
        const provider = kubernetes;
        const runtimeFiles = await watchRuntimeFiles({
          runtime,
          logger,
          masterkeys,
          compileUpstreams: provider?.compile,
          onUpstreamsReloaded: (_table, nextConfig) => {
            reloadedConfig = nextConfig;
            provider?.configApplied(nextConfig);
          },
          // A ConfigMap read through the API replaces the file, which then only served the start.
          watchUpstreamsFile: !main.kubernetes?.upstreamsConfigMap,
        }).catch((error: Error) => {
          throw new StartError(`tollgate: ${error.message}`);
        });
        hotReload = runtimeFiles;
        provider?.attach(runtimeFiles.upstreams);
        const boundAddresses = boundAddressesField({
          proxy: workerMain.proxyAddressHttp,
          proxyTls: workerMain.proxyAddressTls,
          api,
          admin,
        });
        const announceReady = () => {
          runtime.phase = 'ready';
          logger.info({ hash, workers: slots.length, addresses: boundAddresses }, 'tollgate ready');
        };
        if (provider === null || provider.synced()) announceReady();
        else {
          // Readiness waits for the first list of every watch (docs/kubernetes.md); serving does not.
          // The workers already serve: say where, so the ports are known before readiness.
          logger.info(
            { addresses: boundAddresses },
            'waiting for the first Kubernetes sync before reporting ready',
          );
          void provider.whenSynced().then(() => {
            if (runtime.phase === 'starting') announceReady();
          });
        }
      } catch (error) {
        startup = null;
        for (const slot of slots) slot.worker?.process.kill('SIGKILL');
        lifecycle.startFailed(error);
        await close('start-up failed');
        throw error instanceof Error && error.message.startsWith('cannot listen')
          ? new StartError(`tollgate: ${error.message}`)
          : error;
      }
    },
    async reload(reason = 'manual') {
      if (hotReload === null) return;
      hotReload.trigger(reason);
      await hotReload.settled();
    },
    close,
    kill() {
      for (const slot of slots) slot.worker?.process.kill('SIGKILL');
      // Exiting at once: log lines stdout has not taken are given up, never waited for.
      abandonLogs(logger);
    },
  };
}

function pinPorts(main: MainConfig, ports: WorkerPorts): MainConfig {
  return {
    ...main,
    proxyAddressHttp: { ...main.proxyAddressHttp, port: ports.proxy },
    proxyAddressTls:
      main.proxyAddressTls && ports.proxyTls !== null
        ? { ...main.proxyAddressTls, port: ports.proxyTls }
        : main.proxyAddressTls,
  };
}

async function listenOn(server: Server, address: { host: string; port: number }, key: string) {
  await listen(server, address, key);
  const bound = server.address();
  return { host: address.host, port: typeof bound === 'object' && bound ? bound.port : address.port };
}
