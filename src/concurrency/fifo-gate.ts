/**
 * At most `limit` holders at once; the rest wait in a first-in, first-out queue of at most
 * `maxWaiting` entries, each for at most its own time. A place given back goes straight to the oldest
 * waiter. Callback-based, so a free place costs a counter increment (no promise, no closure); the
 * callers add what is their own (a promise, a deadline).
 */
interface Waiter {
  done: (entered: boolean) => void;
  timer: NodeJS.Timeout | undefined;
}

export class FifoGate {
  readonly #limit: number;
  readonly #maxWaiting: number;
  #inFlight = 0;
  readonly #waiters: Waiter[] = [];

  constructor(limit: number, maxWaiting = Number.POSITIVE_INFINITY) {
    this.#limit = limit;
    this.#maxWaiting = maxWaiting;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  /** A place now (the holder must `leave()`), or false when every place is taken or others wait. */
  tryEnter(): boolean {
    if (this.#inFlight >= this.#limit || this.#waiters.length > 0) return false;
    this.#inFlight++;
    return true;
  }

  /**
   * A place now or in turn: `done(true)` once entered (the holder must `leave()`), `done(false)` at
   * once when the queue is full, or after `timeoutMs` without a place (the waiter leaves the queue).
   * Without `timeoutMs` it waits as long as it takes. `done` runs exactly once.
   */
  wait(done: (entered: boolean) => void, timeoutMs?: number): void {
    if (this.tryEnter()) {
      done(true);
      return;
    }
    if (this.#waiters.length >= this.#maxWaiting) {
      done(false);
      return;
    }
    const waiter: Waiter = { done, timer: undefined };
    if (timeoutMs !== undefined)
      waiter.timer = setTimeout(() => {
        const index = this.#waiters.indexOf(waiter);
        if (index !== -1) this.#waiters.splice(index, 1);
        done(false);
      }, timeoutMs);
    this.#waiters.push(waiter);
  }

  /** Gives a place back; the oldest waiter, if any, takes it. */
  leave(): void {
    this.#inFlight--;
    const waiter = this.#waiters.shift();
    if (waiter === undefined) return;
    clearTimeout(waiter.timer);
    this.#inFlight++;
    waiter.done(true);
  }
}
