import type { Logger } from '../../log.ts';

/** What changed since the last rebuild. */
export interface RebuildCause {
  /** Sources whose routes changed (`ingresses (12)`, ...): the table is compiled in full. */
  readonly sources: ReadonlySet<string>;
  /** Service references (serviceRefKey) whose ready endpoints changed. */
  readonly services: ReadonlySet<string>;
}

export interface RebuildOutcome {
  routes: number;
  servers: number;
  /** Only the routes of the changed Services were rebuilt. */
  partial: boolean;
}

export interface Rebuilds {
  request(change: { source?: string; services?: ReadonlySet<string> }): void;
  /** A rebuild is waiting or running. */
  pending(): boolean;
  /** Resolves once no rebuild is waiting (at once when none is). */
  idle(): Promise<void>;
  close(): void;
}

export interface RebuildOptions {
  logger: Logger;
  /** Null: nothing was swapped (the change was refused, and said so). */
  rebuild(cause: RebuildCause): RebuildOutcome | null;
  /** The longest wait between two rebuilds under a steady stream of changes (default 500 ms). */
  maxGapMs?: number;
  now?: () => number;
}

/**
 * Coalesces the Kubernetes side's changes into rebuilds of the routing table (docs/kubernetes.md):
 * a change after a quiet period is rebuilt at once (the next turn of the event loop, so that a burst
 * delivered together is one rebuild); while changes keep coming, the next rebuild waits twice as long
 * as the last one took (at most `maxGapMs`), so a flood of events (a rollout, a relist of thousands
 * of objects) costs at most about a third of a core and each change is still live well within the
 * 1 s the contract allows. Everything waiting is folded into that one rebuild, whose log line counts
 * what it carried rather than listing it (and names no config identity: computing one hashes the
 * whole config; /readyz shows it).
 */
export function createRebuilds(options: RebuildOptions): Rebuilds {
  const { logger } = options;
  const now = options.now ?? (() => performance.now());
  const maxGapMs = options.maxGapMs ?? 500;
  let sources = new Set<string>();
  let services = new Set<string>();
  let scheduled = false;
  let running = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let nextAllowed = 0;
  const idleWaiters: Array<() => void> = [];

  const run = () => {
    timer = undefined;
    scheduled = false;
    if (closed) return;
    const cause: RebuildCause = { sources, services };
    sources = new Set();
    services = new Set();
    const started = now();
    running = true;
    try {
      const outcome = options.rebuild(cause);
      const tookMs = now() - started;
      if (outcome !== null)
        logger.info(
          {
            sources: [...cause.sources],
            services_changed: cause.services.size,
            routes: outcome.routes,
            servers: outcome.servers,
            partial: outcome.partial,
            took_ms: Math.round(tookMs),
          },
          'kubernetes changes applied; routing table rebuilt',
        );
    } catch (error) {
      // Compiling a validated config cannot fail; should it, the last table keeps serving.
      logger.error({ error: (error as Error).message }, 'routing table rebuild failed; the last one serves');
    } finally {
      running = false;
    }
    const end = now();
    nextAllowed = end + Math.min(2 * (end - started), maxGapMs);
    if (sources.size > 0 || services.size > 0) schedule();
    else for (const resolve of idleWaiters.splice(0)) resolve();
  };

  const schedule = () => {
    if (scheduled || closed) return;
    scheduled = true;
    const wait = nextAllowed - now();
    if (wait <= 0) setImmediate(run);
    else timer = setTimeout(run, wait);
  };

  return {
    request(change) {
      if (change.source !== undefined) sources.add(change.source);
      for (const key of change.services ?? []) services.add(key);
      if (!running) schedule();
    },
    pending: () => scheduled || running,
    idle: () =>
      new Promise<void>((resolve) => {
        if (!scheduled && !running) resolve();
        else idleWaiters.push(resolve);
      }),
    close() {
      closed = true;
      clearTimeout(timer);
      for (const resolve of idleWaiters.splice(0)) resolve();
    },
  };
}
