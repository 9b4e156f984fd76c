/**
 * When to replace a dead worker, and when to call it a crash loop (docs/workers.md). Times are
 * passed in (milliseconds, any monotonic origin), so the policy is plain arithmetic to test.
 */
export interface RestartPolicy {
  /** Delay before the first replacement; doubled for every further crash in a row. */
  initialDelayMs: number;
  maxDelayMs: number;
  /** A worker serving this long is healthy again: the next crash starts the backoff over. */
  stableAfterMs: number;
  /** This many crashes in a row, with no stable period between them, is a crash loop. */
  crashLoopAfter: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  initialDelayMs: 100,
  maxDelayMs: 10_000,
  stableAfterMs: 10_000,
  crashLoopAfter: 3,
};

/** One worker slot's crash history. */
export class CrashHistory {
  #crashesInARow = 0;
  #servingSince: number | null = null;
  readonly #policy: RestartPolicy;

  constructor(policy: RestartPolicy = DEFAULT_RESTART_POLICY) {
    this.#policy = policy;
  }

  /** The slot's worker started serving. */
  serving(now: number): void {
    this.#servingSince = now;
  }

  /** The slot's worker died unexpectedly. Returns how long to wait before forking its replacement. */
  crashed(now: number): number {
    if (this.#wasStable(now)) this.#crashesInARow = 0;
    this.#servingSince = null;
    this.#crashesInARow += 1;
    const { initialDelayMs, maxDelayMs } = this.#policy;
    return Math.min(maxDelayMs, initialDelayMs * 2 ** (this.#crashesInARow - 1));
  }

  get crashesInARow(): number {
    return this.#crashesInARow;
  }

  /**
   * True from the crash that makes the loop until a replacement has served for `stableAfterMs`:
   * readiness stays off through that window instead of flapping with each short-lived worker.
   */
  crashLooping(now: number): boolean {
    return this.#crashesInARow >= this.#policy.crashLoopAfter && !this.#wasStable(now);
  }

  #wasStable(now: number): boolean {
    return this.#servingSince !== null && now - this.#servingSince >= this.#policy.stableAfterMs;
  }
}
