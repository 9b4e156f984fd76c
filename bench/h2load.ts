/**
 * h2load (Debian `nghttp2-client`) as a load generator, for the HTTP/2 targets and their HTTP/1.1
 * twin over the same TLS listener: one tool for both, so the ratio compares protocols, not tools.
 * The same in-flight requests either way: `connections` HTTP/1.1 connections with one request each,
 * or connections / streams HTTP/2 connections with `streams` concurrent streams each. h2load reports
 * mean latency, not percentiles, so p50/p99/p99.9 stay empty for these targets.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadGenerator, LoadResult, LoadSettings } from './load.ts';
import { runTimeoutMs } from './load.ts';
import { runToCompletion } from './processes.ts';

export function h2loadBinary(): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir !== '' && existsSync(join(dir, 'h2load'))) return join(dir, 'h2load');
  }
  return null;
}

/** Streams per HTTP/2 connection ("several streams per connection"). */
export const H2_STREAMS = 8;

/** `extra` arguments go before the URL (e.g. `-d <file>` to POST a body, as the gRPC targets do). */
export function h2load(
  binary: string,
  protocol: 'h2' | 'http/1.1',
  extra: readonly string[] = [],
): LoadGenerator {
  return {
    name: `h2load (${protocol})`,
    async run(settings: LoadSettings): Promise<LoadResult> {
      const h2 = protocol === 'h2';
      const connections = h2
        ? Math.max(1, Math.round(settings.connections / H2_STREAMS))
        : settings.connections;
      const args = [
        '-D',
        String(settings.seconds),
        '-c',
        String(connections),
        '-t',
        String(Math.min(settings.threads, connections)),
        '-m',
        String(h2 ? H2_STREAMS : 1),
        ...(h2 ? [] : ['--h1']),
      ];
      for (const [name, value] of Object.entries(settings.headers)) {
        // h2load names the host with :authority (it becomes Host on HTTP/1.1).
        args.push('-H', name === 'host' ? `:authority: ${value}` : `${name}: ${value}`);
      }
      args.push(...extra, settings.url);
      const stdout = await runToCompletion(binary, args, { timeoutMs: runTimeoutMs(settings) + 10_000 });
      return parseH2load(stdout);
    },
  };
}

export function parseH2load(stdout: string): LoadResult {
  const finished = /finished in ([\d.]+)(m?s), ([\d.]+) req\/s/.exec(stdout);
  const requests =
    /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(
      stdout,
    );
  const statuses = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(stdout);
  if (!finished || !requests || !statuses) throw new Error(`h2load printed no report:\n${stdout}`);
  const [, , , done, , , errored, timeout] = requests.map(Number);
  return {
    requestsPerSecond: Number(finished[3]),
    p50Ms: Number.NaN,
    p99Ms: Number.NaN,
    p999Ms: Number.NaN,
    requests: done ?? 0,
    socketErrors: (errored ?? 0) + (timeout ?? 0),
    badStatuses: Number(statuses[3]) + Number(statuses[4]),
  };
}
