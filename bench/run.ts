/**
 * `npm run bench`: the same load against every target of bench/targets.ts (the upstream reached
 * directly; nginx, HAProxy and Caddy on one core and on N; the bare Node reference proxies; Tollgate
 * with and without auth, with large routing tables and with N workers), in interleaved rounds
 * (A B C … A B C …) so that drift on a shared machine hits every target alike. For each target: the
 * median requests/s, CPU µs per request of its process tree (from /proc) and p99; then a paced run at
 * a fixed, moderate rate for the targets marked `paced` (p50/p99/p99.9); then the ratios of
 * bench/targets.ts RATIOS. Writes every figure to bench/results/latest.json. See bench/README.md.
 *
 * Settings (flag or env): --seconds/BENCH_SECONDS (5), --rounds/BENCH_ROUNDS (3),
 * --connections/BENCH_CONNECTIONS (64), --threads/BENCH_THREADS (1, wrk threads),
 * --warmup/BENCH_WARMUP_SECONDS (2), --targets/BENCH_TARGETS (every target of TARGETS),
 * --upstream/BENCH_UPSTREAM (nginx | node), --workers/BENCH_WORKERS (the machine's CPUs: N of the
 * every-core targets), --paced-connections/BENCH_PACED_CONNECTIONS (32),
 * --paced-pause/BENCH_PACED_PAUSE_MS (5; 0 skips the paced run).
 *
 * `npm run bench -- scale` runs the Kubernetes control plane at many objects instead (bench/scale.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BODY_BYTES } from './body.ts';
import { cpuSupported, startCpuMeter } from './cpu.ts';
import { httpRequest, waitForHttp } from './http.ts';
import { findLoadGenerator, type LoadGenerator, type LoadSettings } from './load.ts';
import { nginxBinary, startNginx, upstreamConfig } from './nginx.ts';
import { startNodeUpstream } from './node-targets.ts';
import { type CorePlan, corePlan, pinTrees } from './pinning.ts';
import { freePort, runToCompletion, type Started, stopAll } from './processes.ts';
import {
  type Ratio,
  type RoundResult,
  renderPaced,
  renderRatios,
  renderThroughput,
  summarise,
  type TargetSummary,
} from './report.ts';
import { type StartRss, startRss } from './start-rss.ts';
import { type BenchContext, RATIOS, type RatioMetric, type RunningTarget, TARGETS } from './targets.ts';

const UPSTREAM_KINDS = ['nginx', 'node'] as const;
type UpstreamKind = (typeof UPSTREAM_KINDS)[number];

interface Settings {
  seconds: number;
  rounds: number;
  connections: number;
  threads: number;
  warmupSeconds: number;
  targets: string[];
  upstream: UpstreamKind;
  /** N of the every-core targets. */
  workers: number;
  pacedConnections: number;
  /** Pause per connection between an answer and the next request in the paced run; 0: no paced run. */
  pacedPauseMs: number;
}

interface Target extends RunningTarget {
  id: string;
  paced: boolean;
  generator: LoadGenerator;
}

function readSettings(): Settings {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string' },
      rounds: { type: 'string' },
      connections: { type: 'string' },
      threads: { type: 'string' },
      warmup: { type: 'string' },
      targets: { type: 'string' },
      upstream: { type: 'string' },
      workers: { type: 'string' },
      'paced-connections': { type: 'string' },
      'paced-pause': { type: 'string' },
    },
  });
  const whole = (flag: string | undefined, env: string, fallback: number, allowZero = false): number => {
    const raw = flag ?? process.env[env];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < (allowZero ? 0 : 1))
      throw new Error(`${env} must be a whole number, got ${raw}`);
    return value;
  };
  const known = TARGETS.map((target) => target.id);
  const targets = (values.targets ?? process.env.BENCH_TARGETS ?? known.join(',')).split(',').map((name) => {
    const id = known.find((candidate) => candidate === name.trim());
    if (id === undefined) throw new Error(`unknown target ${name}; known: ${known.join(', ')}`);
    return id;
  });
  const upstreamName = values.upstream ?? process.env.BENCH_UPSTREAM ?? 'nginx';
  const upstream = UPSTREAM_KINDS.find((kind) => kind === upstreamName.trim());
  if (upstream === undefined) {
    throw new Error(`unknown upstream ${upstreamName}; known: ${UPSTREAM_KINDS.join(', ')}`);
  }
  return {
    seconds: whole(values.seconds, 'BENCH_SECONDS', 5),
    rounds: whole(values.rounds, 'BENCH_ROUNDS', 3),
    connections: whole(values.connections, 'BENCH_CONNECTIONS', 64),
    threads: whole(values.threads, 'BENCH_THREADS', 1),
    warmupSeconds: whole(values.warmup, 'BENCH_WARMUP_SECONDS', 2, true),
    targets,
    upstream,
    workers: whole(values.workers, 'BENCH_WORKERS', availableParallelism()),
    pacedConnections: whole(values['paced-connections'], 'BENCH_PACED_CONNECTIONS', 32),
    pacedPauseMs: whole(values['paced-pause'], 'BENCH_PACED_PAUSE_MS', 5, true),
  };
}

/**
 * One request before any load: a target that answers the wrong status or body would make its
 * figures meaningless (a 401 is much cheaper than a proxied 200); then the target's own checks.
 */
async function checkTarget(target: Target): Promise<void> {
  if (target.check) {
    await target.check();
    return;
  }
  const { status, body } = await httpRequest(target.url, { headers: target.headers });
  if (status !== 200 || body.byteLength !== BODY_BYTES) {
    throw new Error(
      `${target.label} answered ${status} with ${body.byteLength} bytes, expected 200 with ${BODY_BYTES}`,
    );
  }
  await target.verify?.();
}

function toolVersion(command: string, args: string[]): string {
  // nginx -v and wrk -v print to stderr (wrk also exits 1), so read both streams whatever the exit.
  const { stdout, stderr } = spawnSync(command, args, { encoding: 'utf8' });
  return (
    `${stdout ?? ''}${stderr ?? ''}`
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? 'unknown'
  );
}

async function startUpstream(settings: Settings): Promise<{ port: number; upstream: Started }> {
  const port = await freePort();
  if (settings.upstream === 'node') return { port, upstream: await startNodeUpstream(port) };
  const nginx = nginxBinary();
  if (nginx === null) throw new Error('nginx is needed for the upstream (apt-get install nginx)');
  // Two workers: the upstream must never be what limits a proxy's figure.
  const upstream = startNginx(nginx, 'upstream', (dir) => upstreamConfig(dir, port, 2));
  await waitForHttp(`http://127.0.0.1:${port}/`, upstream);
  return { port, upstream };
}

async function startTargets(
  settings: Settings,
  generator: LoadGenerator,
): Promise<{ targets: Target[]; skipped: string[]; upstream: Started }> {
  const { port, upstream } = await startUpstream(settings);
  const sharedInstances = new Map<string, Promise<unknown>>();
  const context: BenchContext = {
    upstreamPort: port,
    upstream,
    workers: settings.workers,
    upstreamKind: settings.upstream,
    shared<T>(key: string, start: () => Promise<T>): Promise<T> {
      let instance = sharedInstances.get(key);
      if (instance === undefined) {
        instance = start();
        sharedInstances.set(key, instance);
      }
      return instance as Promise<T>;
    },
  };
  const targets: Target[] = [];
  const skipped: string[] = [];
  for (const definition of TARGETS) {
    if (!settings.targets.includes(definition.id)) continue;
    process.stdout.write(`starting ${definition.id}\n`);
    const started = await definition.start(context);
    if ('skip' in started) {
      skipped.push(`${definition.id}: ${started.skip}`);
      continue;
    }
    targets.push({
      ...started,
      id: definition.id,
      paced: definition.paced === true,
      generator: started.generator ?? generator,
    });
  }
  return { targets, skipped, upstream };
}

/** One run of one target, with the CPU its process trees used meanwhile. */
async function measureOnce(
  target: Target,
  load: Omit<LoadSettings, 'url' | 'headers'>,
): Promise<RoundResult> {
  const pids = target.processes.flatMap((started) =>
    started.child.pid === undefined ? [] : [started.child.pid],
  );
  const cpu = cpuSupported() && pids.length > 0 ? startCpuMeter(pids) : null;
  const result = await target.generator.run({ url: target.url, headers: target.headers, ...load });
  return { ...result, cpuSeconds: cpu === null ? null : cpu() };
}

async function rounds(
  targets: readonly Target[],
  settings: Settings,
  load: Omit<LoadSettings, 'url' | 'headers' | 'seconds'>,
  what: string,
  /** Runs before each run of a target (the paced run pins it to its core, bench/pinning.ts). */
  before: (target: Target) => void = () => {},
): Promise<Map<string, RoundResult[]>> {
  if (settings.warmupSeconds > 0) {
    for (const target of targets) {
      before(target);
      process.stdout.write(`${what} warm-up ${target.label} (${settings.warmupSeconds}s)\n`);
      await target.generator.run({
        url: target.url,
        headers: target.headers,
        ...load,
        seconds: settings.warmupSeconds,
      });
    }
  }
  const results = new Map<string, RoundResult[]>(targets.map((target) => [target.id, []]));
  for (let round = 1; round <= settings.rounds; round += 1) {
    for (const target of targets) {
      before(target);
      const result = await measureOnce(target, { ...load, seconds: settings.seconds });
      results.get(target.id)?.push(result);
      const problems = result.socketErrors + result.badStatuses;
      const cpu =
        result.cpuSeconds === null
          ? ''
          : `, ${((result.cpuSeconds * 1e6) / Math.max(result.requests, 1)).toFixed(1)} CPU µs/req`;
      process.stdout.write(
        `${what} round ${round}/${settings.rounds} ${target.label.padEnd(24)} ${Math.round(result.requestsPerSecond)} req/s${cpu}, p99 ${result.p99Ms.toFixed(2)} ms` +
          `${problems > 0 ? `, ${result.socketErrors} socket errors, ${result.badStatuses} bad statuses` : ''}\n`,
      );
    }
  }
  return results;
}

const METRICS: Record<RatioMetric, { of: (summary: TargetSummary) => number; higherIsBetter: boolean }> = {
  throughput: { of: (summary) => summary.requestsPerSecond, higherIsBetter: true },
  cpu: { of: (summary) => summary.cpuMicrosPerRequest, higherIsBetter: false },
  'paced-p99': { of: (summary) => summary.p99Ms, higherIsBetter: false },
};

function ratios(closed: readonly TargetSummary[], paced: readonly TargetSummary[], workers: number): Ratio[] {
  const out: Ratio[] = [];
  for (const definition of RATIOS) {
    const pool = definition.metric === 'paced-p99' ? paced : closed;
    const numerator = pool.find((summary) => summary.id === definition.numerator);
    const denominator = pool.find((summary) => summary.id === definition.denominator);
    if (numerator === undefined || denominator === undefined) continue;
    const metric = METRICS[definition.metric];
    const value = metric.of(numerator) / metric.of(denominator);
    if (Number.isNaN(value)) continue;
    const ratio: Ratio = {
      name: definition.name.replaceAll('{N}', String(workers)),
      metric: definition.metric,
      value,
    };
    if (definition.goal !== undefined) {
      ratio.goal = definition.goal;
      ratio.met = metric.higherIsBetter ? value >= definition.goal : value <= definition.goal;
    }
    if (definition.note !== undefined) ratio.note = definition.note;
    out.push(ratio);
  }
  return out;
}

/**
 * Heap and lookup time of the compiled routing table for the large-table targets (route-memory.ts),
 * one child process per table so nothing of another is counted.
 */
async function routeTables(): Promise<Record<string, unknown>> {
  const script = join(dirname(fileURLToPath(import.meta.url)), 'route-memory.ts');
  const tables: Record<string, unknown> = {};
  for (const kind of ['one-path', 'many-hosts', 'many-paths']) {
    const output = await runToCompletion(process.execPath, ['--expose-gc', script, kind], {
      timeoutMs: 120_000,
    });
    tables[kind] = JSON.parse(output);
  }
  return tables;
}

function renderRouteTables(tables: Record<string, unknown>): string {
  return Object.entries(tables)
    .map(([kind, figures]) => {
      const { routes, tableBytes, compileMs, lookupNs, scanLookupNs } = figures as Record<string, number>;
      return (
        `${kind.padEnd(10)} ${String(routes).padStart(6)} routes: table ${((tableBytes ?? 0) / 1024 / 1024).toFixed(1)} MiB, ` +
        `compiled in ${compileMs} ms, lookup ${lookupNs} ns (linear scan: ${scanLookupNs} ns)`
      );
    })
    .join('\n');
}

/**
 * The paced run's cores (bench/pinning.ts): the upstream and wrk on every core but 0, each target
 * on core 0 while it is measured; afterwards every process gets every core back. Null (and a line
 * saying why) when the machine cannot pin.
 */
function pacedCores(upstream: Started): {
  plan: CorePlan;
  pin(target: Target): void;
  release(targets: readonly Target[]): void;
} | null {
  const plan = corePlan();
  if ('none' in plan) {
    process.stdout.write(`paced run not pinned: ${plan.none}\n`);
    return null;
  }
  const rootsOf = (target: Target) =>
    target.processes.flatMap((p) => (p.child.pid === undefined ? [] : [p.child.pid]));
  const upstreamRoots = upstream.child.pid === undefined ? [] : [upstream.child.pid];
  pinTrees(upstreamRoots, plan.rest);
  process.stdout.write(
    `paced run pinned: each proxy on core ${plan.proxy}, wrk and the upstream on ${plan.rest}\n`,
  );
  return {
    plan,
    pin: (target) => {
      // The direct target is the upstream itself: it stays where the upstream is.
      if (target.processes.includes(upstream)) return;
      pinTrees(rootsOf(target), plan.proxy);
    },
    release: (targets) => {
      for (const target of targets) pinTrees(rootsOf(target), plan.all);
      pinTrees(upstreamRoots, plan.all);
    },
  };
}

function renderStartRss(memory: Record<string, StartRss>): string {
  return Object.entries(memory)
    .map(([kind, { rssMiB, peakRssMiB }]) => `${kind.padEnd(10)} ${rssMiB} MiB (peak ${peakRssMiB} MiB)`)
    .join('\n');
}

async function main(): Promise<number> {
  const settings = readSettings();
  // Other work on the machine is the main source of noise; recorded so a reader can judge a run.
  const loadAverageAtStart = loadavg()[0] ?? 0;
  const generator = findLoadGenerator();
  if (generator === null) {
    throw new Error(
      'no load generator: install wrk (apt-get install wrk), or `npm i -D autocannon` as a fallback',
    );
  }
  const { targets, skipped, upstream } = await startTargets(settings, generator);
  for (const reason of skipped) process.stdout.write(`skipped ${reason}\n`);
  for (const target of targets) await checkTarget(target);

  const pacedTargets = settings.pacedPauseMs > 0 ? targets.filter((target) => target.paced) : [];
  const perTarget = settings.warmupSeconds + settings.rounds * settings.seconds;
  process.stdout.write(
    `${generator.name}: ${settings.connections} connections, ${settings.threads} thread(s), ` +
      `${settings.rounds} round(s) × ${settings.seconds}s per target, ${BODY_BYTES}-byte bodies, ` +
      `${settings.upstream} upstream; about ${Math.ceil(((targets.length + pacedTargets.length) * perTarget) / 60)} min of load\n`,
  );
  const closedResults = await rounds(
    targets,
    settings,
    { connections: settings.connections, threads: settings.threads },
    'closed',
  );
  const pinning = pacedTargets.length > 0 ? pacedCores(upstream) : null;
  const pacedResults = await rounds(
    pacedTargets,
    settings,
    {
      connections: settings.pacedConnections,
      threads: 1,
      pauseMs: settings.pacedPauseMs,
      ...(pinning === null ? {} : { cores: pinning.plan.rest }),
    },
    'paced',
    (target) => pinning?.pin(target),
  );
  pinning?.release(targets);
  const closed = targets.map((target) =>
    summarise(target.id, target.label, closedResults.get(target.id) ?? []),
  );
  const paced = pacedTargets.map((target) =>
    summarise(target.id, target.label, pacedResults.get(target.id) ?? []),
  );
  const found = ratios(closed, paced, settings.workers);

  process.stdout.write(
    `\nclosed loop (${settings.connections} connections, as fast as each target answers)\n`,
  );
  process.stdout.write(`${renderThroughput(closed)}\n`);
  if (paced.length > 0) {
    process.stdout.write(
      `\npaced (${settings.pacedConnections} connections, ${settings.pacedPauseMs} ms pause after each answer)\n`,
    );
    process.stdout.write(`${renderPaced(paced)}\n`);
  }
  process.stdout.write(`\n${renderRatios(found)}\n`);
  const tables = settings.targets.some(
    (id) => id.startsWith('tollgate-paths') || id.startsWith('tollgate-hosts'),
  )
    ? await routeTables()
    : {};
  if (Object.keys(tables).length > 0) {
    process.stdout.write(
      `\nrouting tables (heap after a full GC, median lookup)\n${renderRouteTables(tables)}\n`,
    );
  }
  // The same tables' cost to a started process (start-rss.ts): what a pod's memory limit must allow.
  const startMemory: Record<string, StartRss> = {};
  if (Object.keys(tables).length > 0) {
    for (const kind of ['one-path', 'many-paths'] as const) startMemory[kind] = await startRss(kind);
    process.stdout.write(`\nRSS once ready (VmRSS, peak VmHWM)\n${renderStartRss(startMemory)}\n`);
  }

  const resultsDir = join(dirname(fileURLToPath(import.meta.url)), 'results');
  mkdirSync(resultsDir, { recursive: true });
  const document = {
    date: new Date().toISOString(),
    command:
      `BENCH_SECONDS=${settings.seconds} BENCH_ROUNDS=${settings.rounds} BENCH_CONNECTIONS=${settings.connections} ` +
      `BENCH_UPSTREAM=${settings.upstream} BENCH_WORKERS=${settings.workers} ` +
      `BENCH_PACED_CONNECTIONS=${settings.pacedConnections} BENCH_PACED_PAUSE_MS=${settings.pacedPauseMs} ` +
      `BENCH_TARGETS=${settings.targets.join(',')} npm run bench`,
    environment: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      loadAverageAtStart: Number(loadAverageAtStart.toFixed(2)),
      loadAverageAtEnd: Number((loadavg()[0] ?? 0).toFixed(2)),
      node: process.version,
      nginx: toolVersion('nginx', ['-v']),
      haproxy: toolVersion('haproxy', ['-v']),
      caddy: toolVersion('caddy', ['version']),
      loadGenerator: generator.name === 'wrk' ? toolVersion('wrk', ['-v']) : generator.name,
    },
    settings,
    targets: closed,
    paced,
    ratios: found,
    routeTables: tables,
    startRss: startMemory,
    skipped,
  };
  writeFileSync(join(resultsDir, 'latest.json'), `${JSON.stringify(document, null, 2)}\n`);
  process.stdout.write(`\nwrote bench/results/latest.json\n`);

  const invalid = [...closed, ...paced].filter((summary) =>
    summary.rounds.some((round) => round.badStatuses > 0),
  );
  if (invalid.length > 0) {
    process.stderr.write(
      `non-2xx answers under load from: ${invalid.map((summary) => summary.label).join(', ')}; figures are not valid\n`,
    );
    return 1;
  }
  return 0;
}

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(130); // second Ctrl-C: the 'exit' hook SIGKILLs what is left
    stopping = true;
    process.stderr.write(`\n${signal}: stopping every process started by the bench\n`);
    void stopAll().finally(() => process.exit(130));
  });
}

try {
  // `npm run bench -- scale`: the Kubernetes control plane at many objects (bench/scale.ts), its own run.
  if (process.argv[2] === 'scale') {
    const { runScale } = await import('./scale.ts');
    process.exitCode = await runScale(process.argv.slice(3));
  } else process.exitCode = await main();
} catch (error) {
  if (!stopping)
    process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
} finally {
  await stopAll();
}
