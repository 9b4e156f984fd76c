/**
 * The identity comparison the control plane's caches rest on (docs/benchmark.md#control-plane-at-scale):
 * a list whose items are the very same objects, in the same order, is unchanged. A plain loop: it
 * runs over every host or route on each change.
 */
export function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let index = 0; index < a.length; index += 1) if (a[index] !== b[index]) return false;
  return true;
}
