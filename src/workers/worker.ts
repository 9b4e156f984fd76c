import { createTollgate, type Tollgate } from '../app.ts';
import { createLogger, type Logger } from '../log.ts';
import { registry } from '../observe/metrics.ts';
import { isPrimaryMessage, type PrimaryMessage, type WorkerMessage, type WorkerPorts } from './messages.ts';

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
 * One worker process (docs/workers.md): it reads no config file and asks no API. The primary sends
 * main.yaml's settings, then each validated config (upstreams, masterkey, Service endpoints); the
 * worker compiles it, swaps and says so, serves the proxy listener(s), and answers the primary's
 * requests for its metrics. It watches only what its own requests read (TLS certificate, revoked
 * tokens). Resolves with the exit code.
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
  let tollgate: Tollgate;
  let ports: WorkerPorts;
  try {
    tollgate = createTollgate(
      { main: start.main, upstreams: start.config.upstreams },
      { logger, watch: false, worker: { reusePort: connectionSpreading() === 'reuseport' } },
    );
    tollgate.applyConfig(start.config);
    const bound = await tollgate.listen();
    ports = { proxy: bound.proxy.port, proxyTls: bound.proxyTls?.port ?? null };
  } catch (error) {
    const reason = (error as Error).message;
    await send({
      tollgate: 'start-failed',
      error: reason.startsWith('tollgate: ') ? reason : `tollgate: ${reason}`,
    });
    return 1;
  }
  await send({ tollgate: 'serving', seq: start.config.seq, hash: tollgate.runtime.table().hash, ports });

  process.on('message', (message: unknown) => {
    if (!isPrimaryMessage(message) || message.tollgate !== 'cache-purge') return;
    const count = tollgate.purgeCache(message.host, message.prefix);
    void send({ tollgate: 'cache-purged', id: message.id, count });
  });
  process.on('message', (message: unknown) => {
    if (!isPrimaryMessage(message) || message.tollgate !== 'config') return;
    const { seq, upstreams } = message.config;
    try {
      const hash = tollgate.applyConfig(message.config);
      void send({ tollgate: 'serving', seq, hash, ports });
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
      await tollgate.close(reason);
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

async function reportMetrics(id: number): Promise<void> {
  await send({ tollgate: 'metrics', id, snapshot: await registry.getMetricsAsJSON() });
}
