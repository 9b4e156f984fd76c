import type { ResourceWatch } from './resource-watch.ts';

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
  /** Every watch of the source (filled after the loop is made): nothing is translated before each listed once. */
  watches: readonly ResourceWatch[];
  /** A translation of the objects now, or null when one cannot be made yet (a named Secret not listed yet). */
  translate(): T | null;
  /** A new translation, kept as the last: report it and hand it on. */
  translated(next: T): void;
  /** Stops the source's watches and writers. */
  stop(): Promise<void>;
}

/**
 * The loop both translating sources run: any change schedules one translation on the next turn of
 * the event loop (a burst delivered together is one translation), none before every watch listed
 * once; each translation is kept, handed on, and releases whoever waits for the first.
 */
export function createTranslationLoop<T>(options: TranslationLoopOptions<T>): {
  /** Translate soon (coalesced). */
  schedule(): void;
  source: TranslatingSource<T>;
} {
  let last: T | null = null;
  let closed = false;
  let scheduled = false;
  const waiters: Array<() => void> = [];

  const run = () => {
    if (!options.watches.every((item) => item.synced)) return;
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

  return {
    schedule,
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
        await options.stop();
      },
    },
  };
}
