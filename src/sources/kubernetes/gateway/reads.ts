/**
 * Keyed reads of a translation's inputs (Services, Secrets, resolved Gateways, …), and their
 * recording: translation-cache.ts reuses what a route, Gateway or policy gave while every read it
 * made gives the same answer again (docs/benchmark.md#control-plane-at-scale).
 */

/** A keyed read: a Map, or a recording of one. */
export interface Lookup<V> {
  get(key: string): V | undefined;
  has(key: string): boolean;
}

/** `source`, noting into `seen` every key read and what it gave (undefined: absent). */
export function recording<V>(source: Lookup<V>, seen: Map<string, V | undefined>): Lookup<V> {
  const read = (key: string) => {
    const value = source.get(key);
    seen.set(key, value);
    return value;
  };
  return { get: read, has: (key) => read(key) !== undefined };
}

/** True when every key of `seen` still gives the very same object (or is still absent). */
export function sameReads<V>(source: Lookup<V>, seen: ReadonlyMap<string, V | undefined>): boolean {
  for (const [key, value] of seen) if (source.get(key) !== value) return false;
  return true;
}
