import { FifoGate } from '../../concurrency/fifo-gate.ts';

/**
 * Runs at most `max` tasks at once, the rest in order as earlier ones end. Status writes go through
 * one: a start with thousands of Ingresses would otherwise send thousands of requests to the API
 * server at the same moment, each on its own new connection, and starve the lists Tollgate waits on.
 */
export function createLimiter(max: number): <T>(task: () => Promise<T>) => Promise<T> {
  // No bound and no timeout: every status write is made in its turn.
  const gate = new FifoGate(max);
  const leave = () => gate.leave();
  return <T>(task: () => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      gate.wait(() => {
        let pending: Promise<T>;
        try {
          pending = task();
        } catch (error) {
          pending = Promise.reject(error);
        }
        pending.then(resolve, reject).finally(leave);
      });
    });
}
