/**
 * CPU time of a target's process tree, read from /proc: user + system ticks of every process below the
 * target's root processes (nginx master and workers, HAProxy's threads, Tollgate's primary and
 * workers). Sampled before and after a measured run, the difference over the requests the load
 * generator completed is the target's CPU per request, a figure that, unlike requests/s, does not
 * depend on how much of the machine the load generator and the upstream took (docs/benchmark.md).
 *
 * Linux only: elsewhere `cpuSupported()` is false and the bench reports no CPU column.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's utime/stime (almost always 100). */
const TICKS_PER_SECOND = (() => {
  const answer = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const value = Number(answer.stdout?.trim());
  return Number.isInteger(value) && value > 0 ? value : 100;
})();

export function cpuSupported(): boolean {
  return existsSync('/proc/self/stat');
}

interface ProcStat {
  ppid: number;
  /** utime + stime of the whole thread group, in ticks. */
  ticks: number;
}

function readStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // gone between the directory listing and the read
  }
  // The command name (field 2) is in parentheses and may itself hold spaces or parentheses: the
  // fields after the last ')' are the fixed ones (state, ppid, … utime is field 14, stime 15).
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
}

/** Every live process in the trees below `roots` (the roots included). */
function treeStats(roots: readonly number[]): Map<number, ProcStat> {
  const all = new Map<number, ProcStat>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const stat = readStat(pid);
    if (stat !== null) all.set(pid, stat);
  }
  const inTree = new Map<number, ProcStat>();
  const pending = roots.filter((pid) => all.has(pid));
  while (pending.length > 0) {
    const pid = pending.pop() as number;
    const stat = all.get(pid);
    if (stat === undefined || inTree.has(pid)) continue;
    inTree.set(pid, stat);
    for (const [child, childStat] of all) if (childStat.ppid === pid) pending.push(child);
  }
  return inTree;
}

/** The pids of every live process in the trees below `roots` (the roots included). */
export function treePids(roots: readonly number[]): number[] {
  return [...treeStats(roots).keys()];
}

/**
 * Starts counting; the returned function gives the CPU seconds the trees used since. A process that
 * starts in between counts from zero; one that ends in between loses its share (no target forks or
 * loses processes during a run, so neither happens in practice).
 */
export function startCpuMeter(roots: readonly number[]): () => number {
  const before = treeStats(roots);
  return () => {
    let ticks = 0;
    for (const [pid, stat] of treeStats(roots)) ticks += stat.ticks - (before.get(pid)?.ticks ?? 0);
    return ticks / TICKS_PER_SECOND;
  };
}

/**
 * A CPU meter for one process with nanosecond resolution: the run time the scheduler accounted to
 * each of its threads (`/proc/<pid>/task/<tid>/schedstat`, first field), summed. /proc's `stat`
 * counts clock ticks (10 ms here), too coarse to tell one control-plane change of a few milliseconds
 * from the next; a thread that ends between two readings takes its time with it (the proxy's
 * threads live as long as it does). `main`: the main thread alone, for telling when the process is
 * quiet (a profiler's sampling thread, `--cpu-prof`, never is). Seconds since the meter started.
 */
export function startThreadCpuMeter(pid: number, threads: 'all' | 'main' = 'all'): () => number {
  const read = (): number => {
    let nanoseconds = 0;
    let tasks: string[];
    try {
      // The main thread's id is the process's: where JavaScript, and so the control plane, runs.
      tasks = threads === 'main' ? [String(pid)] : readdirSync(`/proc/${pid}/task`);
    } catch {
      return 0;
    }
    for (const tid of tasks) {
      try {
        nanoseconds += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ', 1)[0]);
      } catch {
        // The thread ended while listing: its time is gone with it.
      }
    }
    return nanoseconds;
  };
  const before = read();
  return () => (read() - before) / 1e9;
}
