/**
 * `npm run bench -- scale`: the Kubernetes control plane at N objects (docs/benchmark.md, "Control
 * plane at scale"). For each N, the test suite's fake API server (test/helpers/fake-kube-api.ts) is
 * filled with N Ingresses (two paths each) and N HTTPRoutes, each with its own Service and a
 * two-endpoint EndpointSlice, and the built proxy is started as a process with `ingress_class` and
 * `gateway_class` set. Measured:
 *
 * - start → ready: from the spawn to `/readyz` 200, then → routable (the last Ingress and the last
 *   HTTPRoute answer), and the RSS once routable;
 * - edit visible: an Ingress path (and an HTTPRoute path, alternately) renamed, time until the proxy
 *   serves the new path (polled back to back), p50 / p95;
 * - EndpointSlice change visible: a Service's slice pointed at another endpoint, time until the
 *   proxy answers from it, p50;
 * - CPU per change: the proxy's CPU time (its threads' scheduler run time, /proc/…/schedstat) for
 *   each of K edits, from the write until the edit is served and the process is quiet again, less
 *   its idle CPU over that time and the cost of the polling requests; mean and median.
 *
 * Settings (flag or env): --n / BENCH_SCALE_N (list, default "125,500"), --edits /
 * BENCH_SCALE_EDITS (20), --ready-timeout / BENCH_SCALE_READY_TIMEOUT_S (120: an N not ready then
 * is reported as such and the run goes on), BENCH_SCALE_LOG_DIR (keep each N's log there),
 * BENCH_SCALE_NODE_FLAGS (extra Node flags for the proxy, e.g. `--cpu-prof`). Every process it
 * starts is ended by PID at the end.
 */
import { once } from 'node:events';
import { createWriteStream, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { V8_LAUNCH_FLAGS } from '../src/v8-launch-flags.ts';
import {
  gatewayClassObject,
  gatewayObject,
  httpRouteObject,
  namespaceObject,
} from '../test/helpers/fake-gateway-api.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  ingress,
  ingressClass,
  service,
  startFakeKubeApi,
} from '../test/helpers/fake-kube-api.ts';
import { startThreadCpuMeter } from './cpu.ts';
import { freePort, makeTempDir, type Started, startProcess, stopProcess } from './processes.ts';
import { MAIN_JS } from './tollgate.ts';

const NS = 'apps';
/** The addresses the upstream listens on: two endpoints per slice, a third one for slice changes. */
const ENDPOINT_IPS = ['127.0.0.1', '127.0.0.2', '127.0.0.3'] as const;

interface ScaleSettings {
  sizes: number[];
  edits: number;
  readyTimeoutS: number;
}

export interface ScaleResult {
  n: number;
  objects: number;
  readyS: number | null;
  routableS: number | null;
  rssMiB: number | null;
  editP50Ms: number | null;
  editP95Ms: number | null;
  sliceP50Ms: number | null;
  cpuPerChangeMs: number | null;
  /** The median of the edits' CPU (the mean is cpuPerChangeMs). */
  cpuPerChangeP50Ms: number | null;
  logBytesAtReady: number | null;
  note: string;
}

function readSettings(args: string[]): ScaleSettings {
  const { values } = parseArgs({
    args,
    options: { n: { type: 'string' }, edits: { type: 'string' }, 'ready-timeout': { type: 'string' } },
  });
  const list = (values.n ?? process.env.BENCH_SCALE_N ?? '125,500').split(',').map((item) => {
    const value = Number(item.trim());
    if (!Number.isInteger(value) || value < 1) throw new Error(`BENCH_SCALE_N: not a whole number: ${item}`);
    return value;
  });
  const whole = (raw: string | undefined, name: string, fallback: number) => {
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a whole number, got ${raw}`);
    return value;
  };
  return {
    sizes: list,
    edits: whole(values.edits ?? process.env.BENCH_SCALE_EDITS, 'BENCH_SCALE_EDITS', 20),
    readyTimeoutS: whole(
      values['ready-timeout'] ?? process.env.BENCH_SCALE_READY_TIMEOUT_S,
      'BENCH_SCALE_READY_TIMEOUT_S',
      120,
    ),
  };
}

/** One small answer per endpoint address, naming it: which endpoint served a request is visible. */
async function startEndpoints(): Promise<{ port: number; close(): Promise<void> }> {
  const servers: http.Server[] = [];
  let port = 0;
  for (const ip of ENDPOINT_IPS) {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(ip);
    });
    server.keepAliveTimeout = 60_000;
    server.listen(port, ip);
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
    servers.push(server);
  }
  return {
    port,
    close: async () => {
      for (const server of servers) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    },
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

function get(port: number, host: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host }, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.setTimeout(5000, () => req.destroy(new Error(`no answer for ${host}${path}`)));
    req.on('error', reject);
    req.end();
  });
}

const ingressName = (i: number) => `ing-${i}`;
const routeName = (i: number) => `route-${i}`;
const ingressHost = (i: number) => `ing-${i}.bench`;
const routeHost = (i: number) => `route-${i}.bench`;

function serviceWithSlice(api: FakeKubeApi, name: string, port: number, ips: readonly string[]): void {
  api.apply(service({ name, namespace: NS, ports: [{ name: 'http', port: 80, targetPort: port }] }));
  setSlice(api, name, port, ips);
}

function setSlice(api: FakeKubeApi, name: string, port: number, ips: readonly string[]): void {
  api.apply(
    endpointSlice({
      service: name,
      namespace: NS,
      ports: [{ name: 'http', port }],
      endpoints: ips.map((ip) => ({ ip })),
    }),
  );
}

function applyIngress(api: FakeKubeApi, i: number, second = '/b'): void {
  const backend = `isvc-${i}`;
  api.apply(
    ingress({
      name: ingressName(i),
      namespace: NS,
      rules: [
        {
          host: ingressHost(i),
          paths: [
            { path: '/a', service: backend, port: 80 },
            { path: second, service: backend, port: 80 },
          ],
        },
      ],
    }),
  );
}

function applyRoute(api: FakeKubeApi, i: number, path = '/r'): void {
  api.applyRaw(
    httpRouteObject({
      name: routeName(i),
      namespace: NS,
      parentRefs: [{ name: 'gw', namespace: NS }],
      hostnames: [routeHost(i)],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: path } }],
          backendRefs: [{ name: `rsvc-${i}`, port: 80 }],
        },
      ],
    }),
  );
}

function fill(api: FakeKubeApi, n: number, port: number): number {
  api.applyRaw(namespaceObject(NS));
  api.applyRaw(gatewayClassObject());
  api.apply(ingressClass());
  api.applyRaw(
    gatewayObject({
      name: 'gw',
      namespace: NS,
      listeners: [
        { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'Same' } } },
      ],
    }),
  );
  const two = ENDPOINT_IPS.slice(0, 2);
  for (let i = 0; i < n; i++) {
    serviceWithSlice(api, `isvc-${i}`, port, two);
    applyIngress(api, i);
    serviceWithSlice(api, `rsvc-${i}`, port, two);
    applyRoute(api, i);
  }
  return 4 + 6 * n;
}

function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((item) => item.startsWith('VmRSS:'));
  return Number(line?.replace(/\D+/g, '') ?? 0) / 1024;
}

const percentile = (values: readonly number[], p: number): number | null => {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? null;
};

/** Polls until `served` holds; returns the polls made. Throws after `limitMs`. */
async function pollUntil(
  check: () => Promise<boolean>,
  limitMs: number,
  what: string,
  pauseMs = 0,
): Promise<number> {
  const deadline = Date.now() + limitMs;
  let polls = 0;
  for (;;) {
    polls += 1;
    try {
      if (await check()) return polls;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`${what}: not served within ${limitMs} ms`);
    await new Promise((resolve) => (pauseMs > 0 ? setTimeout(resolve, pauseMs) : setImmediate(resolve)));
  }
}

async function measureSize(n: number, settings: ScaleSettings): Promise<ScaleResult> {
  const result: ScaleResult = {
    n,
    objects: 0,
    readyS: null,
    routableS: null,
    rssMiB: null,
    editP50Ms: null,
    editP95Ms: null,
    sliceP50Ms: null,
    cpuPerChangeMs: null,
    cpuPerChangeP50Ms: null,
    logBytesAtReady: null,
    note: '',
  };
  const endpoints = await startEndpoints();
  const api = await startFakeKubeApi();
  let started: Started | null = null;
  try {
    result.objects = fill(api, n, endpoints.port);
    const dir = makeTempDir('tollgate-bench-scale-');
    const [proxyPort, apiPort, adminPort] = [await freePort(), await freePort(), await freePort()];
    const main = [
      `proxy_address_http: 127.0.0.1:${proxyPort}`,
      `config_address: 127.0.0.1:${apiPort}`,
      `admin_address: 127.0.0.1:${adminPort}`,
      `upstreams_conf: ${join(dir, 'upstreams.yaml')}`,
      'access_log: false',
      'shutdown_delay_seconds: 0',
      'kubernetes:',
      `  kubeconfig: ${api.writeKubeconfig(dir, NS)}`,
      '  ingress_class: tollgate',
      '  gateway_class: tollgate',
      '  publish_address: [203.0.113.9]',
    ];
    writeFileSync(join(dir, 'main.yaml'), `${main.join('\n')}\n`);
    writeFileSync(
      join(dir, 'upstreams.yaml'),
      `upstreams:\n  file.bench:\n    paths:\n      "/":\n        servers: ["127.0.0.1:${endpoints.port}"]\n`,
    );
    // BENCH_SCALE_LOG_DIR keeps each N's log (the temp dir is removed at the end).
    const logDir = process.env.BENCH_SCALE_LOG_DIR;
    const log = createWriteStream(join(logDir || dir, `tollgate-${n}.log`));
    let logBytes = 0;
    const t0 = performance.now();
    started = startProcess(
      `tollgate (N=${n})`,
      process.execPath,
      [
        ...V8_LAUNCH_FLAGS,
        // e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to see where the control plane's time goes.
        ...(process.env.BENCH_SCALE_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== ''),
        MAIN_JS,
        'start',
        '--config',
        join(dir, 'main.yaml'),
      ],
      { ...process.env, KUBECONFIG: '', TOLLGATE_CONFIG: '' },
    );
    const proxy = started;
    proxy.child.stdout?.on('data', (chunk: Buffer) => {
      logBytes += chunk.byteLength;
      log.write(chunk);
    });
    const pid = proxy.child.pid as number;
    let exited = false;
    void proxy.exited.then(() => {
      exited = true;
    });
    const limitMs = settings.readyTimeoutS * 1000;
    try {
      await pollUntil(
        async () => {
          if (exited) throw new Error(`exited:\n${proxy.output()}`);
          return (await get(adminPort, 'admin', '/readyz')).status === 200;
        },
        limitMs,
        'readiness',
        25,
      );
    } catch (error) {
      if (exited) throw new Error(`tollgate exited before it was ready:\n${proxy.output()}`);
      result.note = `not ready after ${settings.readyTimeoutS} s (${(error as Error).message})`;
      return result;
    }
    result.readyS = (performance.now() - t0) / 1000;
    result.logBytesAtReady = logBytes;
    process.stdout.write(`N=${n}: ready after ${result.readyS.toFixed(1)} s\n`);
    await pollUntil(
      async () =>
        (await get(proxyPort, ingressHost(n - 1), '/a')).status === 200 &&
        (await get(proxyPort, routeHost(n - 1), '/r')).status === 200,
      limitMs,
      'the last Ingress and HTTPRoute',
      25,
    );
    result.routableS = (performance.now() - t0) / 1000;
    result.rssMiB = rssMiB(pid);
    // Let status writes and the first round of work end before timing changes.
    await quiet(pid);

    // Edits, alternately an Ingress and an HTTPRoute, each on another object, polled back to back.
    const editTimes: number[] = [];
    for (let k = 0; k < settings.edits; k++) {
      const i = (k * 7919) % n;
      const path = `/e${k}`;
      const t = performance.now();
      if (k % 2 === 0) applyIngress(api, i, path);
      else applyRoute(api, i, path);
      const host = k % 2 === 0 ? ingressHost(i) : routeHost(i);
      await pollUntil(
        async () => (await get(proxyPort, host, path)).status === 200,
        10_000,
        `${host}${path}`,
      );
      editTimes.push(performance.now() - t);
    }
    result.editP50Ms = percentile(editTimes, 50);
    result.editP95Ms = percentile(editTimes, 95);
    await quiet(pid);

    // EndpointSlice changes: a Service's only endpoint becomes 127.0.0.3.
    const sliceTimes: number[] = [];
    for (let k = 0; k < settings.edits; k++) {
      const i = (k * 104_729 + 1) % n;
      const t = performance.now();
      setSlice(api, `isvc-${i}`, endpoints.port, [ENDPOINT_IPS[2]]);
      await pollUntil(
        async () => (await get(proxyPort, ingressHost(i), '/a')).body === ENDPOINT_IPS[2],
        10_000,
        `slice of isvc-${i}`,
      );
      sliceTimes.push(performance.now() - t);
    }
    result.sliceP50Ms = percentile(sliceTimes, 50);
    await quiet(pid);

    // CPU per change: K edits, each waited for at a gentle poll, then until the process is quiet
    // again; each one's CPU less the idle rate over its time and its polling requests. The median
    // per edit beside the mean: one edit that meets a GC or a timer moves the mean, not the median.
    const requestCpu = await cpuPerRequest(pid, proxyPort, ingressHost(0));
    const idleRate = await idleCpuRate(pid);
    const perEdit: number[] = [];
    for (let k = 0; k < settings.edits; k++) {
      const cpu = startThreadCpuMeter(pid);
      const t = performance.now();
      const i = (k * 6151 + 3) % n;
      const path = `/c${k}`;
      if (k % 2 === 0) applyIngress(api, i, path);
      else applyRoute(api, i, path);
      const host = k % 2 === 0 ? ingressHost(i) : routeHost(i);
      const polls = await pollUntil(
        async () => (await get(proxyPort, host, path)).status === 200,
        10_000,
        `${host}${path}`,
        20,
      );
      await quiet(pid);
      const seconds = (performance.now() - t) / 1000;
      perEdit.push(Math.max(0, cpu() - idleRate * seconds - polls * requestCpu) * 1000);
    }
    result.cpuPerChangeMs = perEdit.reduce((sum, value) => sum + value, 0) / perEdit.length;
    result.cpuPerChangeP50Ms = percentile(perEdit, 50);
    return result;
  } finally {
    if (started) await stopProcess(started);
    await api.stop();
    await endpoints.close();
  }
}

/** Waits until the process's main thread used under 2 % of a core over 300 ms (status writes, logs done). */
async function quiet(pid: number, limitMs = 60_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    // The main thread only: with --cpu-prof the profiler's thread keeps the process above the mark.
    const cpu = startThreadCpuMeter(pid, 'main');
    await new Promise((resolve) => setTimeout(resolve, 300));
    if (cpu() < 0.006) return;
  }
}

async function idleCpuRate(pid: number): Promise<number> {
  const cpu = startThreadCpuMeter(pid);
  const t = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 2000));
  return cpu() / ((performance.now() - t) / 1000);
}

async function cpuPerRequest(pid: number, port: number, host: string): Promise<number> {
  const count = 500;
  const cpu = startThreadCpuMeter(pid);
  for (let i = 0; i < count; i++) await get(port, host, '/a');
  return cpu() / count;
}

const fixed = (value: number | null, digits = 0) => (value === null ? '—' : value.toFixed(digits));

export function renderScale(results: readonly ScaleResult[]): string {
  const lines = [
    '| N | objects | ready (s) | routable (s) | RSS (MiB) | edit p50 / p95 (ms) | slice p50 (ms) | CPU / change, mean / p50 (ms) | log at ready (KiB) |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.n} | ${r.objects} | ${fixed(r.readyS, 1)} | ${fixed(r.routableS, 1)} | ${fixed(r.rssMiB)} | ${fixed(r.editP50Ms)} / ${fixed(r.editP95Ms)} | ${fixed(r.sliceP50Ms)} | ${fixed(r.cpuPerChangeMs, 1)} / ${fixed(r.cpuPerChangeP50Ms, 1)} | ${r.logBytesAtReady === null ? '—' : Math.round(r.logBytesAtReady / 1024)} |${r.note ? ` ${r.note}` : ''}`,
    );
  }
  return lines.join('\n');
}

/** The scale run: every N in turn, one table at the end. Returns the exit status. */
export async function runScale(args: string[]): Promise<number> {
  const settings = readSettings(args);
  const results: ScaleResult[] = [];
  for (const n of settings.sizes) {
    process.stdout.write(`N=${n}: ${6 * n + 4} objects\n`);
    const result = await measureSize(n, settings);
    results.push(result);
    process.stdout.write(`${renderScale([result]).split('\n').at(-1)}\n`);
  }
  process.stdout.write(`\n${renderScale(results)}\n`);
  return 0;
}
