/**
 * `npm run bench`: the same load against a fixed-body upstream reached directly, through nginx (one
 * worker, keep-alive pool), through two minimal Node reference proxies (http-proxy-3, hand-written
 * undici) and through Tollgate with and without JWT auth, in interleaved rounds (A B C … A B C …) so
 * that drift on a shared machine hits every target alike. Prints the median requests/s and p99 of each
 * target, the ratios the issues set goals for and the calibration ratios of the reference proxies;
 * writes the figures to bench/results/latest.json. See bench/README.md for the method.
 *
 * Settings (flag or env): --seconds/BENCH_SECONDS (5), --rounds/BENCH_ROUNDS (3),
 * --connections/BENCH_CONNECTIONS (64), --threads/BENCH_THREADS (1, wrk threads),
 * --warmup/BENCH_WARMUP_SECONDS (2), --targets/BENCH_TARGETS (all of TARGET_IDS),
 * --upstream/BENCH_UPSTREAM (nginx | node), --workers/BENCH_WORKERS (the machine's CPUs: N of the
 * *-workers targets).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BODY_BYTES } from './body.ts';
import { httpRequest, waitForHttp } from './http.ts';
import { findLoadGenerator, type LoadGenerator, type LoadResult } from './load.ts';
import { nginxBinary, proxyConfig, startNginx, upstreamConfig } from './nginx.ts';
import {
  type ReferenceProxyId,
  startNodeUpstream,
  startReferenceProxy,
  startSharedUndiciProxies,
} from './node-targets.ts';
import { freePort, stopAll } from './processes.ts';
import { type Ratio, ratio, renderTable, summarise, type TargetSummary } from './report.ts';
import { BENCH_HOST, issueToken, MAIN_JS, startTollgate, tollgateBuilt } from './tollgate.ts';

const TARGET_IDS = [
  'direct',
  'nginx',
  'http-proxy-3',
  'undici-minimal',
  'tollgate',
  'tollgate-jwt',
  'tollgate-issuer',
  // Every core (docs/workers.md): N = BENCH_WORKERS, the machine's CPUs by default.
  'nginx-workers',
  'undici-minimal-workers',
  'tollgate-workers',
  'tollgate-workers-cluster',
] as const;
type TargetId = (typeof TARGET_IDS)[number];

const UPSTREAM_KINDS = ['nginx', 'node'] as const;
type UpstreamKind = (typeof UPSTREAM_KINDS)[number];

const REFERENCE_LABELS: Record<ReferenceProxyId, string> = {
  'http-proxy-3': 'http-proxy-3',
  'undici-minimal': 'undici (minimal)',
};

interface Settings {
  seconds: number;
  rounds: number;
  connections: number;
  threads: number;
  warmupSeconds: number;
  targets: TargetId[];
  upstream: UpstreamKind;
  /** N of the *-workers targets. */
  workers: number;
}

interface Target {
  id: TargetId;
  label: string;
  url: string;
  headers: Record<string, string>;
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
    },
  });
  const positive = (flag: string | undefined, env: string, fallback: number, allowZero = false): number => {
    const raw = flag ?? process.env[env];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < (allowZero ? 0 : 1))
      throw new Error(`${env} must be a whole number, got ${raw}`);
    return value;
  };
  const targetList = (values.targets ?? process.env.BENCH_TARGETS ?? TARGET_IDS.join(',')).split(',');
  const targets = targetList.map((name) => {
    const id = TARGET_IDS.find((known) => known === name.trim());
    if (id === undefined) throw new Error(`unknown target ${name}; known: ${TARGET_IDS.join(', ')}`);
    return id;
  });
  const upstreamName = values.upstream ?? process.env.BENCH_UPSTREAM ?? 'nginx';
  const upstream = UPSTREAM_KINDS.find((known) => known === upstreamName.trim());
  if (upstream === undefined) {
    throw new Error(`unknown upstream ${upstreamName}; known: ${UPSTREAM_KINDS.join(', ')}`);
  }
  return {
    seconds: positive(values.seconds, 'BENCH_SECONDS', 5),
    rounds: positive(values.rounds, 'BENCH_ROUNDS', 3),
    connections: positive(values.connections, 'BENCH_CONNECTIONS', 64),
    threads: positive(values.threads, 'BENCH_THREADS', 1),
    warmupSeconds: positive(values.warmup, 'BENCH_WARMUP_SECONDS', 2, true),
    targets,
    upstream,
    workers: positive(values.workers, 'BENCH_WORKERS', availableParallelism()),
  };
}

/**
 * One request before any load: a target that answers the wrong status or body would make its
 * figures meaningless (a 401 is much cheaper than a proxied 200). The JWT target must also refuse a
 * request without the token, or the run would not be measuring authentication at all.
 */
async function checkTarget(target: Target): Promise<void> {
  const { status, body } = await httpRequest(target.url, { headers: target.headers });
  if (status !== 200 || body.byteLength !== BODY_BYTES) {
    throw new Error(
      `${target.label} answered ${status} with ${body.byteLength} bytes, expected 200 with ${BODY_BYTES}`,
    );
  }
  if (target.id === 'tollgate-jwt' || target.id === 'tollgate-issuer') {
    const withoutToken = await httpRequest(target.url, { headers: { host: BENCH_HOST } });
    if (withoutToken.status !== 401) {
      throw new Error(`the JWT route answered ${withoutToken.status} without a token, expected 401`);
    }
  }
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

async function startTargets(settings: Settings): Promise<{ targets: Target[]; skipped: string[] }> {
  const nginx = nginxBinary();
  if (nginx === null) throw new Error('nginx is needed (apt-get install nginx)');
  const skipped: string[] = [];
  const upstreamPort = await freePort();
  if (settings.upstream === 'nginx') {
    // Two workers: the upstream must never be what limits a proxy's figure.
    const upstream = startNginx(nginx, 'upstream', (dir) => upstreamConfig(dir, upstreamPort, 2));
    await waitForHttp(`http://127.0.0.1:${upstreamPort}/`, upstream);
  } else {
    await startNodeUpstream(upstreamPort);
  }

  const host = { host: BENCH_HOST };
  const targets: Target[] = [];
  if (settings.targets.includes('direct')) {
    targets.push({
      id: 'direct',
      label: `direct upstream${settings.upstream === 'node' ? ' (node)' : ''}`,
      url: `http://127.0.0.1:${upstreamPort}/`,
      headers: host,
    });
  }
  if (settings.targets.includes('nginx')) {
    const port = await freePort();
    const proxy = startNginx(nginx, 'nginx-proxy', (dir) => proxyConfig(dir, port, upstreamPort));
    await waitForHttp(`http://127.0.0.1:${port}/`, proxy);
    targets.push({ id: 'nginx', label: 'nginx (1 worker)', url: `http://127.0.0.1:${port}/`, headers: host });
  }
  for (const id of ['http-proxy-3', 'undici-minimal'] as const) {
    if (!settings.targets.includes(id)) continue;
    const port = await startReferenceProxy(id, upstreamPort);
    targets.push({ id, label: REFERENCE_LABELS[id], url: `http://127.0.0.1:${port}/`, headers: host });
  }
  const wantsTollgate = (['tollgate', 'tollgate-jwt', 'tollgate-issuer'] as const).some((id) =>
    settings.targets.includes(id),
  );
  if (wantsTollgate && !tollgateBuilt()) {
    skipped.push(`tollgate targets: ${MAIN_JS} not found (run npm run build)`);
  } else if (wantsTollgate) {
    const tollgate = await startTollgate(upstreamPort);
    const base = `http://127.0.0.1:${tollgate.proxyPort}`;
    if (settings.targets.includes('tollgate')) {
      targets.push({ id: 'tollgate', label: 'tollgate', url: `${base}/`, headers: host });
    }
    if (settings.targets.includes('tollgate-jwt')) {
      const token = await issueToken(tollgate);
      targets.push({
        id: 'tollgate-jwt',
        label: 'tollgate + JWT',
        url: `${base}/jwt`,
        headers: { ...host, authorization: `Bearer ${token}` },
      });
    }
    if (settings.targets.includes('tollgate-issuer')) {
      targets.push({
        id: 'tollgate-issuer',
        label: 'tollgate + issuer JWT',
        url: `${base}/issuer`,
        headers: { ...host, authorization: `Bearer ${tollgate.issuerToken}` },
      });
    }
  }
  targets.push(...(await startWorkerTargets(settings, nginx, upstreamPort, skipped)));
  return { targets, skipped };
}

/**
 * The same proxies with N processes each (docs/workers.md): nginx `worker_processes N` (reuseport),
 * N minimal undici proxies sharing the port (reuseport), Tollgate `workers: N` with the kernel
 * spreading connections (reuseport) and with the cluster module's round-robin through the primary.
 */
async function startWorkerTargets(
  settings: Settings,
  nginx: string,
  upstreamPort: number,
  skipped: string[],
): Promise<Target[]> {
  const n = settings.workers;
  const host = { host: BENCH_HOST };
  const targets: Target[] = [];
  if (settings.targets.includes('nginx-workers')) {
    const port = await freePort();
    const proxy = startNginx(nginx, 'nginx-proxy-workers', (dir) => proxyConfig(dir, port, upstreamPort, n));
    await waitForHttp(`http://127.0.0.1:${port}/`, proxy);
    const label = `nginx (${n} workers)`;
    targets.push({ id: 'nginx-workers', label, url: `http://127.0.0.1:${port}/`, headers: host });
  }
  if (settings.targets.includes('undici-minimal-workers')) {
    const port = await startSharedUndiciProxies(upstreamPort, n);
    const label = `undici (minimal) ×${n}`;
    targets.push({ id: 'undici-minimal-workers', label, url: `http://127.0.0.1:${port}/`, headers: host });
  }
  for (const [id, spreading] of [
    ['tollgate-workers', 'reuseport'],
    ['tollgate-workers-cluster', 'cluster'],
  ] as const) {
    if (!settings.targets.includes(id)) continue;
    if (!tollgateBuilt()) {
      skipped.push(`${id}: ${MAIN_JS} not found (run npm run build)`);
      continue;
    }
    const tollgate = await startTollgate(upstreamPort, { workers: n, spreading });
    const label = `tollgate ×${n}${spreading === 'cluster' ? ' (cluster)' : ''}`;
    targets.push({ id, label, url: `http://127.0.0.1:${tollgate.proxyPort}/`, headers: host });
  }
  return targets;
}

/** The every-core figures (docs/workers.md): Tollgate with N workers against its references. */
function workerRatios(byId: (id: TargetId) => TargetSummary | undefined, n: number): Array<Ratio | null> {
  return [
    ratio(`tollgate(${n}) / undici-minimal(${n})`, byId('tollgate-workers'), byId('undici-minimal-workers'), {
      goal: 0.9,
    }),
    ratio(`tollgate(${n}) / tollgate(1)`, byId('tollgate-workers'), byId('tollgate'), { goal: 1.2 }),
    ratio(`tollgate(${n}) / nginx(${n})`, byId('tollgate-workers'), byId('nginx-workers'), {
      note: 'the throughput question: Node against nginx, both on every core',
    }),
    ratio(
      `undici-minimal(${n}) / undici-minimal(1)`,
      byId('undici-minimal-workers'),
      byId('undici-minimal'),
      {
        note: 'what N Node processes gain here, the load generator sharing the cores',
      },
    ),
    ratio(`tollgate(${n}) cluster / reuseport`, byId('tollgate-workers-cluster'), byId('tollgate-workers'), {
      note: "the cluster module's round-robin against the kernel spreading connections",
    }),
  ];
}

async function measure(
  generator: LoadGenerator,
  settings: Settings,
  targets: Target[],
): Promise<Map<TargetId, LoadResult[]>> {
  const load = (target: Target, seconds: number): Promise<LoadResult> =>
    generator.run({
      url: target.url,
      headers: target.headers,
      seconds,
      connections: settings.connections,
      threads: settings.threads,
    });

  if (settings.warmupSeconds > 0) {
    for (const target of targets) {
      process.stdout.write(`warm-up ${target.label} (${settings.warmupSeconds}s)\n`);
      await load(target, settings.warmupSeconds);
    }
  }
  const results = new Map<TargetId, LoadResult[]>(targets.map((target) => [target.id, []]));
  for (let round = 1; round <= settings.rounds; round += 1) {
    for (const target of targets) {
      const result = await load(target, settings.seconds);
      results.get(target.id)?.push(result);
      const problems = result.socketErrors + result.badStatuses;
      process.stdout.write(
        `round ${round}/${settings.rounds} ${target.label.padEnd(16)} ${Math.round(result.requestsPerSecond)} req/s, p99 ${result.p99Ms.toFixed(2)} ms` +
          `${problems > 0 ? `, ${result.socketErrors} socket errors, ${result.badStatuses} bad statuses` : ''}\n`,
      );
    }
  }
  return results;
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
  const { targets, skipped } = await startTargets(settings);
  for (const reason of skipped) process.stdout.write(`skipped ${reason}\n`);
  for (const target of targets) await checkTarget(target);

  process.stdout.write(
    `${generator.name}: ${settings.connections} connections, ${settings.threads} thread(s), ` +
      `${settings.rounds} round(s) × ${settings.seconds}s per target, ${BODY_BYTES}-byte bodies, ` +
      `${settings.upstream} upstream\n`,
  );
  const results = await measure(generator, settings, targets);
  const summaries = targets.map((target) => summarise(target.id, target.label, results.get(target.id) ?? []));
  const byId = (id: TargetId): TargetSummary | undefined => summaries.find((summary) => summary.id === id);
  // The issue's figures for the two reference proxies (0.5 and 0.29 × nginx) were taken in another
  // setup; measuring them here, in the same rounds, says how hard this run's nginx is to match.
  const ratios = [
    ratio('tollgate / nginx', byId('tollgate'), byId('nginx'), { goal: 0.45 }),
    ratio('tollgate+JWT / tollgate', byId('tollgate-jwt'), byId('tollgate'), { goal: 0.9 }),
    ratio('tollgate+issuer JWT / tollgate', byId('tollgate-issuer'), byId('tollgate'), { goal: 0.9 }),
    ratio('undici-minimal / nginx', byId('undici-minimal'), byId('nginx'), {
      note: "calibration: about 0.5 in the issue's setup",
    }),
    ratio('http-proxy-3 / nginx', byId('http-proxy-3'), byId('nginx'), {
      note: "calibration: about 0.29 in the issue's setup",
    }),
    ratio('tollgate / undici-minimal', byId('tollgate'), byId('undici-minimal'), {
      goal: 0.9,
    }),
    ...workerRatios(byId, settings.workers),
  ].filter((entry): entry is Ratio => entry !== null);

  process.stdout.write(`\n${renderTable(summaries, ratios)}\n`);

  const resultsDir = join(dirname(fileURLToPath(import.meta.url)), 'results');
  mkdirSync(resultsDir, { recursive: true });
  const document = {
    date: new Date().toISOString(),
    command: `BENCH_SECONDS=${settings.seconds} BENCH_ROUNDS=${settings.rounds} BENCH_CONNECTIONS=${settings.connections} BENCH_UPSTREAM=${settings.upstream} BENCH_WORKERS=${settings.workers} BENCH_TARGETS=${settings.targets.join(',')} npm run bench`,
    environment: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      loadAverageAtStart: Number(loadAverageAtStart.toFixed(2)),
      node: process.version,
      nginx: toolVersion('nginx', ['-v']),
      loadGenerator: generator.name === 'wrk' ? toolVersion('wrk', ['-v']) : generator.name,
    },
    settings,
    targets: summaries,
    ratios,
    skipped,
  };
  writeFileSync(join(resultsDir, 'latest.json'), `${JSON.stringify(document, null, 2)}\n`);
  process.stdout.write(`\nwrote bench/results/latest.json\n`);

  const invalid = summaries.filter((summary) => summary.rounds.some((round) => round.badStatuses > 0));
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
  process.exitCode = await main();
} catch (error) {
  if (!stopping)
    process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
} finally {
  await stopAll();
}
