import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { RequestCounter, RouteHistogram } from '../../src/observe/route-metrics.ts';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The same families made with prom-client's own classes: the reference output. */
function reference() {
  const registry = new Registry();
  const counter = new Counter({
    name: 'tollgate_requests_total',
    help: 'h',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const histogram = new Histogram({
    name: 'tollgate_request_duration_seconds',
    help: 'h',
    labelNames: ['route'] as const,
    buckets: BUCKETS,
    registers: [registry],
  });
  return { registry, counter, histogram };
}

function fast() {
  const registry = new Registry();
  const counter = new RequestCounter({ name: 'tollgate_requests_total', help: 'h', registry });
  const histogram = new RouteHistogram({
    name: 'tollgate_request_duration_seconds',
    help: 'h',
    buckets: BUCKETS,
    registry,
  });
  return { registry, counter, histogram };
}

/** Text exposition lines, sorted, so series order does not matter. */
async function lines(registry: Registry): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter(Boolean).sort();
}

describe('allocation-free request metrics', () => {
  // Durations on, between and beyond bucket bounds; routes, methods and statuses mixed.
  const observations: Array<[string, string, number, number]> = [];
  const routes = ['a.example/', 'a.example/v1', '(none)', 'DEFAULT/'];
  const methods = ['GET', 'POST', 'DELETE'];
  const statuses = [200, 404, 503, 101];
  const durations = [0, 0.0005, 0.001, 0.0011, 0.05, 0.3, 1, 29.9, 30, 31, 120];
  for (let index = 0; index < 500; index += 1) {
    observations.push([
      routes[index % routes.length] as string,
      methods[(index * 7) % methods.length] as string,
      statuses[(index * 3) % statuses.length] as number,
      durations[(index * 5) % durations.length] as number,
    ]);
  }

  it('renders exactly what prom-client renders for the same requests', async () => {
    const slow = reference();
    const quick = fast();
    for (const [route, method, status, seconds] of observations) {
      slow.counter.inc({ route, method, status });
      slow.histogram.observe({ route }, seconds);
      quick.counter.count(route, method, status);
      quick.histogram.record(route, seconds);
    }
    assert.deepEqual(await lines(quick.registry), await lines(slow.registry));
  });

  it('keeps prom-client call forms, and sums like prom-client across workers', async () => {
    const workers = [fast(), fast()];
    const references = [reference(), reference()];
    observations.forEach(([route, method, status, seconds], index) => {
      const worker = workers[index % 2] as ReturnType<typeof fast>;
      worker.counter.inc({ route, method, status: String(status) });
      worker.histogram.observe({ route }, seconds);
      const other = references[index % 2] as ReturnType<typeof reference>;
      other.counter.inc({ route, method, status });
      other.histogram.observe({ route }, seconds);
    });
    const sum = async (registries: Registry[]) =>
      (
        await AggregatorRegistry.aggregate(
          await Promise.all(registries.map((r) => r.getMetricsAsJSON())),
        ).metrics()
      )
        .split('\n')
        .filter(Boolean)
        .sort();
    assert.deepEqual(
      await sum(workers.map((worker) => worker.registry)),
      await sum(references.map((ref) => ref.registry)),
    );
  });

  it('starts from zero after reset', async () => {
    const quick = fast();
    quick.counter.count('a/', 'GET', 200);
    quick.histogram.record('a/', 0.1);
    quick.registry.resetMetrics();
    const text = await quick.registry.metrics();
    assert.doesNotMatch(text, /route="a\/"/);
  });
});
