/**
 * Resident memory of a started Tollgate process (docs/benchmark.md "Memory at start"): the built
 * dist/main.js, started as the container image starts it, with one route or with the many-paths
 * table (20,000 paths), read from /proc once it is ready: VmRSS (what it holds now) and VmHWM (the
 * most it ever held, the parse's peak). Run by `npm run bench`; prints one JSON line.
 *
 * Usage: node bench/start-rss.ts [one-path|many-paths …] (default: both).
 */
import { readFileSync } from 'node:fs';
import { stopAll, stopProcess } from './processes.ts';
import { startTollgate } from './tollgate.ts';

export interface StartRss {
  rssMiB: number;
  peakRssMiB: number;
}

/** kB fields of /proc/<pid>/status, in MiB. */
function residentMiB(pid: number): StartRss {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return {
    rssMiB: Number((kb('VmRSS') / 1024).toFixed(1)),
    peakRssMiB: Number((kb('VmHWM') / 1024).toFixed(1)),
  };
}

/** The upstream is never asked: only the table's size matters. */
const UNUSED_UPSTREAM_PORT = 9;

export async function startRss(kind: 'one-path' | 'many-paths'): Promise<StartRss> {
  const tollgate = await startTollgate(UNUSED_UPSTREAM_PORT, {
    routes: kind === 'many-paths' ? 'many-paths' : 'bench',
  });
  try {
    // A moment after ready: whatever start does late (timers, the first scavenges) has happened.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const pid = tollgate.process.child.pid;
    if (pid === undefined) throw new Error('tollgate has no pid');
    return residentMiB(pid);
  } finally {
    await stopProcess(tollgate.process);
  }
}

if (import.meta.main) {
  const kinds = process.argv.slice(2);
  const result: Record<string, unknown> = {};
  try {
    for (const kind of kinds.length > 0 ? kinds : ['one-path', 'many-paths']) {
      if (kind !== 'one-path' && kind !== 'many-paths')
        throw new Error('usage: start-rss.ts [one-path|many-paths]');
      result[kind] = await startRss(kind);
    }
  } finally {
    await stopAll();
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
