/**
 * Runs at most `max` tasks at once, the rest in order as earlier ones end. Status writes go through
 * one: a start with thousands of Ingresses would otherwise send thousands of requests to the API
 * server at the same moment, each on its own new connection, and starve the lists Tollgate waits on.
 */
export function createLimiter(max: number): <T>(task: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  const next = () => {
    running -= 1;
    waiting.shift()?.();
  };
  return <T>(task: () => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      const start = () => {
        running += 1;
        let pending: Promise<T>;
        try {
          pending = task();
        } catch (error) {
          pending = Promise.reject(error);
        }
        pending.then(resolve, reject).finally(next);
      };
      if (running < max) start();
      else waiting.push(start);
    });
}
