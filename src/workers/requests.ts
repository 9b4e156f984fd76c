import type { Worker } from 'node:cluster';

/** How long the primary waits for the answer of a worker that does not answer, per request. */
export const WORKER_ANSWER_TIMEOUT_MS = 1_000;

/**
 * A question the primary asks every worker at once (their metrics, a cache purge): each answer is
 * matched to its request by id; a worker that exits is no longer waited for, one that is silent
 * for WORKER_ANSWER_TIMEOUT_MS is counted as missing.
 */
export class WorkerRequests<Answer> {
  #next = 0;
  readonly #waiters = new Map<number, { waiting: Set<Worker>; answers: Answer[]; done: () => void }>();

  /** Sends request `id` to each worker (`send`) and resolves with the answers that came in time. */
  ask(
    workers: readonly Worker[],
    send: (worker: Worker, id: number) => void,
  ): Promise<{ answers: Answer[]; missing: number }> {
    return new Promise((resolve) => {
      const id = ++this.#next;
      const waiter = { waiting: new Set(workers), answers: [] as Answer[], done: () => {} };
      const timer = setTimeout(() => waiter.done(), WORKER_ANSWER_TIMEOUT_MS);
      waiter.done = () => {
        clearTimeout(timer);
        this.#waiters.delete(id);
        resolve({ answers: waiter.answers, missing: waiter.waiting.size });
      };
      if (waiter.waiting.size === 0) return waiter.done();
      this.#waiters.set(id, waiter);
      for (const worker of workers) send(worker, id);
    });
  }

  /** `worker` answered request `id` (an answer to nothing it was asked is dropped). */
  answer(id: number, worker: Worker, answer: Answer): void {
    const waiter = this.#waiters.get(id);
    if (waiter === undefined || !waiter.waiting.delete(worker)) return;
    waiter.answers.push(answer);
    if (waiter.waiting.size === 0) waiter.done();
  }

  /** `worker` exited: no request waits for it any more. */
  forget(worker: Worker): void {
    for (const waiter of [...this.#waiters.values()]) {
      waiter.waiting.delete(worker);
      if (waiter.waiting.size === 0) waiter.done();
    }
  }
}
