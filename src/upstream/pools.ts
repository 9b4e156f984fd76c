import { isIP } from 'node:net';
import { checkServerIdentity, getCACertificates } from 'node:tls';
import { buildConnector, type Client, Pool } from 'undici';
import type { Timeouts, UpstreamLimits } from '../config/types.ts';
import type { ServerLoad } from '../observe/server-load.ts';
import type { RoutingTable, UpstreamServer } from '../routing/types.ts';
import { type DnsCache, processDnsCache } from './dns-cache.ts';
import { ServerSlots } from './slots.ts';
import { UpstreamTlsFiles, usesTlsFile } from './tls-files.ts';

export interface UpstreamPoolsOptions {
  timeouts: Timeouts;
  limits: UpstreamLimits;
  /** Host-name resolution for upstream servers; the process's cache unless a test injects one. */
  dns?: DnsCache;
  /** main.yaml `upstream_ca_file`, trusted for TLS servers beside the system CAs. */
  upstreamCaFile?: string | null;
}

/**
 * How one request reaches one server: HTTP/1.1, TLS with ALPN (h2 or http/1.1, the server picks),
 * HTTP/2 required over TLS, or h2c with prior knowledge.
 */
export type Wire = 'h1' | 'alpn' | 'h2' | 'h2c';

/** Streams per HTTP/2 connection we open before another connection is used (servers allow ≥ 100). */
const H2_STREAMS_PER_CONNECTION = 100;

/**
 * The one place the protocol to a server is chosen (docs/traffic.md#http2-to-upstreams), from the
 * path's `upstream_protocol` compiled onto the server: `auto` uses ALPN on TLS servers and HTTP/1.1
 * on plain ones, except gRPC, which plain servers get as h2c with prior knowledge.
 */
export function wireFor(server: UpstreamServer, grpc: boolean): Wire {
  const { tls, protocol } = server.transport;
  if (tls !== null) return protocol === 'http1' ? 'h1' : protocol === 'h2' ? 'h2' : 'alpn';
  if (protocol === 'h2' || protocol === 'h2c') return 'h2c';
  return protocol === 'auto' && grpc ? 'h2c' : 'h1';
}

/** A TLS server's name as undici must be given it on each request (it reconnects when it changes). */
export function tlsServerName(server: UpstreamServer): string | undefined {
  return server.transport.tls?.serverName;
}

interface PoolEntry {
  pool: Pool;
  server: UpstreamServer;
}

/**
 * One undici Pool and one set of connection slots per upstream origin, shared by every route naming
 * that server and by plain requests and WebSocket upgrades alike (same connect timeout, same cached
 * DNS, same limits). Pools outlive reloads while their server stays configured; `retainOnly` closes
 * the others, and Pool.close() lets in-flight requests finish first.
 */
export class UpstreamPools {
  readonly #pools = new Map<string, PoolEntry>();
  readonly #slots = new Map<string, ServerSlots>();
  readonly #options: Pool.Options;
  readonly #limits: UpstreamLimits;
  readonly #dns: DnsCache;
  readonly #connectTimeoutMs: number;
  readonly #globalCaFile: string | null;
  readonly tlsFiles: UpstreamTlsFiles;

  constructor(options: UpstreamPoolsOptions) {
    const { timeouts, limits } = options;
    this.#limits = limits;
    const dns = options.dns ?? processDnsCache;
    this.#dns = dns;
    this.#connectTimeoutMs = timeouts.upstreamConnectMs;
    this.#globalCaFile = options.upstreamCaFile ?? null;
    this.tlsFiles = new UpstreamTlsFiles(this.#globalCaFile);
    // A TLS file that changed: pools using it are replaced, so new connections use the new copy.
    this.tlsFiles.onChange((paths) => {
      for (const [key, entry] of this.#pools) {
        if (!usesTlsFile(entry.server.transport.tls, paths, this.#globalCaFile)) continue;
        this.#pools.delete(key);
        void entry.pool.close().catch(() => {});
      }
    });
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

  /** The pool for `server` over `wire` (wireFor); HTTP requests and WebSocket upgrades share it. */
  get(server: UpstreamServer, wire: Wire = wireFor(server, false)): Pool {
    const key = `${server.poolKey} ${wire}`;
    let entry = this.#pools.get(key);
    if (entry === undefined) {
      entry = { pool: this.#create(server, wire, this.#options), server };
      this.#pools.set(key, entry);
    }
    return entry.pool;
  }

  /**
   * A separate one-connection pool for active health checks (they never queue behind traffic), dialled
   * exactly like the traffic: same TLS settings and protocol.
   */
  checkPool(server: UpstreamServer): Pool {
    const wire = wireFor(server, false);
    const key = `${server.poolKey} ${wire} check`;
    let entry = this.#pools.get(key);
    if (entry === undefined) {
      entry = { pool: this.#create(server, wire, { connections: 1, keepAliveTimeout: 4_000 }), server };
      this.#pools.set(key, entry);
    }
    return entry.pool;
  }

  #create(server: UpstreamServer, wire: Wire, base: Pool.Options): Pool {
    const tls = server.transport.tls;
    const h2 = wire !== 'h1';
    // A path's `timeouts.connect_seconds` (docs/traffic.md#timeouts) is part of its transport key.
    const connectTimeoutMs = server.transport.connectTimeoutMs ?? this.#connectTimeoutMs;
    let negotiated = '';
    let connect: Pool.Options['connect'] = base.connect;
    if (tls !== null || wire === 'h2c') {
      // TLS material is read here (the files validation checked), so a pool always has a whole set.
      const material = tls === null ? null : this.tlsFiles.material(tls);
      const name = tls?.serverName ?? '';
      const connector = buildConnector({
        timeout: connectTimeoutMs,
        allowH2: h2,
        useH2c: wire === 'h2c',
        lookup: this.#dns.lookup,
        ...(tls === null
          ? {}
          : {
              // SNI carries host names only (RFC 6066); the certificate is checked against the name either way.
              servername: isIP(name) === 0 ? name : undefined,
              rejectUnauthorized: tls.verify,
              checkServerIdentity: (_host: string, cert: Parameters<typeof checkServerIdentity>[1]) =>
                checkServerIdentity(name, cert),
              ...(material?.ca ? { ca: [...getCACertificates('default'), ...material.ca] } : {}),
              ...(material?.cert && material.key ? { cert: material.cert, key: material.key } : {}),
            }),
      } as buildConnector.BuildOptions);
      connect = (options, callback) =>
        // Our server name, not the one undici derives from each request's Host.
        connector({ ...options, servername: undefined } as buildConnector.Options, (error, connected) => {
          const done = callback as (error: Error | null, socket: unknown) => void;
          const socket = connected as (typeof connected & { alpnProtocol?: string | false }) | null;
          if (error === null && wire === 'h2' && socket?.alpnProtocol !== 'h2') {
            socket?.destroy();
            const refused = new Error('the upstream did not agree to HTTP/2 (ALPN)') as NodeJS.ErrnoException;
            refused.code = 'TOLLGATE_NO_H2';
            done(refused, null);
            return;
          }
          negotiated = error === null ? String(socket?.alpnProtocol ?? '') : '';
          done(error, socket);
        });
    }
    const pool = new Pool(server.origin, {
      ...base,
      ...(server.transport.connectTimeoutMs == null ? {} : { connectTimeout: connectTimeoutMs }),
      connect,
      allowH2: h2,
      ...(wire === 'h2c' || wire === 'h2' ? { pipelining: H2_STREAMS_PER_CONNECTION } : {}),
    });
    if (wire === 'alpn') {
      // ALPN decides per connection: HTTP/2 multiplexes streams, HTTP/1.1 never pipelines.
      pool.on('connect', (_origin, targets) => {
        const client = targets[targets.length - 1] as Client;
        client.pipelining = negotiated === 'h2' ? H2_STREAMS_PER_CONNECTION : 1;
      });
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
   * Requests in flight to, and sent to, each server of `table` (one entry per address), read from the
   * slots without creating any: what tollgate_upstream_in_flight and /status show (observe/server-load).
   */
  load(table: RoutingTable): ServerLoad[] {
    const seen = new Set<string>();
    const load: ServerLoad[] = [];
    for (const server of table.servers) {
      if (seen.has(server.address)) continue;
      seen.add(server.address);
      const slots = this.#slots.get(server.origin);
      load.push({ address: server.address, inFlight: slots?.inUse ?? 0, dispatched: slots?.dispatched ?? 0 });
    }
    return load;
  }

  /**
   * Replaces a server's pool. undici marks a pool client busy for good when dispatch() refuses a
   * request as invalid (UND_ERR_INVALID_ARG), so each such request would permanently take one
   * connection slot; a fresh pool (the old one finishes its in-flight requests) keeps the proxy alive.
   */
  replace(server: UpstreamServer, wire: Wire = wireFor(server, false)): void {
    const key = `${server.poolKey} ${wire}`;
    const entry = this.#pools.get(key);
    if (entry === undefined) return;
    this.#pools.delete(key);
    void entry.pool.close().catch(() => {});
  }

  /** Closes (gracefully) the pools of servers the new table no longer names (or names otherwise). */
  retainOnly(table: RoutingTable): void {
    const keepPools = new Set(table.servers.map((server) => server.poolKey));
    for (const [key, entry] of this.#pools) {
      if (keepPools.has(entry.server.poolKey)) continue;
      this.#pools.delete(key);
      void entry.pool.close().catch(() => {});
    }
    const keep = new Set(table.servers.map((server) => server.origin));
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
    const pools = [...this.#pools.values()].map((entry) => entry.pool);
    this.#pools.clear();
    await Promise.allSettled(pools.map((pool) => pool.close()));
  }
}
