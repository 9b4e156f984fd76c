import type { Metric, Registry } from 'prom-client';

/**
 * The two per-request metric families (tollgate_requests_total and tollgate_request_duration_seconds,
 * docs/observability.md), recorded without allocating. prom-client's Counter.inc and
 * Histogram.observe build a hash string from the label object and a closure on every call; on the
 * request path that was a measurable share of Tollgate's own CPU and garbage per request
 * (docs/benchmark.md). Here the series of a route are found through Maps keyed by the route's id
 * string (the same string object on every request, so its hash is computed once), the method and
 * the status code, and counted in plain numbers; the text exposition is built only when scraped.
 *
 * Both objects are registered in prom-client's Registry like its own metrics (same output, same
 * `sum` aggregation across workers) and keep the label-object call forms of prom-client
 * (`inc({ route, method, status })`, `observe({ route }, seconds)`) for callers off the hot path.
 */

interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

interface MetricData {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  values: Sample[];
  aggregator: 'sum';
}

function register(
  registry: Registry,
  metric: { name: string; get(): Promise<MetricData>; reset(): void },
): void {
  // prom-client renders any registered object with name, help, type and get(): these need no more.
  registry.registerMetric(metric as unknown as Metric);
}

/** tollgate_requests_total{route, method, status}. */
export class RequestCounter {
  readonly name: string;
  readonly help: string;
  /** route → method → status → count */
  readonly #counts = new Map<string, Map<string, Map<number, number>>>();

  constructor(options: { name: string; help: string; registry: Registry }) {
    this.name = options.name;
    this.help = options.help;
    register(options.registry, this);
  }

  /** One request of `route` answered `status`. */
  count(route: string, method: string, status: number, value = 1): void {
    let byMethod = this.#counts.get(route);
    if (byMethod === undefined) {
      byMethod = new Map();
      this.#counts.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    byStatus.set(status, (byStatus.get(status) ?? 0) + value);
  }

  /** prom-client's call form. */
  inc(labels: { route: string; method: string; status: number | string }, value = 1): void {
    this.count(labels.route, labels.method, Number(labels.status), value);
  }

  async get(): Promise<MetricData> {
    const values: Sample[] = [];
    for (const [route, byMethod] of this.#counts) {
      for (const [method, byStatus] of byMethod) {
        for (const [status, value] of byStatus) values.push({ labels: { route, method, status }, value });
      }
    }
    return { name: this.name, help: this.help, type: 'counter', values, aggregator: 'sum' };
  }

  reset(): void {
    this.#counts.clear();
  }
}

/** One route's histogram: cumulative bucket counts are made at scrape time from these. */
interface Series {
  /** Per bucket (the last one is +Inf), samples that fell in it: not cumulative. */
  readonly perBucket: Float64Array;
  sum: number;
  count: number;
}

/** tollgate_request_duration_seconds{route}. */
export class RouteHistogram {
  readonly name: string;
  readonly help: string;
  readonly #buckets: readonly number[];
  readonly #series = new Map<string, Series>();

  constructor(options: { name: string; help: string; buckets: readonly number[]; registry: Registry }) {
    this.name = options.name;
    this.help = options.help;
    this.#buckets = Object.freeze([...options.buckets].sort((a, b) => a - b));
    register(options.registry, this);
  }

  /** One request of `route` took `seconds`. */
  record(route: string, seconds: number): void {
    let series = this.#series.get(route);
    if (series === undefined) {
      series = { perBucket: new Float64Array(this.#buckets.length + 1), sum: 0, count: 0 };
      this.#series.set(route, series);
    }
    const buckets = this.#buckets;
    let index = 0;
    while (index < buckets.length && seconds > (buckets[index] as number)) index++;
    series.perBucket[index] = (series.perBucket[index] as number) + 1;
    series.sum += seconds;
    series.count += 1;
  }

  /** prom-client's call form. */
  observe(labels: { route: string }, seconds: number): void {
    this.record(labels.route, seconds);
  }

  async get(): Promise<MetricData> {
    const values: Sample[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const [route, series] of this.#series) {
      let cumulative = 0;
      for (let index = 0; index < series.perBucket.length; index++) {
        cumulative += series.perBucket[index] as number;
        const le = index < this.#buckets.length ? (this.#buckets[index] as number) : '+Inf';
        values.push({ labels: { le, route }, value: cumulative, metricName: bucketName });
      }
      values.push({ labels: { route }, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { route }, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }

  reset(): void {
    this.#series.clear();
  }
}
