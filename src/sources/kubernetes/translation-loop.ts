import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../../log.ts';
import { type ResourceWatch, type StartWatch, type WatchTuning, watchStarter } from './resource-watch.ts';
import { createWatchHealth, prometheusWatchMetrics } from './watch-health.ts';

/**
 * What the provider sees of a translating source (ingress/source.ts, gateway/source.ts): the last
 * translation, readiness, and a way to ask for a new one.
 */
export interface TranslatingSource<T> {
  /** The last translation, or null before the first. */
  translation(): T | null;
  /** What the translation reads besides the source's own objects changed (upstreams.yaml, the other source's claims): translate again. */
  baseChanged(): void;
  synced(): boolean;
  whenSynced(): Promise<void>;
  close(): Promise<void>;
}

export interface TranslationLoopOptions<T> {
  kubeConfig: KubeConfig;
  logger: Logger;
  tuning?: Partial<WatchTuning> | undefined;
  /** A translation of the objects now, or null when one cannot be made yet (a named Secret not listed yet). */
  translate(): T | null;
  /** A new translation, kept as the last: report it and hand it on. */
  translated(next: T): void;
  /** Stops what the source started besides the watches it tracks (named-object watches, writers). */
  stop(): Promise<unknown>;
}

/**
 * The skeleton both translating sources share: their watches (health in the watch metrics, every
 * change scheduling a translation), and the loop: one translation on the next turn of the event loop
 * for a burst delivered together, none before every tracked watch listed once; each translation is
 * kept, handed on, and releases whoever waits for the first.
 */
export function createTranslationLoop<T>(options: TranslationLoopOptions<T>): {
  /** Starts a watch whose changes translate again (track it, or hand it to a SecretWatches). */
  watch: StartWatch;
  /** Watches nothing is translated before (each listed once); stopped on close. */
  track(...watches: ResourceWatch[]): void;
  source: TranslatingSource<T>;
} {
  const watches: ResourceWatch[] = [];
  let last: T | null = null;
  let closed = false;
  let scheduled = false;
  const waiters: Array<() => void> = [];

  const run = () => {
    if (!watches.every((item) => item.synced)) return;
    const next = options.translate();
    if (next === null) return;
    last = next;
    options.translated(next);
    for (const resolve of waiters.splice(0)) resolve();
  };
  const schedule = () => {
    if (scheduled || closed) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      if (!closed) run();
    });
  };

  const watch = watchStarter({
    kubeConfig: options.kubeConfig,
    health: createWatchHealth(prometheusWatchMetrics),
    logger: options.logger,
    tuning: options.tuning,
    onChange: schedule,
  });

  return {
    watch,
    track: (...started) => {
      watches.push(...started);
    },
    source: {
      translation: () => last,
      baseChanged: schedule,
      synced: () => last !== null,
      whenSynced: () =>
        new Promise<void>((resolve) => {
          if (last !== null) resolve();
          else waiters.push(resolve);
        }),
      async close() {
        closed = true;
        await Promise.all([...watches.map((item) => item.stop()), options.stop()]);
      },
    },
  };
}
