/**
 * Takes a parameter out of a raw query string (without `?`), leaving every other byte of it as the
 * client sent it. Every occurrence is removed (so no copy of a token reaches the upstream or the
 * access log); the value of the first is returned, percent-decoded. A name written percent-encoded
 * (`tollgate%74oken`) counts as the same name, as it would for the upstream's parser.
 */
export function takeQueryParam(query: string, name: string): { value: string | null; rest: string } {
  if (query === '' || (!query.includes(name) && !query.includes('%'))) return { value: null, rest: query };
  // value is null only when the parameter is absent; an undecodable value comes back as ''.
  const parts = query.split('&');
  const kept: string[] = [];
  let value: string | null = null;
  let found = false;
  for (const part of parts) {
    const equals = part.indexOf('=');
    const rawName = equals === -1 ? part : part.slice(0, equals);
    if (rawName === name || (rawName.includes('%') && safeDecode(rawName) === name)) {
      if (!found) value = safeDecode(equals === -1 ? '' : part.slice(equals + 1)) ?? '';
      found = true;
    } else {
      kept.push(part);
    }
  }
  return found ? { value, rest: kept.join('&') } : { value: null, rest: query };
}

function safeDecode(text: string): string | null {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}
