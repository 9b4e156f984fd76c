import dns, { type LookupAddress, type LookupOptions } from 'node:dns';

/**
 * A `lookup` for net.connect that caches answers for upstream host names (docs/configuration.md
 * "Upstream connections"). dns.lookup runs on libuv's thread pool, which password hashing (scrypt)
 * also uses: under a burst of Basic-auth checks an uncached lookup can wait seconds and turn into a
 * connect timeout that ejects a healthy server. Cached answers never touch the pool; a stale entry is
 * served while one background lookup refreshes it, and dropped only when it is much older.
 */
export type LookupFunction = (
  hostname: string,
  options: LookupOptions,
  callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
) => void;

export interface DnsCacheOptions {
  /** An answer younger than this is served without a lookup (default 30 s). */
  freshMs?: number;
  /** An older answer is still served (and refreshed) up to this age (default 10 min). */
  maxStaleMs?: number;
  /** The resolver; dns.lookup unless a test injects one. */
  resolve?: (hostname: string, callback: (error: Error | null, addresses: LookupAddress[]) => void) => void;
  now?: () => number;
}

interface Entry {
  addresses: LookupAddress[];
  at: number;
  refreshing: boolean;
}

export interface DnsCache {
  lookup: LookupFunction;
  /** Cached names (for tests and to bound memory: one entry per configured host name). */
  readonly size: number;
  clear(): void;
}

const systemResolve: NonNullable<DnsCacheOptions['resolve']> = (hostname, callback) =>
  dns.lookup(hostname, { all: true }, (error, addresses) => callback(error, addresses ?? []));

export function createDnsCache(options: DnsCacheOptions = {}): DnsCache {
  const freshMs = options.freshMs ?? 30_000;
  const maxStaleMs = options.maxStaleMs ?? 600_000;
  const resolve = options.resolve ?? systemResolve;
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  /** Callers waiting on the first lookup of a name: one lookup, however many connects. */
  const pending = new Map<string, Array<(error: Error | null, addresses: LookupAddress[]) => void>>();

  function fetch(hostname: string, done: (error: Error | null, addresses: LookupAddress[]) => void): void {
    const waiting = pending.get(hostname);
    if (waiting !== undefined) {
      waiting.push(done);
      return;
    }
    pending.set(hostname, [done]);
    resolve(hostname, (error, addresses) => {
      const callbacks = pending.get(hostname) ?? [];
      pending.delete(hostname);
      if (error === null && addresses.length > 0) {
        entries.set(hostname, { addresses, at: now(), refreshing: false });
      } else {
        const entry = entries.get(hostname);
        if (entry !== undefined) entry.refreshing = false;
      }
      for (const callback of callbacks) callback(error, addresses);
    });
  }

  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    const entry = entries.get(hostname);
    const age = entry === undefined ? Number.POSITIVE_INFINITY : now() - entry.at;
    if (entry !== undefined && age <= maxStaleMs) {
      if (age > freshMs && !entry.refreshing) {
        entry.refreshing = true;
        fetch(hostname, () => {});
      }
      // Asynchronously, as dns.lookup does: net.connect attaches its listeners after calling lookup.
      process.nextTick(answer, entry.addresses, lookupOptions, callback);
      return;
    }
    fetch(hostname, (error, addresses) => {
      if (error !== null || addresses.length === 0) {
        callback(error ?? Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '');
        return;
      }
      answer(addresses, lookupOptions, callback);
    });
  };

  return {
    lookup,
    get size() {
      return entries.size;
    },
    clear: () => entries.clear(),
  };
}

/**
 * The process's cache, shared by the proxied traffic and the active health checks, so a check never
 * fails on a lookup the traffic did not need.
 */
export const processDnsCache: DnsCache = createDnsCache();

function answer(
  addresses: LookupAddress[],
  options: LookupOptions,
  callback: Parameters<LookupFunction>[2],
): void {
  const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
  const matching = family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
  if (matching.length === 0) {
    callback(Object.assign(new Error('no address of the requested family'), { code: 'ENOTFOUND' }), '');
    return;
  }
  if (options.all === true) callback(null, matching);
  else callback(null, (matching[0] as LookupAddress).address, (matching[0] as LookupAddress).family);
}
