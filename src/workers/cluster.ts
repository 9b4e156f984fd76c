import cluster, { type Worker } from 'node:cluster';
import type { MainConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import type { ConfigSnapshot } from '../snapshot.ts';
import { StartError } from '../start-error.ts';
import { withLaunchFlags } from '../v8-launch-flags.ts';
import {
  isWorkerMessage,
  type MetricsSnapshot,
  type PrimaryMessage,
  type WorkerMessage,
  type WorkerPorts,
  type WorkerSnapshot,
} from './messages.ts';
import { WorkerRequests } from './requests.ts';
import { CrashHistory, type RestartPolicy } from './restarts.ts';
import { toWorkerSnapshot } from './snapshots.ts';

/** After the workers' own delay and grace, how long the primary still waits before killing them. */
const EXIT_MARGIN_MS = 5_000;

type SlotState = 'starting' | 'serving' | 'draining' | 'down';

/** One of the N places a worker runs in; a replacement takes the place of the worker it replaces. */
export interface Slot {
  readonly index: number;
  worker: Worker | null;
  state: SlotState;
  /** The snapshot (by sequence number) the worker said it serves. */
  seq: number;
  history: CrashHistory;
  /** Why the primary killed this slot's worker itself: its replacement is counted under this reason. */
  replacing: 'config' | null;
  restartTimer: NodeJS.Timeout | null;
}

export interface ClusterOptions {
  workers: number;
  policy: RestartPolicy;
  logger: Logger;
  /** main.yaml as workers are started with it: no masterkey source (the key comes with each snapshot). */
  main: MainConfig;
  /** The snapshot the first workers start with. */
  initial: ConfigSnapshot;
  /** A worker's metrics arrived (answering a request or not). */
  onMetrics(worker: Worker, snapshot: MetricsSnapshot): void;
  /** A worker exited (its metrics are retired); `reason` is set when it is being replaced. */
  onExit(worker: Worker, reason: 'crash' | 'config' | null): void;
}

/**
 * The workers' lives (docs/workers.md): forking, the start handshake, snapshots sent on, replacing
 * a worker that crashed or could not apply the live snapshot (with backoff), and the drain at the end.
 */
export function createCluster(options: ClusterOptions) {
  const { logger, policy } = options;
  // The snapshot every worker is told to serve; `seq` grows with each one.
  let live: WorkerSnapshot = toWorkerSnapshot(1, options.initial);
  let hash = options.initial.table.hash;
  // main.yaml with a port 0 replaced by the port the first worker got.
  let workerMain = options.main;
  let proxyPorts: WorkerPorts | null = null;
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
  const metricsRequests = new WorkerRequests<null>();
  const purgeRequests = new WorkerRequests<number>();
  let started = false;
  let shuttingDown = false;
  let startup: { resolve: () => void; reject: (error: Error) => void } | null = null;
  let allExited: (() => void) | null = null;
  let exitCode = 0;

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
  const connected = () => slots.flatMap((slot) => (slot.worker?.isConnected() ? [slot.worker] : []));
  const servingCurrent = () =>
    slots.filter((slot) => slot.state === 'serving' && slot.seq === live.seq).length;

  // Workers take the young-generation cap even when the primary was started without it: they are
  // the ones serving requests (src/v8-launch-flags.ts).
  cluster.setupPrimary({ execArgv: withLaunchFlags(process.execArgv) });
  const fork = (slot: Slot) => {
    slot.restartTimer = null;
    slot.replacing = null;
    slot.state = 'starting';
    slot.worker = cluster.fork({ TOLLGATE_WORKER: String(slot.index) });
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
        // Started on a snapshot that has been replaced meanwhile: it gets the live one now.
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
      case 'cache-purged':
        return purgeRequests.answer(message.id, worker, message.count);
      case 'metrics':
        options.onMetrics(worker, message.snapshot);
        return metricsRequests.answer(message.id, worker, null);
    }
  };
  const onMessage = (worker: Worker, message: unknown) => {
    if (!isWorkerMessage(message)) return;
    const slot = slotOf(worker);
    if (slot !== undefined) handle(slot, worker, message);
  };

  const onExit = (worker: Worker, code: number | null, signal: string | null) => {
    const slot = slotOf(worker);
    if (slot === undefined) return;
    metricsRequests.forget(worker);
    purgeRequests.forget(worker);
    slot.worker = null;
    slot.state = 'down';
    if (shuttingDown) {
      options.onExit(worker, null);
      if (code !== 0) exitCode = 1;
      logger.info({ worker: worker.process.pid, code, signal }, 'worker exited');
      if (slots.every((other) => other.worker === null)) allExited?.();
      return;
    }
    if (!started) {
      options.onExit(worker, null);
      startup?.reject(
        new StartError(`tollgate: a worker exited during start (${signal ?? `exit code ${code}`})`),
      );
      return;
    }
    const reason = slot.replacing ?? 'crash';
    options.onExit(worker, reason);
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

  // Snapshots published in one task (a reload and the masterkey it carries) go out as one.
  let pending: ConfigSnapshot | null = null;
  const sendLive = () => {
    const next = pending;
    pending = null;
    if (next === null) return;
    live = toWorkerSnapshot(live.seq + 1, next);
    hash = next.table.hash;
    for (const slot of slots) {
      if (slot.state === 'serving') sendTo(slot.worker, { tollgate: 'config', config: live });
    }
  };

  return {
    slots: slots as readonly Slot[],
    /** The hash of the live snapshot's table. */
    hash: () => hash,
    servingCurrent,
    /** The hash every serving worker serves, or null while they disagree (a swap in progress). */
    liveHash(): string | null {
      const serving = slots.filter((slot) => slot.state === 'serving');
      return serving.length > 0 && serving.every((slot) => slot.seq === live.seq) ? hash : null;
    },
    servesLive: (slot: Slot) => slot.state === 'serving' && slot.seq === live.seq,
    /** The proxy listeners as the workers bound them (port 0 resolved once the first serves). */
    proxyAddresses: () => ({ proxy: workerMain.proxyAddressHttp, proxyTls: workerMain.proxyAddressTls }),
    /** Sends a new snapshot to every serving worker (a starting one asks for it when serving). */
    publish(snapshot: ConfigSnapshot) {
      if (pending === null) queueMicrotask(sendLive);
      pending = snapshot;
    },
    /** Starts every worker; resolves once all serve the live snapshot. */
    async start(): Promise<void> {
      cluster.on('message', onMessage);
      cluster.on('exit', onExit);
      await new Promise<void>((resolve, reject) => {
        startup = { resolve, reject };
        // With a port 0 to resolve, the others start once the first is serving (see 'serving').
        const main = options.main;
        const portsKnown =
          main.proxyAddressHttp.port !== 0 &&
          (main.proxyAddressTls === null || main.proxyAddressTls.port !== 0);
        for (const slot of portsKnown ? slots : slots.slice(0, 1)) fork(slot);
      }).finally(() => {
        startup = null;
      });
      started = true;
    },
    /** Collects every worker's metrics (each answer goes to onMetrics). */
    async collectMetrics(): Promise<void> {
      await metricsRequests.ask(connected(), (worker, id) =>
        sendTo(worker, { tollgate: 'metrics-request', id }),
      );
    },
    /** `DELETE /cache` in every worker (docs/traffic.md#response-cache). */
    async purgeCache(host: string, prefix: string): Promise<{ purged: number; missing?: number }> {
      const { answers, missing } = await purgeRequests.ask(connected(), (worker, id) =>
        sendTo(worker, { tollgate: 'cache-purge', id, host, prefix }),
      );
      const purged = answers.reduce((sum, count) => sum + count, 0);
      return missing === 0 ? { purged } : { purged, missing };
    },
    /** Every worker drains and exits (killed past the grace); resolves with 0 when all exited cleanly. */
    stop(): Promise<number> {
      shuttingDown = true;
      startup?.reject(new StartError('tollgate: stopped during start'));
      return new Promise<void>((resolve) => {
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
          (options.main.shutdownDelaySeconds + options.main.shutdownGraceSeconds) * 1000 + EXIT_MARGIN_MS,
        );
        allExited = () => {
          clearTimeout(deadline);
          resolve();
        };
        for (const slot of slots) sendTo(slot.worker, { tollgate: 'shutdown' });
      }).then(() => exitCode);
    },
    /** No more messages or exits are handled (after stop). */
    detach() {
      cluster.off('message', onMessage);
      cluster.off('exit', onExit);
    },
    /** Kills every worker at once (a second signal, a failed start). */
    kill() {
      for (const slot of slots) slot.worker?.process.kill('SIGKILL');
    },
  };
}

export type Cluster = ReturnType<typeof createCluster>;

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
