/**
 * What tracing adds to a request, alone (docs/benchmark.md#tracing-cost): the spans of a routed
 * request made, its upstream attempt's `traceparent` written, both spans ended, queued, encoded and
 * sent to the OTLP sink, with no proxy around them. On the shared 2-core VM the proxy's own CPU per
 * request moves by 2–3 × between rounds, which hides a few µs; here this build and the BENCH_BASELINE
 * build each run in a child process of their own, driven in interleaved turns, and every turn's CPU
 * (all threads, the export's HTTP included) is divided by the requests it made. A third child makes
 * the same calls on a tracing that does nothing: its turn, taken from the others' in each round, leaves
 * what tracing itself adds.
 *
 * Usage: BENCH_BASELINE=/tmp/base/dist/main.js node bench/tracing-path.ts [ratio …] (default 1 0.1)
 * BENCH_ROUNDS (default 15) turns per build and ratio; each turn makes 10,000 requests' spans, 100
 * per event-loop turn (so the export queue never overflows), then waits 50 ms for the export.
 * Both builds must have been built (`npm run build` here). BENCH_TRACING_NODE_FLAGS adds Node flags to
 * the children (`--cpu-prof --cpu-prof-dir=/tmp/prof`).
 */
import { fork } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOtlpSink } from './node-targets.ts';
import { stopAll } from './processes.ts';

const REQUESTS_PER_TURN = 10_000;
const REQUESTS_PER_TICK = 100;
const SETTLE_MS = 50;

interface TracingModule {
  startTracing(
    settings: Record<string, unknown>,
    deps: { logger: unknown; redactQuery: (query: string) => string },
  ): {
    start(request: unknown): {
      upstreamAttempt(
        request: unknown,
        server: unknown,
        headers: string[],
      ): { responded(s: number): void; end(): void };
      end(status: number): void;
    };
    shutdown(): Promise<void>;
  };
}

/** The `distDir` of the runner that makes no spans: what the harness itself costs a request. */
const HARNESS = 'harness';

type Tracing = ReturnType<TracingModule['startTracing']>;

/** A tracing that does nothing: the same calls, no work. */
function harnessOnly(): Tracing {
  const attempt = { responded() {}, end() {} };
  const trace = { upstreamAttempt: () => attempt, end() {} };
  return { start: () => trace, shutdown: async () => {} };
}

async function startBuild(
  distDir: string,
  ratio: number,
  sinkPort: number,
  logger: unknown,
): Promise<Tracing> {
  const module = (await import(join(distDir, 'observe/tracing-sdk.js'))) as TracingModule;
  return module.startTracing(
    {
      endpoint: `http://127.0.0.1:${sinkPort}`,
      protocol: 'http/protobuf',
      sampleRatio: ratio,
      serviceName: 'tollgate',
      queueSize: 2048,
      batchDelayMs: 5000,
    },
    { logger, redactQuery: (query) => query },
  );
}

/** The child: loads one build's SDK side and answers each `turn` with its CPU µs per request. */
async function child(distDir: string, ratio: number, sinkPort: number): Promise<void> {
  const silent = { info() {}, warn() {}, error() {}, debug() {} };
  const tracing = distDir === HARNESS ? harnessOnly() : await startBuild(distDir, ratio, sinkPort, silent);
  const req = { method: 'GET', headers: { host: 'bench.local' }, httpVersion: '1.1', httpVersionMajor: 1 };
  const route = { prefix: '/', auth: null };
  const server = { origin: 'http://127.0.0.1:8080' };
  const one = () => {
    const request = {
      req,
      route,
      secure: false,
      host: 'bench.local',
      clientIp: '127.0.0.1',
      path: '/',
      query: '',
      forwardQuery: '',
      startedAt: performance.now(),
      peerTrusted: false,
      trace: null,
    };
    const trace = tracing.start(request);
    const headers = ['host', 'bench.local', 'x-forwarded-for', '127.0.0.1'];
    const attempt = trace.upstreamAttempt(request, server, headers);
    attempt.responded(200);
    attempt.end();
    trace.end(200);
  };
  const tick = () => new Promise((done) => setImmediate(done));
  process.on('message', async (message) => {
    if (message === 'stop') {
      // What is queued goes to the sink first (it is stopped after every child has exited).
      await tracing.shutdown().catch(() => {});
      process.exit(0);
    }
    const before = process.cpuUsage();
    for (let made = 0; made < REQUESTS_PER_TURN; made += REQUESTS_PER_TICK) {
      for (let i = 0; i < REQUESTS_PER_TICK; i++) one();
      await tick();
    }
    await new Promise((done) => setTimeout(done, SETTLE_MS));
    const used = process.cpuUsage(before);
    process.send?.((used.user + used.system) / REQUESTS_PER_TURN);
  });
  process.send?.('ready');
}

interface Runner {
  label: string;
  ratio: number;
  turns: number[];
  turn(): Promise<number>;
  /** Resolves once the child has sent what it queued and exited. */
  stop(): Promise<void>;
}

async function startRunner(label: string, distDir: string, ratio: number, sinkPort: number): Promise<Runner> {
  const script = fileURLToPath(import.meta.url);
  const execArgv = [
    ...process.execArgv,
    ...(process.env.BENCH_TRACING_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== ''),
  ];
  const proc = fork(script, ['--child', distDir, String(ratio), String(sinkPort)], {
    stdio: 'inherit',
    execArgv,
  });
  await new Promise<void>((ready, failed) => {
    proc.once('message', () => ready());
    proc.once('exit', (code) => failed(new Error(`${label} exited (${code}) before it was ready`)));
  });
  const turns: number[] = [];
  return {
    label,
    ratio,
    turns,
    turn: () =>
      new Promise((done) => {
        proc.once('message', (perRequest) => {
          turns.push(perRequest as number);
          done(perRequest as number);
        });
        proc.send('turn');
      }),
    stop: () =>
      new Promise((exited) => {
        proc.once('exit', () => exited());
        proc.send('stop');
      }),
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

async function main(): Promise<void> {
  const baseline = process.env.BENCH_BASELINE;
  if (baseline === undefined || baseline === '') throw new Error('BENCH_BASELINE (a dist/main.js) not set');
  const ratios = process.argv.slice(2).map(Number);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 15);
  const here = resolve(dirname(fileURLToPath(import.meta.url)), '../dist');
  const sink = await startOtlpSink();
  try {
    const runners: Runner[] = [];
    const harness = await startRunner('harness alone (no spans)', HARNESS, 0, sink.port);
    for (const ratio of ratios.length > 0 ? ratios : [1, 0.1]) {
      runners.push(await startRunner(`this build, sample_ratio ${ratio}`, here, ratio, sink.port));
      runners.push(await startRunner(`baseline, sample_ratio ${ratio}`, dirname(baseline), ratio, sink.port));
    }
    const all = [harness, ...runners];
    // One warm-up turn each, not counted: the code is compiled and the queue's first batches leave.
    for (const runner of all) await runner.turn();
    for (const runner of all) runner.turns.length = 0;
    for (let round = 0; round < rounds; round++) {
      // Rotated, so neither build always follows the other.
      for (let i = 0; i < all.length; i++) await all[(i + round) % all.length]?.turn();
    }
    for (const runner of all) {
      const turns = runner.turns.map((t) => t.toFixed(2)).join(' ');
      console.log(
        `${runner.label.padEnd(28)} ${median(runner.turns).toFixed(2).padStart(7)} µs/request  (${turns})`,
      );
    }
    for (let i = 0; i < runners.length; i += 2) {
      const [after, before] = [runners[i] as Runner, runners[i + 1] as Runner];
      const perRound = after.turns.map((t, round) => t / (before.turns[round] as number));
      // What tracing itself adds: each turn less the harness's turn of the same round.
      const added = (runner: Runner) => runner.turns.map((t, round) => t - (harness.turns[round] as number));
      const addedAfter = median(added(after));
      const addedBefore = median(added(before));
      console.log(
        `sample_ratio ${after.ratio}: this build / baseline ${(median(after.turns) / median(before.turns)).toFixed(2)}` +
          ` (per round, median ${median(perRound).toFixed(2)}: ${perRound.map((r) => r.toFixed(2)).join(' ')});` +
          ` tracing adds ${addedAfter.toFixed(2)} µs against ${addedBefore.toFixed(2)} (${(addedAfter / addedBefore).toFixed(2)})`,
      );
    }
    await Promise.all(all.map((runner) => runner.stop()));
  } finally {
    await stopAll();
  }
}

if (process.argv[2] === '--child') {
  await child(process.argv[3] as string, Number(process.argv[4]), Number(process.argv[5]));
} else {
  await main();
}
