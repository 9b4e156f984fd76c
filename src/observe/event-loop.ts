import { type ELDHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import type { Metric, Registry } from 'prom-client';

/**
 * `tollgate_event_loop_delay_seconds` (docs/observability.md): how late the event loop ran its timers,
 * as a cumulative Prometheus histogram, so a stall (a long garbage collection, a synchronous job) is
 * visible to operators and survives the scrape interval: every sample lands in a bucket, none is
 * lost between scrapes, and with workers the primary sums the histograms of every process like any
 * other histogram (a stall in one worker shows in the high buckets of the sum).
 *
 * Source: perf_hooks.monitorEventLoopDelay, whose libuv timer fires every RESOLUTION_MS and records
 * the time since its previous firing. That interval minus RESOLUTION_MS is the delay. The monitor's
 * HDR histogram is folded into the buckets at each scrape (and then reset), from its percentile
 * steps: each step's samples are counted at the step's value, which rounds a sample up by at most the
 * HDR precision. Nothing runs per request or on a timer of ours.
 */

/** Sampling interval of the monitor: 100 samples a second; a stall shorter than this may go unseen. */
export const RESOLUTION_MS = 10;

/** Delay buckets, in seconds: from "nothing waiting" to a multi-second freeze. */
export const EVENT_LOOP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export const EVENT_LOOP_DELAY = 'tollgate_event_loop_delay_seconds';

interface Value {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

export interface EventLoopDelayMetric {
  /** Folds the samples taken since the last call into the buckets (done by every scrape). */
  fold(): void;
  /** Stops sampling (tests). */
  stop(): void;
}

/**
 * Starts sampling and registers the histogram in `registry`. `monitor` is injectable for tests;
 * it must sample every RESOLUTION_MS.
 */
export function registerEventLoopDelay(
  registry: Registry,
  monitor: ELDHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS }),
): EventLoopDelayMetric {
  monitor.enable();
  // Cumulative counts per bucket (the last one is +Inf), the sum and the count, since start.
  const counts = new Float64Array(EVENT_LOOP_BUCKETS.length + 1);
  let sum = 0;
  let total = 0;
  const resolutionNs = RESOLUTION_MS * 1e6;

  const add = (delaySeconds: number, samples: number) => {
    let bucket = 0;
    while (bucket < EVENT_LOOP_BUCKETS.length && delaySeconds > (EVENT_LOOP_BUCKETS[bucket] as number))
      bucket++;
    for (let index = bucket; index < counts.length; index++)
      counts[index] = (counts[index] as number) + samples;
    sum += delaySeconds * samples;
    total += samples;
  };

  const fold = () => {
    const recorded = monitor.count;
    if (recorded === 0) return;
    let assigned = 0;
    // Ascending percentiles; the samples between two steps are counted at the upper step's value.
    for (const [percentile, valueNs] of monitor.percentiles) {
      const upTo = Math.min(recorded, Math.round((recorded * percentile) / 100));
      if (upTo > assigned) {
        add(Math.max(0, valueNs - resolutionNs) / 1e9, upTo - assigned);
        assigned = upTo;
      }
    }
    if (assigned < recorded) add(Math.max(0, monitor.max - resolutionNs) / 1e9, recorded - assigned);
    monitor.reset();
  };

  const metric = {
    name: EVENT_LOOP_DELAY,
    help: `Event loop delay: how late a timer due every ${RESOLUTION_MS} ms ran, in seconds (perf_hooks.monitorEventLoopDelay).`,
    type: 'histogram',
    aggregator: 'sum',
    async get() {
      fold();
      const values: Value[] = EVENT_LOOP_BUCKETS.map((bound, index) => ({
        labels: { le: bound },
        value: counts[index] as number,
        metricName: `${EVENT_LOOP_DELAY}_bucket`,
      }));
      values.push(
        {
          labels: { le: '+Inf' },
          value: counts[EVENT_LOOP_BUCKETS.length] as number,
          metricName: `${EVENT_LOOP_DELAY}_bucket`,
        },
        { labels: {}, value: sum, metricName: `${EVENT_LOOP_DELAY}_sum` },
        { labels: {}, value: total, metricName: `${EVENT_LOOP_DELAY}_count` },
      );
      return { name: EVENT_LOOP_DELAY, help: metric.help, type: 'histogram', values, aggregator: 'sum' };
    },
    reset() {
      monitor.reset();
      counts.fill(0);
      sum = 0;
      total = 0;
    },
  };
  // prom-client's own metric classes are the usual members of a registry; any object with this
  // shape (name, help, type, get, reset) is rendered the same way.
  registry.registerMetric(metric as unknown as Metric);
  return { fold, stop: () => monitor.disable() };
}
