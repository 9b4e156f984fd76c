/**
 * Cores for the paced run (docs/benchmark.md, "Paced run on pinned cores"): the proxy under test
 * alone on core 0, the load generator and the upstream on the others. Unpinned, on a small machine
 * the scheduler puts wrk, the upstream and the proxy on the same core now and then, and the proxy's
 * p99 then measures that queueing rather than the proxy; pinned, a stall in the tail is the
 * proxy's own (a GC pause, a long task). `taskset` (util-linux) changes the affinity of every thread
 * of the running processes; threads started later inherit it.
 */
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { treePids } from './cpu.ts';

export interface CorePlan {
  /** The proxy's core list, as taskset reads it ("0"). */
  readonly proxy: string;
  /** Everything else: load generator and upstream ("1" on two cores, "1-15" on sixteen). */
  readonly rest: string;
  /** Every core, to give the processes back their affinity after the paced run. */
  readonly all: string;
}

/** The plan, or why there is none (one core, no taskset, or switched off with BENCH_PACED_PIN=0). */
export function corePlan(env = process.env): CorePlan | { none: string } {
  if (env.BENCH_PACED_PIN === '0') return { none: 'BENCH_PACED_PIN=0' };
  const cores = availableParallelism();
  if (cores < 2) return { none: 'one core' };
  if (spawnSync('taskset', ['-V']).status !== 0) return { none: 'taskset (util-linux) not found' };
  const last = cores - 1;
  return { proxy: '0', rest: last === 1 ? '1' : `1-${last}`, all: `0-${last}` };
}

/** Sets the affinity of every thread of every process in the trees below `roots`. */
export function pinTrees(roots: readonly number[], cores: string): void {
  for (const pid of treePids(roots)) {
    // -a: all threads of the process (Node's libuv and V8 threads, nginx's workers are processes).
    const result = spawnSync('taskset', ['-a', '-p', '-c', cores, String(pid)], { encoding: 'utf8' });
    // A process that ended in between is no error; any other failure would make the run unpinned.
    if (result.status !== 0 && spawnSync('kill', ['-0', String(pid)]).status === 0)
      throw new Error(`taskset could not pin ${pid} to ${cores}: ${result.stderr.trim()}`);
  }
}
