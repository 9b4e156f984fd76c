import { createControlPlane } from '../control-plane/control-plane.ts';
import type { TollgateConfig } from '../control-plane/prepare.ts';
import { createLifecycle, startOrRelease } from '../lifecycle.ts';
import { boundAddressesField } from '../listen.ts';
import { abandonLogs, type Logger } from '../log.ts';
import { rateLimitBackendUp, registerWorkerMetrics } from '../observe/metrics.ts';
import { serveClusterCounters } from '../pipeline/cluster-counters.ts';
import { type Cluster, createCluster } from './cluster.ts';
import { clusterAdminSources } from './cluster-admin.ts';
import { createClusterMetrics } from './metrics.ts';
import { DEFAULT_RESTART_POLICY, type RestartPolicy } from './restarts.ts';

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

/**
 * The primary of a set of workers (docs/workers.md): the control plane, whose snapshots go to every
 * worker, plus what must be one for the whole set: the admin port (readiness of all workers, their
 * summed metrics), the shared rate-limit counters (rate-limiter-flexible's cluster master), and the
 * workers' lives (workers/cluster.ts). Workers are data planes: they compile what they are sent.
 */
export function createPrimary(config: TollgateConfig, options: PrimaryOptions): Primary {
  const { main } = config;
  const workerMetrics = registerWorkerMetrics();
  // The gauge is the minimum over processes; the primary's memory store is always there, so its own
  // 1 leaves the workers' view of Redis (when configured) to decide.
  rateLimitBackendUp.set(1);
  const clusterMetrics = createClusterMetrics();
  // Counters of every worker's limiters live here, so a budget is one for the whole set.
  serveClusterCounters();
  // The admin port asks the cluster, which starts on the control plane's first snapshot.
  let workers: Cluster | null = null;
  const control = createControlPlane(config, {
    logger: options.logger,
    admin: (liveConfig) =>
      clusterAdminSources({ liveConfig, cluster: () => workers as Cluster, clusterMetrics, workerMetrics }),
  });
  const { logger } = control;
  const cluster = createCluster({
    workers: options.workers,
    policy: options.restartPolicy ?? DEFAULT_RESTART_POLICY,
    logger,
    // No masterkey source of the workers' own: the key comes with every snapshot.
    main: { ...main, masterkey: null, masterkeyFile: null },
    initial: control.snapshot(),
    onMetrics: (worker, snapshot) => clusterMetrics.update(worker.id, snapshot),
    onExit: (worker, reason) => {
      clusterMetrics.retire(worker.id);
      if (reason !== null) workerMetrics.restartsTotal.inc({ reason });
    },
  });
  workers = cluster;
  // Every snapshot (a reload, a ConfigMap, an endpoint change, a rotated masterkey) goes to the workers.
  control.onSnapshot(cluster.publish);
  const metricsPoll = setInterval(() => void cluster.collectMetrics(), options.metricsPollMs ?? 5_000);
  metricsPoll.unref();

  const lifecycle = createLifecycle({
    runtime: control.liveConfig,
    main,
    logger,
    servers: [control.tokenApiServer],
    cleanup: [...control.cleanup, () => clearInterval(metricsPoll)],
  });
  let closing: Promise<number> | null = null;
  const close = (reason = 'close') => {
    closing ??= (async () => {
      const [drained] = await Promise.all([cluster.stop(), lifecycle.shutdown(reason)]);
      cluster.detach();
      await new Promise<void>((resolve) => control.adminServer.close(() => resolve()));
      return drained;
    })();
    return closing;
  };

  return {
    async listen() {
      await startOrRelease(lifecycle, close, async () => {
        try {
          const { admin, api } = await control.listen();
          // Before the workers, so the first of them can start with endpoints already listed; the
          // workers' proxy ports are known once the first serves (port 0 until then).
          await control.startKubernetes(() => {
            const { proxy, proxyTls } = cluster.proxyAddresses();
            return [admin, api, proxy, ...(proxyTls ? [proxyTls] : [])];
          });
          await cluster.start();
          await control.watchSources();
          const addresses = boundAddressesField({ ...cluster.proxyAddresses(), api, admin });
          control.readyWhenSynced(addresses, () =>
            logger.info({ hash: cluster.hash(), workers: options.workers, addresses }, 'tollgate ready'),
          );
        } catch (error) {
          cluster.kill();
          throw error;
        }
      });
    },
    reload: (reason = 'manual') => control.reload(reason),
    close,
    kill() {
      cluster.kill();
      // Exiting at once: log lines stdout has not taken are given up, never waited for.
      abandonLogs(logger);
    },
  };
}
