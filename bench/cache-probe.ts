/**
 * `node bench/cache-probe.ts [seconds] [rounds]`: a cached GET against a proxied GET of the same
 * Tollgate process (docs/benchmark.md#response-cache), for a machine without wrk. The same routes as
 * the `tollgate-cached` and `tollgate` targets of `npm run bench`, driven by a keep-alive Node
 * client (32 requests in flight) in interleaved rounds; reports requests/s and Tollgate's CPU µs per
 * request, and their ratios. The Node client competes with the proxy for the CPU, so quote ratios.
 * Then the memory at the budget: distinct URLs until `/cached`'s 16 MiB store has been filled twice
 * over, with the RSS of the process before and after, beside what the store counts.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { cpuSupported, startCpuMeter } from './cpu.ts';
import { startNodeUpstream } from './node-targets.ts';
import { freePort, stopAll } from './processes.ts';
import { BENCH_HOST, startTollgate } from './tollgate.ts';

const seconds = Number(process.argv[2] ?? 5);
const rounds = Number(process.argv[3] ?? 3);
const IN_FLIGHT = 32;

interface Round {
  requests: number;
  cpuSeconds: number;
  seconds: number;
  hits: number;
}

async function drive(
  base: string,
  path: string | ((n: number) => string),
  pid: number,
  limit = Number.POSITIVE_INFINITY,
): Promise<Round> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
  const url = new URL(base);
  let requests = 0;
  let hits = 0;
  const deadline = limit === Number.POSITIVE_INFINITY ? performance.now() + seconds * 1000 : Infinity;
  const one = (target: string) =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(
        { host: url.hostname, port: url.port, path: target, agent, headers: { host: BENCH_HOST } },
        (res) => {
          if (res.headers['x-cache'] === 'HIT') hits++;
          res.resume();
          res.on('end', () => {
            if (res.statusCode !== 200) reject(new Error(`${target} answered ${res.statusCode}`));
            else resolve();
          });
        },
      );
      req.on('error', reject);
      req.end();
    });
  let issued = 0;
  const loop = async () => {
    while (performance.now() < deadline && issued < limit) {
      issued++;
      await one(typeof path === 'string' ? path : path(issued));
      requests++;
    }
  };
  const cpu = startCpuMeter([pid]);
  const started = performance.now();
  await Promise.all(Array.from({ length: IN_FLIGHT }, loop));
  const elapsed = (performance.now() - started) / 1000;
  const cpuSeconds = cpu();
  agent.destroy();
  return { requests, cpuSeconds, seconds: elapsed, hits };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

async function main(): Promise<void> {
  if (!cpuSupported()) throw new Error('needs /proc to count CPU');
  const upstreamPort = await freePort();
  await startNodeUpstream(upstreamPort);
  const tollgate = await startTollgate(upstreamPort);
  const pid = tollgate.process.child.pid as number;
  const targets = { proxied: '/', cached: '/cached' } as const;
  const results: Record<keyof typeof targets, Round[]> = { proxied: [], cached: [] };
  // Warm-up: JIT, connections, and the cached copy stored.
  for (const path of Object.values(targets)) await drive(tollgate.base, path, pid);
  for (let round = 0; round < rounds; round++)
    for (const [name, path] of Object.entries(targets) as Array<[keyof typeof targets, string]>) {
      const result = await drive(tollgate.base, path, pid);
      results[name].push(result);
      console.log(
        `round ${round + 1} ${name}: ${(result.requests / result.seconds).toFixed(0)} req/s, ` +
          `${((result.cpuSeconds / result.requests) * 1e6).toFixed(1)} µs CPU/request, hits ${result.hits}`,
      );
    }
  const rate = (name: keyof typeof targets) => median(results[name].map((r) => r.requests / r.seconds));
  const cpu = (name: keyof typeof targets) =>
    median(results[name].map((r) => (r.cpuSeconds / r.requests) * 1e6));
  console.log(
    `median: proxied ${rate('proxied').toFixed(0)} req/s ${cpu('proxied').toFixed(1)} µs; ` +
      `cached ${rate('cached').toFixed(0)} req/s ${cpu('cached').toFixed(1)} µs`,
  );
  console.log(
    `cached / proxied: throughput ${(rate('cached') / rate('proxied')).toFixed(2)}, ` +
      `CPU per request ${(cpu('cached') / cpu('proxied')).toFixed(2)}`,
  );

  // Memory at the budget: 16 MiB of ~800-byte entries is about 21,000 URLs; twice that many.
  const rssBefore = rssMiB(pid);
  const counted = async () => {
    const text = await (await fetch(`http://127.0.0.1:${tollgate.adminPort}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('tollgate_cache_bytes '));
    return Number(line?.split(' ')[1] ?? Number.NaN) / 1024 ** 2;
  };
  // The same flood on the proxied route first: the RSS a flood leaves without a cache (heap grown
  // for garbage), so the difference is what the store holds.
  await drive(tollgate.base, (n) => `/flood/${n}`, pid, 45_000);
  const rssProxied = rssMiB(pid);
  const before = await counted();
  await drive(tollgate.base, (n) => `/cached/${n}`, pid, 45_000);
  const rssCached = rssMiB(pid);
  console.log(
    `memory at the budget (16 MiB): counted ${before.toFixed(1)} → ${(await counted()).toFixed(1)} MiB; ` +
      `RSS ${rssBefore.toFixed(0)} MiB, after 45,000 proxied URLs ${rssProxied.toFixed(0)} MiB, ` +
      `after 45,000 cached URLs ${rssCached.toFixed(0)} MiB (+${(rssCached - rssProxied).toFixed(0)})`,
  );
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024;
}

try {
  await main();
} finally {
  await stopAll();
}
