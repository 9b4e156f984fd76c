import type { MainConfig } from '../config/types.ts';
import { createDataPlane, type DataPlane } from '../data-plane/data-plane.ts';
import { createLifecycle, startOrRelease } from '../lifecycle.ts';
import { boundAddressesField } from '../listen.ts';
import { createLogger, type Logger } from '../log.ts';
import { registry } from '../observe/metrics.ts';
import {
  isPrimaryMessage,
  type PrimaryMessage,
  type WorkerMessage,
  type WorkerPorts,
  type WorkerSnapshot,
} from './messages.ts';
import { fromWorkerSnapshot } from './snapshots.ts';

/** How the workers share the proxy port: each binds it with SO_REUSEPORT, or the cluster module. */
export type ConnectionSpreading = 'reuseport' | 'cluster';

/**
 * The kernel spreads connections over the workers' own sockets (docs/workers.md explains the choice);
 * TOLLGATE_WORKER_SPREAD=cluster selects the cluster module's round-robin through the primary,
 * which the benchmark measures against it, and is the only way where Node offers no reusePort.
 */
export function connectionSpreading(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): ConnectionSpreading {
  return env.TOLLGATE_WORKER_SPREAD === 'cluster' || platform !== 'linux' ? 'cluster' : 'reuseport';
}

function send(message: WorkerMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.connected || process.send === undefined) return resolve();
    process.send(message, undefined, {}, () => resolve());
  });
}

function nextMessage<T extends PrimaryMessage['tollgate']>(
  kind: T,
): Promise<Extract<PrimaryMessage, { tollgate: T }>> {
  return new Promise((resolve) => {
    const onMessage = (message: unknown) => {
      if (!isPrimaryMessage(message) || message.tollgate !== kind) return;
      process.off('message', onMessage);
      resolve(message as Extract<PrimaryMessage, { tollgate: T }>);
    };
    process.on('message', onMessage);
  });
}

/**
 * One worker process (docs/workers.md): a data plane alone. It reads no config file and asks no
 * API: the primary sends main.yaml's settings, then each snapshot (upstreams, masterkey, Service
 * endpoints, certificates); the worker compiles it, applies it and says so, serves the proxy
 * listener(s), and answers the primary's requests for its metrics. It watches only what its own
 * requests read (TLS certificate, revoked tokens). Resolves with the exit code.
 */
export async function runWorker(): Promise<number> {
  // Metrics requests can come before the start message is handled; answer them from the first moment.
  process.on('message', (message: unknown) => {
    if (isPrimaryMessage(message) && message.tollgate === 'metrics-request') void reportMetrics(message.id);
  });
  const starting = nextMessage('start');
  await send({ tollgate: 'hello' });
  const start = await starting;
  const logger: Logger = createLogger(start.main.logLevel).child({ worker: process.pid });
  let served: { data: DataPlane; close: (reason: string) => Promise<void>; ports: WorkerPorts };
  try {
    served = await serve(start.main, start.config, logger);
  } catch (error) {
    const reason = (error as Error).message;
    await send({
      tollgate: 'start-failed',
      error: reason.startsWith('tollgate: ') ? reason : `tollgate: ${reason}`,
    });
    return 1;
  }
  const { data, close, ports } = served;
  await send({ tollgate: 'serving', seq: start.config.seq, hash: data.runtime.table().hash, ports });

  process.on('message', (message: unknown) => {
    if (!isPrimaryMessage(message) || message.tollgate !== 'cache-purge') return;
    const count = data.purgeCache(message.host, message.prefix);
    void send({ tollgate: 'cache-purged', id: message.id, count });
  });
  process.on('message', (message: unknown) => {
    if (!isPrimaryMessage(message) || message.tollgate !== 'config') return;
    const { seq, upstreams } = message.config;
    try {
      data.applySnapshot(fromWorkerSnapshot(message.config));
      void send({ tollgate: 'serving', seq, hash: data.runtime.table().hash, ports });
    } catch (error) {
      logger.error({ err: (error as Error).message, hash: upstreams.hash }, 'cannot apply the new config');
      void send({ tollgate: 'config-failed', seq, error: (error as Error).message });
    }
  });

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (reason: string) => {
      if (stopping) return;
      stopping = true;
      await send({ tollgate: 'draining' });
      await close(reason);
      // The last word: what this worker counted since the primary last asked, so no count is lost.
      await reportMetrics(-1);
      resolve(0);
    };
    process.on('message', (message: unknown) => {
      if (isPrimaryMessage(message) && message.tollgate === 'shutdown') void stop('primary shutdown');
    });
    // The primary relays SIGTERM; a SIGTERM sent to the worker alone drains it the same way.
    process.on('SIGTERM', () => void stop('SIGTERM'));
    // Ctrl-C in a terminal signals the whole process group: the primary decides, the worker waits.
    process.on('SIGINT', () => {});
    // The primary is gone (killed): nothing will route, count or reload for this worker any more.
    process.on('disconnect', () => void stop('primary gone'));
  });
}

/**
 * The worker's data plane, from the start snapshot to serving: bound (SO_REUSEPORT unless the
 * cluster module spreads connections), its own files watched, readiness on.
 */
async function serve(main: MainConfig, first: WorkerSnapshot, logger: Logger) {
  const data = createDataPlane(main, {
    logger,
    initial: fromWorkerSnapshot(first),
    worker: { reusePort: connectionSpreading() === 'reuseport' },
  });
  const lifecycle = createLifecycle({
    runtime: data.runtime,
    main,
    logger,
    servers: data.drainable,
    cleanup: data.cleanup,
  });
  let closing: Promise<void> | null = null;
  const close = (reason: string) => {
    closing ??= lifecycle.shutdown(reason);
    return closing;
  };
  const bound = await startOrRelease(lifecycle, close, async () => {
    await data.ready();
    const listening = await data.listen();
    await data.watchFiles();
    return listening;
  });
  data.runtime.phase = 'ready';
  const table = data.runtime.table();
  // The primary says 'tollgate ready' for the whole set, once every worker serves; it answers the
  // admin and token API ports, reported as configured.
  const addresses = boundAddressesField({ ...bound, api: main.configAddress, admin: main.adminAddress });
  logger.info({ hash: table.hash, routes: table.routes.length, addresses }, 'worker serving');
  return { data, close, ports: { proxy: bound.proxy.port, proxyTls: bound.proxyTls?.port ?? null } };
}

async function reportMetrics(id: number): Promise<void> {
  await send({ tollgate: 'metrics', id, snapshot: await registry.getMetricsAsJSON() });
}
