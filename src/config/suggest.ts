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
