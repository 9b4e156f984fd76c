/**
 * Decides WHEN watched files are read after change events (docs/reload.md#how-fast).
 *
 * A short quiet period lets a burst (an editor's truncate then write, the kubelet's several renames)
 * settle into one read of complete files. A quiet period alone starves: a directory that never goes
 * quiet (a log file growing beside the config, swaps every 100 ms) would postpone the read forever.
 * So a pending change also has a deadline counted from its FIRST event, which later events never
 * move. Checks never overlap; an event during a check makes another one follow it.
 */
export interface CheckScheduler {
  /** A relevant change event: check after `quietMs` without events, and at most `maxWaitMs` after the first. */
  notify(reason: string): void;
  /** Check as soon as no check is running (the poll, SIGHUP): no waiting for quiet. */
  checkNow(reason: string): void;
  /** Resolves once nothing is pending or running. */
  idle(): Promise<void>;
  /** Cancels what is pending and waits for a running check. */
  close(): Promise<void>;
}

export interface CheckSchedulerOptions {
  quietMs: number;
  maxWaitMs: number;
  /** Reads the files; receives the reasons gathered since the last check, comma-separated. */
  check(reasons: string): Promise<void>;
}

export function createCheckScheduler(options: CheckSchedulerOptions): CheckScheduler {
  const { quietMs, check } = options;
  const { maxWaitMs } = options;
  let quietTimer: NodeJS.Timeout | null = null;
  let deadlineTimer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  // A timer came due while a check was running: run again the moment it finishes.
  let dueAfterRun = false;
  let closed = false;
  const reasons = new Set<string>();
  let idleWaiters: Array<() => void> = [];

  const isIdle = () => quietTimer === null && deadlineTimer === null && running === null && !dueAfterRun;

  const wakeIdleWaiters = () => {
    if (!isIdle()) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const wake of waiters) wake();
  };

  const clearTimers = () => {
    if (quietTimer !== null) clearTimeout(quietTimer);
    if (deadlineTimer !== null) clearTimeout(deadlineTimer);
    quietTimer = null;
    deadlineTimer = null;
  };

  const run = () => {
    const why = [...reasons].join(', ');
    reasons.clear();
    running = check(why)
      .catch(() => {
        // check() reports its own failures; the scheduler only has to keep going.
      })
      .finally(() => {
        running = null;
        if (dueAfterRun && !closed) {
          dueAfterRun = false;
          run();
        }
        wakeIdleWaiters();
      });
  };

  const due = () => {
    clearTimers();
    if (closed) return wakeIdleWaiters();
    if (running !== null) {
      dueAfterRun = true;
      return;
    }
    run();
  };

  const timer = (ms: number) => {
    const handle = setTimeout(due, ms);
    handle.unref();
    return handle;
  };

  return {
    notify(reason) {
      if (closed) return;
      reasons.add(reason);
      if (dueAfterRun) return; // already due: the check right after the running one covers it
      deadlineTimer ??= timer(maxWaitMs);
      if (quietTimer !== null) clearTimeout(quietTimer);
      quietTimer = timer(quietMs);
    },
    checkNow(reason) {
      if (closed) return;
      reasons.add(reason);
      due();
    },
    idle: () =>
      isIdle()
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            idleWaiters.push(resolve);
          }),
    async close() {
      closed = true;
      dueAfterRun = false;
      clearTimers();
      if (running !== null) await running;
      wakeIdleWaiters();
    },
  };
}
