import type { AdminSources, Readiness } from '../admin/server.ts';
import type { LiveConfig } from '../control-plane/live-config.ts';
import { type registerWorkerMetrics, registry } from '../observe/metrics.ts';
import { reloadRecords } from '../observe/reload-journal.ts';
import { buildStatus } from '../observe/status.ts';
import type { Cluster } from './cluster.ts';
import type { ClusterMetrics } from './metrics.ts';

/**
 * What the primary's admin port reports (docs/workers.md): readiness of every worker on the live
 * snapshot, /metrics summed over every process (each scrape asks every worker first), /status with
 * what the primary knows of each worker, and `DELETE /cache` in every worker.
 */
export function clusterAdminSources(deps: {
  liveConfig: LiveConfig;
  cluster: () => Cluster;
  clusterMetrics: ClusterMetrics;
  workerMetrics: ReturnType<typeof registerWorkerMetrics>;
}): AdminSources {
  const { liveConfig, clusterMetrics, workerMetrics } = deps;
  const collect = async (cluster: Cluster) => {
    await cluster.collectMetrics();
    workerMetrics.serving.set(cluster.servingCurrent());
  };
  return {
    readiness(): Readiness {
      const cluster = deps.cluster();
      const now = performance.now();
      const serving = cluster.servingCurrent();
      const counts = { workers: cluster.slots.length, workers_serving: serving };
      if (liveConfig.phase !== 'ready')
        return { ready: false, body: { status: liveConfig.phase, ...counts } };
      if (cluster.slots.some((slot) => slot.history.crashLooping(now)))
        return { ready: false, body: { status: 'crash_loop', ...counts } };
      if (serving < cluster.slots.length)
        return { ready: false, body: { status: 'workers_not_serving', ...counts } };
      return { ready: true, body: { status: 'ready', config_hash: cluster.hash(), ...counts } };
    },
    async metrics() {
      const cluster = deps.cluster();
      await collect(cluster);
      return clusterMetrics.render(registry, cluster.liveHash());
    },
    // The primary's table and reloads, the workers' numbers as summed for /metrics, and what the
    // primary knows of each worker from their messages.
    async status() {
      const cluster = deps.cluster();
      await collect(cluster);
      return buildStatus({
        now: Date.now(),
        phase: liveConfig.phase,
        table: liveConfig.table(),
        metrics: await clusterMetrics.snapshot(registry, cluster.liveHash()),
        reloads: reloadRecords(),
        workers: {
          configured: cluster.slots.length,
          serving: cluster.servingCurrent(),
          list: cluster.slots.map((slot) => ({
            index: slot.index,
            pid: slot.worker?.process.pid ?? null,
            state: slot.state,
            serves_live_config: cluster.servesLive(slot),
          })),
        },
      });
    },
    purgeCache: (host, prefix) => deps.cluster().purgeCache(host, prefix),
  };
}
