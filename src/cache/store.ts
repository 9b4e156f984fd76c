import type CachePolicy from 'http-cache-semantics';
import { LRUCache } from 'lru-cache';
import type { CacheConfig } from '../config/policy-types.ts';
import { cacheBytes } from '../observe/metrics.ts';

/** One stored response (docs/traffic.md#response-cache). */
export interface CachedResponse {
  /** Its key in its route's store: URL, identity partition and Vary values. */
  readonly key: string;
  /** Host and path?query (token parameters removed): what invalidation and purge look at. */
  readonly urlKey: string;
  /** The normalised path, for a purge by prefix. */
  readonly path: string;
  /** '' when shared by everyone allowed on the route, else the subject it belongs to. */
  readonly partition: string;
  /** The response's Vary names, and the request's values of them when it was stored. */
  readonly vary: readonly string[];
  readonly varyKey: string;
  /** RFC 9111's view of it (http-cache-semantics), with the freshness a default TTL gave. */
  readonly policy: CachePolicy;
  /** The upstream's own Cache-Control (the policy's may carry the default TTL), for the client. */
  readonly cacheControl: string | undefined;
  readonly status: number;
  readonly body: Buffer;
  /** Bytes counted against the budgets: body, headers, key and a fixed overhead. */
  readonly size: number;
}

/**
 * What an entry costs beyond its bytes: the objects around it (the policy and its parsed headers,
 * the entry, two LRU slots, the URL index, the body's ArrayBuffer). Measured at about 1.2 KiB of heap
 * for a small response (docs/benchmark.md#response-cache); counted a little above, so the budget
 * bounds the memory and not only the payload.
 */
const ENTRY_OVERHEAD_BYTES = 1536;

/** `headers`: every header map the entry keeps (the response's; the request's too when it has Vary). */
export function entrySize(
  key: string,
  headers: ReadonlyArray<Readonly<Record<string, string | string[] | undefined>>>,
  body: Buffer,
): number {
  let size = ENTRY_OVERHEAD_BYTES + key.length + body.length;
  for (const map of headers) for (const name in map) size += name.length + String(map[name] ?? '').length + 4;
  return size;
}

/** The store of one cached route: an LRU bounded by the path's max_bytes, and its entries by URL. */
class RouteStore {
  readonly lru: LRUCache<string, CachedResponse>;
  /** urlKey → keys of its entries (identity partitions, Vary variants): invalidation in O(variants). */
  readonly byUrl = new Map<string, Set<string>>();

  readonly id: string;
  readonly hostKey: string;
  readonly config: Readonly<CacheConfig>;

  constructor(
    id: string,
    hostKey: string,
    config: Readonly<CacheConfig>,
    onGone: (store: RouteStore, entry: CachedResponse, replaced: boolean) => void,
  ) {
    this.id = id;
    this.hostKey = hostKey;
    this.config = config;
    this.lru = new LRUCache<string, CachedResponse>({
      maxSize: config.maxBytes,
      sizeCalculation: (entry) => entry.size,
      // After the entry is out of the map, so the callbacks may touch the stores again.
      disposeAfter: (entry, _key, reason) => onGone(this, entry, reason === 'set'),
    });
  }
}

/**
 * Every cached route's store, each bounded by its path's `max_bytes`, and all of them together by
 * main.yaml's `cache.max_bytes` (a second LRU over every entry, whose evictions remove the entry
 * from its route's store). One per process: workers do not share their stores (docs/workers.md).
 */
export class ResponseStore {
  readonly #routes = new Map<string, RouteStore>();
  readonly #global: LRUCache<string, { store: RouteStore; key: string; size: number }> | null;
  #bytes = 0;

  constructor(globalMaxBytes: number | null) {
    this.#global =
      globalMaxBytes === null
        ? null
        : new LRUCache({
            maxSize: globalMaxBytes,
            sizeCalculation: (value) => value.size,
            disposeAfter: (value, _key, reason) => {
              if (reason === 'evict') value.store.lru.delete(value.key);
            },
          });
    cacheBytes.set(0);
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** The store of a cached route, made (or remade, when its settings changed) on first use. */
  #storeOf(id: string, hostKey: string, config: Readonly<CacheConfig>): RouteStore {
    const existing = this.#routes.get(id);
    if (
      existing !== undefined &&
      existing.hostKey === hostKey &&
      existing.config.maxBytes === config.maxBytes &&
      existing.config.maxObjectBytes === config.maxObjectBytes &&
      existing.config.defaultTtlSeconds === config.defaultTtlSeconds
    )
      return existing;
    if (existing !== undefined) this.#drop(existing);
    const store = new RouteStore(id, hostKey, config, (owner, entry, replaced) =>
      this.#gone(owner, entry, replaced),
    );
    this.#routes.set(id, store);
    return store;
  }

  #gone(store: RouteStore, entry: CachedResponse, replaced: boolean): void {
    this.#bytes -= entry.size;
    cacheBytes.set(this.#bytes);
    if (replaced) return;
    this.#global?.delete(`${store.id}\u0001${entry.key}`);
    const keys = store.byUrl.get(entry.urlKey);
    keys?.delete(entry.key);
    if (keys?.size === 0) store.byUrl.delete(entry.urlKey);
  }

  #drop(store: RouteStore): void {
    this.#routes.delete(store.id);
    store.lru.clear();
  }

  /** Keeps the stores of the routes `cached` lists (id → host key, settings); drops the others. */
  retainOnly(cached: ReadonlyMap<string, { hostKey: string; config: Readonly<CacheConfig> }>): void {
    for (const store of [...this.#routes.values()]) {
      const next = cached.get(store.id);
      if (
        next === undefined ||
        next.hostKey !== store.hostKey ||
        next.config.maxBytes !== store.config.maxBytes ||
        next.config.maxObjectBytes !== store.config.maxObjectBytes ||
        next.config.defaultTtlSeconds !== store.config.defaultTtlSeconds
      )
        this.#drop(store);
    }
  }

  /** The entries stored for a URL on a route (every partition and variant), without touching them. */
  entriesFor(routeId: string, urlKey: string): CachedResponse[] {
    const store = this.#routes.get(routeId);
    const keys = store?.byUrl.get(urlKey);
    if (store === undefined || keys === undefined) return [];
    const out: CachedResponse[] = [];
    for (const key of keys) {
      const entry = store.lru.peek(key);
      if (entry !== undefined) out.push(entry);
    }
    return out;
  }

  /** Marks an entry as just used, in its route's LRU and the global one. */
  touch(routeId: string, entry: CachedResponse): void {
    const store = this.#routes.get(routeId);
    if (store === undefined) return;
    store.lru.get(entry.key);
    this.#global?.get(`${routeId}\u0001${entry.key}`);
  }

  /** Stores an entry (replacing one with its key); false when it can never fit. */
  put(route: { id: string; hostKey: string }, config: Readonly<CacheConfig>, entry: CachedResponse): boolean {
    const store = this.#storeOf(route.id, route.hostKey, config);
    const globalMax = this.#global?.maxSize ?? Number.POSITIVE_INFINITY;
    if (entry.size > config.maxBytes || entry.size > globalMax) return false;
    store.lru.set(entry.key, entry);
    if (!store.lru.has(entry.key)) return false;
    this.#bytes += entry.size;
    cacheBytes.set(this.#bytes);
    let keys = store.byUrl.get(entry.urlKey);
    if (keys === undefined) {
      keys = new Set();
      store.byUrl.set(entry.urlKey, keys);
    }
    keys.add(entry.key);
    this.#global?.set(`${route.id}\u0001${entry.key}`, { store, key: entry.key, size: entry.size });
    return true;
  }

  /** Removes one entry; true when it was there. */
  delete(routeId: string, key: string): boolean {
    return this.#routes.get(routeId)?.lru.delete(key) ?? false;
  }

  /** Removes every entry of a URL on a route (all partitions and variants); returns how many. */
  invalidate(routeId: string, urlKey: string): number {
    const store = this.#routes.get(routeId);
    const keys = store?.byUrl.get(urlKey);
    if (store === undefined || keys === undefined) return 0;
    let count = 0;
    for (const key of [...keys]) if (store.lru.delete(key)) count += 1;
    return count;
  }

  /**
   * Removes every entry of the routes of `hostKey` whose path is `prefix` or below it, segment by
   * segment (`/api` takes `/api` and `/api/x`, not `/apis`); returns how many.
   */
  purge(hostKey: string, prefix: string): number {
    const base = prefix.length > 1 && prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
    const under = (path: string) => base === '/' || path === base || path.startsWith(`${base}/`);
    let count = 0;
    for (const store of [...this.#routes.values()]) {
      if (store.hostKey !== hostKey) continue;
      for (const entry of [...store.lru.values()]) {
        if (under(entry.path) && store.lru.delete(entry.key)) count += 1;
      }
    }
    return count;
  }
}
