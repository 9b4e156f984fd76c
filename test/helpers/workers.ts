import type { RunningTollgate } from './tollgate.ts';

/**
 * Reading a Tollgate with workers (docs/workers.md) from the outside: which worker processes are
 * running and which one answered, from the log lines every worker writes with its `worker` pid.
 */

/** Pids of the workers that said they serve and have not been reported gone since. */
export function liveWorkers(tollgate: RunningTollgate): number[] {
  const live = new Set<number>();
  for (const line of tollgate.logs()) {
    if (line.msg === 'worker serving') live.add(Number(line.worker));
    if (line.msg === 'worker exited; replacing it' || line.msg === 'worker exited')
      live.delete(Number(line.worker));
  }
  return [...live];
}

/** How many access lines each worker pid wrote. */
export function accessLinesByWorker(tollgate: RunningTollgate): Map<number, number> {
  const counts = new Map<number, number>();
  for (const line of tollgate.logs()) {
    if (line.msg !== 'access') continue;
    const worker = Number(line.worker);
    counts.set(worker, (counts.get(worker) ?? 0) + 1);
  }
  return counts;
}

/** The value of one series in a Prometheus text exposition, or undefined when absent. */
export function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Sum of every series of a family whose labels include all of `labels` (e.g. `status="200"`). */
export function sumOf(text: string, family: string, ...labels: string[]): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${family}{`) && !line.startsWith(`${family} `)) continue;
    if (labels.every((label) => line.includes(label))) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/**
 * Generous bound for a set of processes to start or a worker to be replaced: each is a whole Node
 * process, and tests share two cores with other work. Only an upper bound: every wait ends on the event.
 */
export const PROCESS_START_MS = 60_000;
