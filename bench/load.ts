/**
 * The load generator: wrk (C, cheap per request, so it takes little CPU away from the proxy under
 * test on a small box), or autocannon when wrk is not installed. Both are driven with the same
 * settings and reduced to one LoadResult.
 */
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runToCompletion } from './processes.ts';

export interface LoadSettings {
  url: string;
  headers: Record<string, string>;
  seconds: number;
  connections: number;
  threads: number;
  /**
   * Paced run: each connection waits this long after every answer before its next request, so the
   * rate stays near connections / (pause + latency) whatever the target could do at most. 0 or
   * absent: closed-loop, as fast as the target answers.
   */
  pauseMs?: number;
  /** Cores the load generator runs on (a taskset core list, bench/pinning.ts); absent: any. */
  cores?: string;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** p99.9: where event-loop stalls show first (the paced run reports it). */
  p999Ms: number;
  requests: number;
  /** Connect/read/write errors and timeouts. */
  socketErrors: number;
  /** Responses outside 2xx/3xx: any of these makes the run meaningless (e.g. 401 on the JWT route). */
  badStatuses: number;
}

export interface LoadGenerator {
  readonly name: string;
  run(settings: LoadSettings): Promise<LoadResult>;
}

const benchDir = dirname(fileURLToPath(import.meta.url));
const WRK_REPORT_SCRIPT = join(benchDir, 'wrk-report.lua');

function findOnPath(binary: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir !== '' && existsSync(join(dir, binary))) return join(dir, binary);
  }
  return null;
}

function titleCase(headerName: string): string {
  return headerName.replace(
    /(^|-)([a-z])/g,
    (_, dash: string, letter: string) => dash + letter.toUpperCase(),
  );
}

interface WrkReport {
  requests: number;
  duration_us: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latency_us: { p50: number; p99: number; p999: number };
}

function wrk(binary: string): LoadGenerator {
  return {
    name: 'wrk',
    async run(settings) {
      const args = [
        `-t${settings.threads}`,
        `-c${settings.connections}`,
        `-d${settings.seconds}s`,
        '--timeout',
        '5s',
        '-s',
        WRK_REPORT_SCRIPT,
      ];
      // wrk adds its own `Host` unless one spelt exactly so is given; two Host headers would be a 400.
      for (const [name, value] of Object.entries(settings.headers))
        args.push('-H', `${titleCase(name)}: ${value}`);
      args.push(settings.url);
      const command = settings.cores === undefined ? binary : 'taskset';
      if (settings.cores !== undefined) args.unshift('-c', settings.cores, binary);
      const stdout = await runToCompletion(command, args, {
        env: { ...process.env, WRK_PAUSE_MS: String(settings.pauseMs ?? 0) },
        timeoutMs: runTimeoutMs(settings),
      });
      const line = stdout.split('\n').find((candidate) => candidate.startsWith('WRK_JSON '));
      if (line === undefined) throw new Error(`wrk printed no report:\n${stdout}`);
      const report = JSON.parse(line.slice('WRK_JSON '.length)) as WrkReport;
      const { errors } = report;
      return {
        requestsPerSecond: report.requests / (report.duration_us / 1e6),
        p50Ms: report.latency_us.p50 / 1000,
        p99Ms: report.latency_us.p99 / 1000,
        p999Ms: report.latency_us.p999 / 1000,
        requests: report.requests,
        socketErrors: errors.connect + errors.read + errors.write + errors.timeout,
        badStatuses: errors.status,
      };
    },
  };
}

interface AutocannonReport {
  requests: { total: number };
  latency: { p50: number; p99: number; p99_9?: number };
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
}

/** Fallback only: autocannon runs on Node and competes harder with the proxy for CPU than wrk. */
function autocannon(script: string): LoadGenerator {
  return {
    name: 'autocannon',
    async run(settings) {
      if ((settings.pauseMs ?? 0) > 0) throw new Error('autocannon cannot pace per connection; install wrk');
      const args = ['--json', '-c', String(settings.connections), '-d', String(settings.seconds)];
      if (settings.threads > 1) args.push('-w', String(settings.threads));
      for (const [name, value] of Object.entries(settings.headers)) args.push('-H', `${name}=${value}`);
      args.push(settings.url);
      // Run with this Node, not the script's `#!/usr/bin/env node` (system node may be missing or old).
      const report = JSON.parse(
        await runToCompletion(process.execPath, [script, ...args], { timeoutMs: runTimeoutMs(settings) }),
      ) as AutocannonReport;
      return {
        requestsPerSecond: report.requests.total / report.duration,
        p50Ms: report.latency.p50,
        p99Ms: report.latency.p99,
        p999Ms: report.latency.p99_9 ?? Number.NaN,
        requests: report.requests.total,
        socketErrors: report.errors + report.timeouts,
        badStatuses: report.non2xx,
      };
    },
  };
}

/** A run that has not ended this long after its duration is killed: the bench always ends by itself. */
export function runTimeoutMs(settings: LoadSettings): number {
  return (settings.seconds + 30) * 1000;
}

export function findLoadGenerator(): LoadGenerator | null {
  const wrkBinary = findOnPath('wrk');
  if (wrkBinary !== null) return wrk(wrkBinary);
  const local = join(benchDir, '..', 'node_modules', '.bin', 'autocannon');
  if (existsSync(local)) return autocannon(realpathSync(local));
  return null;
}
