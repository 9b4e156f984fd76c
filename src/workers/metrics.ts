import { AggregatorRegistry, type Registry } from 'prom-client';
import type { MetricsSnapshot } from './messages.ts';

/** The one metric the primary writes itself from what the workers report (see render). */
const CONFIG_INFO = 'tollgate_config_info';

/** Metric types whose values only grow: a gone worker's last values stay in the sums. */
const CUMULATIVE_TYPES = new Set(['counter', 'histogram']);

const isCumulative = (metric: MetricsSnapshot[number]) =>
  CUMULATIVE_TYPES.has(String(metric.type)) && (metric.aggregator ?? 'sum') === 'sum';

export interface ClusterMetrics {
  /** The latest snapshot of a live worker (replaces its previous one). */
  update(workerId: number, snapshot: MetricsSnapshot): void;
  /**
   * A worker is gone. Its counters and histograms, as last reported, are kept for good, so a sum
   * over workers never goes down when one is replaced; its gauges go with it.
   */
  retire(workerId: number): void;
  /**
   * The text exposition of the whole set: the primary's own registry, every live worker's latest
   * snapshot and everything retired, summed by prom-client's cluster aggregation (each metric's
   * `aggregator`, `sum` unless declared otherwise). `liveHash` is the config every worker serves, or
   * null while they disagree: only then does tollgate_config_info show a hash.
   */
  render(own: Registry, liveHash: string | null): Promise<string>;
  /** The same sums as render, as metric objects (what /status reads, observe/status). */
  snapshot(own: Registry, liveHash: string | null): Promise<MetricsSnapshot>;
}

/**
 * The primary's view of the workers' metrics (docs/workers.md, docs/observability.md). prom-client's
 * `clusterMetrics()` only sums the workers alive at scrape time, so a counter would drop by a dead
 * worker's share and jump back as a rate() spike; keeping each worker's last snapshot, and folding
 * the cumulative part of a gone one into `retired`, keeps every counter monotonic. What a worker
 * counted after its last report and before a SIGKILL is lost: the primary asks for reports on every
 * scrape and on a short timer to keep that small, and a worker that exits cleanly reports last.
 */
export function createClusterMetrics(): ClusterMetrics {
  const live = new Map<number, MetricsSnapshot>();
  let retired: MetricsSnapshot = [];

  return {
    update(workerId, snapshot) {
      live.set(workerId, snapshot);
    },
    retire(workerId) {
      const last = live.get(workerId);
      live.delete(workerId);
      if (last === undefined) return;
      const cumulative = last.filter(isCumulative);
      retired = toSnapshot(AggregatorRegistry.aggregate([retired, cumulative]));
    },
    render: async (own, liveHash) => (await aggregate(own, liveHash)).metrics(),
    snapshot: async (own, liveHash) => (await aggregate(own, liveHash)).getMetricsAsJSON(),
  };

  async function aggregate(own: Registry, liveHash: string | null): Promise<Registry> {
    const snapshots = [await own.getMetricsAsJSON(), ...live.values(), retired].map((snapshot) =>
      snapshot.filter((metric) => metric.name !== CONFIG_INFO),
    );
    const configInfo = (await own.getMetricsAsJSON()).find((metric) => metric.name === CONFIG_INFO);
    if (configInfo !== undefined) {
      // Exactly one hash series, and only one every worker serves (docs/reload.md).
      const values = liveHash === null ? [] : [{ value: 1, labels: { hash: liveHash } }];
      snapshots.push([{ ...configInfo, values }]);
    }
    return AggregatorRegistry.aggregate(snapshots);
  }
}

/**
 * A registry made by AggregatorRegistry.aggregate holds plain metric objects (`get()` returns the
 * values), so its snapshot is available synchronously; reading it this way keeps retire() synchronous,
 * which matters because it runs in the worker 'exit' handler before the replacement is forked.
 */
function toSnapshot(registry: Registry): MetricsSnapshot {
  return registry.getMetricsAsArray().map((metric) => {
    const value = (metric as unknown as { get(): MetricsSnapshot[number] }).get();
    return value;
  });
}
