/**
 * The known key an unknown one was most likely meant to be (`authorisation` → `authorization`), or
 * undefined when nothing is close enough to be a helpful guess.
 */
export function closestKey(unknown: string, known: readonly string[]): string | undefined {
  const word = unknown.toLowerCase();
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const distance = editDistance(word, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  if (best === undefined) return undefined;
  if (bestDistance <= Math.max(1, Math.floor(word.length / 3))) return best;
  // An abbreviation such as `tls_cert` for `tls_certificate`.
  if (word.length >= 4) return known.find((candidate) => candidate.toLowerCase().startsWith(word));
  return undefined;
}

/** How many known keys an `unknown key` message lists in full; a longer list is written once per mapping. */
const MAX_LISTED_KEYS = 8;

/**
 * The hint of an `unknown key '…'` message, one wording for every reader (the YAML files and the
 * policy readers): the key's right place when it is valid elsewhere (`misplaced`), the closest known
 * key, or the known keys. A long list is written out once per mapping: `listedAt` ("on line 12")
 * says where for the later unknown keys, and `listsKeys` tells the caller this hint wrote it.
 */
export function unknownKeyHint(
  key: string,
  known: readonly string[],
  misplaced: Readonly<Record<string, string>>,
  listedAt: string | undefined,
): { hint: string; listsKeys: boolean } {
  const elsewhere = Object.hasOwn(misplaced, key) ? misplaced[key] : undefined;
  if (elsewhere !== undefined) return { hint: elsewhere, listsKeys: false };
  const guess = closestKey(key, known);
  if (guess !== undefined) return { hint: `did you mean '${guess}'?`, listsKeys: false };
  if (known.length <= MAX_LISTED_KEYS) return { hint: `known keys: ${known.join(', ')}`, listsKeys: false };
  if (listedAt !== undefined) return { hint: `the known keys are listed ${listedAt}`, listsKeys: false };
  return { hint: `known keys: ${known.toSorted().join(', ')}`, listsKeys: true };
}

/** Levenshtein distance; config keys are short, so the simple O(n·m) table is plenty. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
