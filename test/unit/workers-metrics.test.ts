import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { createClusterMetrics } from '../../src/workers/metrics.ts';

/** One process's registry with the shapes Tollgate uses: a labelled counter, a histogram, gauges. */
function processRegistry() {
  const registry = new Registry();
  const requests = new Counter({
    name: 'tollgate_requests_total',
    help: 'h',
    labelNames: ['route'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'tollgate_request_duration_seconds',
    help: 'h',
    buckets: [0.1, 1],
    registers: [registry],
  });
  const up = new Gauge({
    name: 'tollgate_upstream_up',
    help: 'h',
    labelNames: ['server'] as const,
    aggregator: 'min',
    registers: [registry],
  });
  const info = new Gauge({
    name: 'tollgate_config_info',
    help: 'h',
    labelNames: ['hash'] as const,
    registers: [registry],
  });
  return { registry, requests, duration, up, info };
}

/** The value of one series in a text exposition, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('workers: one /metrics for the whole set', () => {
  it('sums counters and histograms over the primary and every worker; gauges use their aggregator', async () => {
    const primary = processRegistry();
    const a = processRegistry();
    const b = processRegistry();
    a.requests.inc({ route: 'r' }, 30);
    b.requests.inc({ route: 'r' }, 12);
    a.duration.observe(0.05);
    b.duration.observe(0.5);
    a.up.set({ server: 's' }, 1);
    b.up.set({ server: 's' }, 0);
    const metrics = createClusterMetrics();
    metrics.update(1, await a.registry.getMetricsAsJSON());
    metrics.update(2, await b.registry.getMetricsAsJSON());
    const text = await metrics.render(primary.registry, 'abc');
    assert.equal(sample(text, 'tollgate_requests_total{route="r"}'), 42);
    assert.equal(sample(text, 'tollgate_request_duration_seconds_count'), 2);
    assert.equal(sample(text, 'tollgate_request_duration_seconds_bucket{le="0.1"}'), 1);
    assert.equal(sample(text, 'tollgate_upstream_up{server="s"}'), 0, 'ejected by one worker: shown as 0');
  });

  it('a worker that is gone keeps its counted requests: the sum never goes down', async () => {
    const primary = processRegistry();
    const a = processRegistry();
    const b = processRegistry();
    const metrics = createClusterMetrics();
    a.requests.inc({ route: 'r' }, 30);
    b.requests.inc({ route: 'r' }, 12);
    b.up.set({ server: 's' }, 1);
    metrics.update(1, await a.registry.getMetricsAsJSON());
    metrics.update(2, await b.registry.getMetricsAsJSON());
    const before = await metrics.render(primary.registry, 'abc');
    assert.equal(sample(before, 'tollgate_requests_total{route="r"}'), 42);

    metrics.retire(2);
    const replacement = processRegistry();
    replacement.requests.inc({ route: 'r' }, 1);
    metrics.update(3, await replacement.registry.getMetricsAsJSON());
    const after = await metrics.render(primary.registry, 'abc');
    assert.equal(sample(after, 'tollgate_requests_total{route="r"}'), 43);
    assert.equal(
      sample(after, 'tollgate_upstream_up{server="s"}'),
      undefined,
      "a gone worker's gauges go with it",
    );

    // Retiring twice, or retiring a worker that never reported, changes nothing.
    metrics.retire(2);
    metrics.retire(99);
    metrics.retire(3);
    metrics.retire(1);
    const allGone = await metrics.render(primary.registry, 'abc');
    assert.equal(sample(allGone, 'tollgate_requests_total{route="r"}'), 43);
  });

  it('tollgate_config_info shows a hash only when every worker serves it, and only one', async () => {
    const primary = processRegistry();
    primary.info.set({ hash: 'validated-but-not-everywhere-yet' }, 1);
    const worker = processRegistry();
    const metrics = createClusterMetrics();
    metrics.update(1, await worker.registry.getMetricsAsJSON());
    const agreed = await metrics.render(primary.registry, 'live');
    assert.equal(sample(agreed, 'tollgate_config_info{hash="live"}'), 1);
    assert.equal(agreed.match(/^tollgate_config_info\{/gm)?.length, 1);
    const swapping = await metrics.render(primary.registry, null);
    assert.doesNotMatch(swapping, /^tollgate_config_info\{/m);
  });
});
