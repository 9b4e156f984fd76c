/**
 * Compares two creation times in ms, oldest first; an unknown time is +Infinity (last). Two equal
 * times, two unknown ones included, compare 0, so the caller's tie-break (namespace/name, or the
 * order given) decides: `Infinity - Infinity` is NaN, which a sort reads as neither order.
 */
export function olderFirst(a: number, b: number): number {
  return a === b ? 0 : a < b ? -1 : 1;
}
