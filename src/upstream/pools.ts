import { Pool } from 'undici';
import type { Timeouts, UpstreamLimits } from '../config/types.ts';
import type { RoutingTable, UpstreamServer } from '../routing/types.ts';
import { type DnsCache, processDnsCache } from './dns-cache.ts';
import { ServerSlots } from './slots.ts';

export interface UpstreamPoolsOptions {
  timeouts: Timeouts;
  limits: UpstreamLimits;
  /** Host-name resolution for upstream servers; the process's cache unless a test injects one. */
  dns?: DnsCache;
}

/**
 * One undici Pool and one set of connection slots per upstream origin, shared by every route naming
 * that server and by plain requests and WebSocket upgrades alike (same connect timeout, same cached
 * DNS, same limits). Pools outlive reloads while their server stays configured; `retainOnly` closes
 * the others, and Pool.close() lets in-flight requests finish first.
 */
export class UpstreamPools {
  readonly #pools = new Map<string, Pool>();
  readonly #slots = new Map<string, ServerSlots>();
  readonly #options: Pool.Options;
  readonly #limits: UpstreamLimits;

  constructor(options: UpstreamPoolsOptions) {
    const { timeouts, limits } = options;
    this.#limits = limits;
    const dns = options.dns ?? processDnsCache;
    this.#options = {
      // The slots keep requests in flight at or under this, so undici's own queue stays empty.
      connections: limits.maxConnectionsPerServer,
      pipelining: 1,
      connectTimeout: timeouts.upstreamConnectMs,
      connect: { lookup: dns.lookup },
      headersTimeout: timeouts.upstreamResponseHeadersMs,
      // Like nginx's proxy_read_timeout: the longest silence between two body chunks.
      bodyTimeout: timeouts.upstreamResponseHeadersMs,
      keepAliveTimeout: 4_000,
      keepAliveMaxTimeout: 60_000,
    };
  }

  get(server: UpstreamServer): Pool {
    let pool = this.#pools.get(server.origin);
    if (pool === undefined) {
      pool = new Pool(server.origin, this.#options);
      this.#pools.set(server.origin, pool);
    }
    return pool;
  }

  slots(server: UpstreamServer): ServerSlots {
    let slots = this.#slots.get(server.origin);
    if (slots === undefined) {
      slots = new ServerSlots({
        perServer: this.#limits.maxConnectionsPerServer,
        perRoute: this.#limits.maxConnectionsPerRoute,
        queueSize: this.#limits.queueSize,
        queueTimeoutMs: this.#limits.queueTimeoutMs,
      });
      this.#slots.set(server.origin, slots);
    }
    return slots;
  }

  /**
   * Replaces a server's pool. undici marks a pool client busy for good when dispatch() refuses a
   * request as invalid (UND_ERR_INVALID_ARG), so each such request would permanently take one
   * connection slot; a fresh pool (the old one finishes its in-flight requests) keeps the proxy alive.
   */
  replace(server: UpstreamServer): void {
    const pool = this.#pools.get(server.origin);
    if (pool === undefined) return;
    this.#pools.delete(server.origin);
    void pool.close().catch(() => {});
  }

  /** Closes (gracefully) the pools of servers the new table no longer names. */
  retainOnly(table: RoutingTable): void {
    const keep = new Set(table.servers.map((server) => server.origin));
    for (const [origin, pool] of this.#pools) {
      if (keep.has(origin)) continue;
      this.#pools.delete(origin);
      void pool.close().catch(() => {});
    }
    for (const [origin, slots] of this.#slots) {
      if (keep.has(origin)) continue;
      // Requests in flight keep their slot object (and release into it); nobody waits on a gone server.
      slots.drain();
      this.#slots.delete(origin);
    }
  }

  get size(): number {
    return this.#pools.size;
  }

  async close(): Promise<void> {
    for (const slots of this.#slots.values()) slots.drain();
    this.#slots.clear();
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.allSettled(pools.map((pool) => pool.close()));
  }
}
