import { normaliseHost, normaliseTarget } from '../routing/normalise.ts';

/**
 * Token scopes (docs/tokens.md): where a scoped token may be used. An entry is `host/path-prefix` or
 * `/path-prefix`, written in the same normal form the router uses for requests, so "inside the scope"
 * means exactly what "inside the route" means: normalised host, normalised path, segment boundary.
 */

export const MAX_SCOPE_ENTRIES = 16;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Well-formed UTF-16 (no lone surrogate): text that can be encoded as UTF-8. */
export function isWellFormedUnicode(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}
/** A host (253) plus a generous path; longer entries are refused before any parsing. */
const MAX_SCOPE_ENTRY_LENGTH = 1024;

export interface ScopeEntry {
  /** Normalised host, or null when the entry names a path only (any host). */
  readonly host: string | null;
  /** Normalised path prefix, no trailing slash except the root. */
  readonly prefix: string;
}

export type ParsedScopeEntry = { ok: true; entry: ScopeEntry } | { ok: false; message: string };

const refuse = (message: string): ParsedScopeEntry => ({ ok: false, message });

/**
 * Parses one scope entry. Refused rather than normalised: dot-segments, encoded slashes, a query or
 * fragment, an invalid host. A link minted for `/reports/42/../43` is a mistake worth hearing about,
 * not something to silently widen or move.
 */
export function parseScopeEntry(text: unknown): ParsedScopeEntry {
  if (typeof text !== 'string' || text === '') return refuse('must be a non-empty string');
  if (text.length > MAX_SCOPE_ENTRY_LENGTH)
    return refuse(`is longer than ${MAX_SCOPE_ENTRY_LENGTH} characters`);
  if (!isWellFormedUnicode(text)) return refuse('is not valid Unicode');
  const slash = text.indexOf('/');
  if (slash === -1) return refuse("must be 'host/path-prefix' or '/path-prefix'");
  let host: string | null = null;
  if (slash > 0) {
    const written = text.slice(0, slash);
    const hasPort = written.startsWith('[') ? !written.endsWith(']') : written.includes(':');
    host = hasPort ? null : normaliseHost(written);
    if (host === null) {
      // A port is not part of a scope: routing ignores it, so accepting one would promise a limit
      // that is not enforced.
      return refuse(`has an invalid host '${written}' (a host name or [IPv6], no port)`);
    }
  }
  const rawPath = text.slice(slash);
  if (rawPath.includes('?') || rawPath.includes('#')) return refuse('must not contain ? or #');
  for (const segment of rawPath.split('/')) {
    const decoded = segment.replace(/%2e/gi, '.');
    if (decoded === '.' || decoded === '..') return refuse('must not contain . or .. segments');
  }
  // Unicode is sent UTF-8 percent-encoded by clients: encode it the same way before normalising.
  const normalised = normaliseTarget(rawPath.replace(/[\u0080-\uffff]+/g, encodeURIComponent));
  if (!normalised.ok) {
    return refuse(
      normalised.reason === 'encoded_slash'
        ? 'must not contain an encoded slash or backslash'
        : `is not a valid path (${normalised.reason})`,
    );
  }
  const path = normalised.path;
  const prefix = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return { ok: true, entry: { host, prefix } };
}

/** The canonical text of an entry: what is signed into the token and echoed to the client. */
export function formatScopeEntry(entry: ScopeEntry): string {
  if (entry.host === null) return entry.prefix;
  return `${entry.host.includes(':') ? `[${entry.host}]` : entry.host}${entry.prefix}`;
}

export type ParsedScope = { ok: true; scope: readonly ScopeEntry[] } | { ok: false; message: string };

/** A whole `scope` list (1–16 entries); the message names the entry at fault. */
export function parseScope(value: unknown, field = 'scope'): ParsedScope {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_SCOPE_ENTRIES) {
    return { ok: false, message: `${field} must be a list of 1 to ${MAX_SCOPE_ENTRIES} strings` };
  }
  const scope: ScopeEntry[] = [];
  for (const [index, text] of value.entries()) {
    const parsed = parseScopeEntry(text);
    if (!parsed.ok) {
      const shown = typeof text === 'string' ? ` '${text.slice(0, 100)}'` : '';
      return { ok: false, message: `${field}[${index}]${shown} ${parsed.message}` };
    }
    scope.push(parsed.entry);
  }
  return { ok: true, scope: Object.freeze(scope) };
}

/** True when `path` is `prefix` or below it (segment boundary, as routing matches). */
function underPrefix(path: string, prefix: string): boolean {
  if (prefix === '/') return true;
  return (
    path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f)
  );
}

/**
 * The entry that lets a request in (the longest, when several do), or null when none does.
 * `host` and `path` are the request's normalised host and path.
 */
export function matchScope(scope: readonly ScopeEntry[], host: string, path: string): ScopeEntry | null {
  let best: ScopeEntry | null = null;
  for (const entry of scope) {
    if (entry.host !== null && entry.host !== host) continue;
    if (!underPrefix(path, entry.prefix)) continue;
    if (best === null || entry.prefix.length > best.prefix.length) best = entry;
  }
  return best;
}
