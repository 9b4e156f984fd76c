import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import { checkServerIdentity, getCACertificates } from 'node:tls';
import { buildConnector, type Client, Pool } from 'undici';
import type { Timeouts, UpstreamLimits } from '../config/types.ts';
import type { ServerLoad } from '../observe/server-load.ts';
import { changeFrom, forEachRouteServer } from '../routing/table-change.ts';
import type { RoutingTable, UpstreamServer } from '../routing/types.ts';
import { type DnsCache, processDnsCache } from './dns-cache.ts';
import { H2SessionPool } from './h2-session-pool.ts';
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

/** The pools map's key: one undici pool per server and wire, and one set of node:http2 sessions. */
function poolKey(server: UpstreamServer, wire: Wire, h2Sessions: boolean): string {
  return h2Sessions && wire !== 'h1' && GRPC_CLIENT === 'node'
    ? `${server.poolKey} ${wire} sessions`
    : `${server.poolKey} ${wire}`;
}

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

/** Streams every request of a server on one client: an undici Pool or the node:http2 sessions. */
export type UpstreamDispatcher = Pick<Pool, 'dispatch' | 'close'>;

interface PoolEntry {
  pool: UpstreamDispatcher;
  server: UpstreamServer;
}

type DialledSocket = Duplex & { alpnProtocol?: string | false };
type Dialler = (
  options: buildConnector.Options,
  callback: (error: Error | null, socket: DialledSocket | null) => void,
) => void;

/** How long an upstream connection with nothing in flight is kept open. */
const KEEP_ALIVE_TIMEOUT_MS = 4_000;

/**
 * Which client carries gRPC to upstreams: `node` (node:http2 sessions, the default) or `undici`.
 * The choice and its figures are in docs/decisions.md; the variable exists so the benchmark can
 * measure both in one run (docs/benchmark.md), not as a setting.
 */
const GRPC_CLIENT = process.env.TOLLGATE_UPSTREAM_GRPC_CLIENT === 'undici' ? 'undici' : 'node';

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
  readonly #headersTimeoutMs: number;
  readonly #globalCaFile: string | null;
  readonly tlsFiles: UpstreamTlsFiles;
  /** The table retainOnly kept last, and how many of its routes' servers use each pool key and origin. */
  #retained: RoutingTable | null = null;
  readonly #uses = new ServerUses();

  constructor(options: UpstreamPoolsOptions) {
    const { timeouts, limits } = options;
    this.#limits = limits;
    const dns = options.dns ?? processDnsCache;
    this.#dns = dns;
    this.#connectTimeoutMs = timeouts.upstreamConnectMs;
    this.#headersTimeoutMs = timeouts.upstreamResponseHeadersMs;
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
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      keepAliveMaxTimeout: 60_000,
    };
  }

  /** The undici pool for `server` over `wire` (wireFor); HTTP requests and WebSocket upgrades share it. */
  get(server: UpstreamServer, wire: Wire = wireFor(server, false)): Pool {
    const key = `${server.poolKey} ${wire}`;
    let entry = this.#pools.get(key);
    if (entry === undefined) {
      entry = { pool: this.#create(server, wire, this.#options), server };
      this.#pools.set(key, entry);
    }
    return entry.pool as Pool;
  }

  /**
   * What carries one request to `server` over `wire`: gRPC over HTTP/2 goes on node:http2 sessions
   * (faster per call than undici's HTTP/2 client, docs/decisions.md), everything else on undici.
   */
  dispatcher(server: UpstreamServer, wire: Wire, grpc: boolean): UpstreamDispatcher {
    if (!grpc || wire === 'h1' || GRPC_CLIENT === 'undici') return this.get(server, wire);
    const key = poolKey(server, wire, true);
    let entry = this.#pools.get(key);
    if (entry === undefined) {
      entry = { pool: this.#createH2Sessions(server, wire), server };
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
    return entry.pool as Pool;
  }

  #create(server: UpstreamServer, wire: Wire, base: Pool.Options): Pool {
    const h2 = wire !== 'h1';
    // A path's `timeouts.connect_seconds` (docs/traffic.md#timeouts) is part of its transport key.
    const connectTimeoutMs = server.transport.connectTimeoutMs ?? this.#connectTimeoutMs;
    let negotiated = '';
    let connect: Pool.Options['connect'] = base.connect;
    const dial = this.#dialler(server, wire, false);
    if (dial !== null) {
      connect = (options, callback) =>
        dial(options, (error, socket) => {
          negotiated = error === null ? String(socket?.alpnProtocol ?? '') : '';
          (callback as (error: Error | null, socket: unknown) => void)(error, socket);
        });
    }
    const pool = new Pool(server.origin, {
      ...base,
      ...(server.transport.connectTimeoutMs == null ? {} : { connectTimeout: connectTimeoutMs }),
      // A health-check pool's base names no connector: undici's default then.
      ...(connect === undefined ? {} : { connect }),
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

  /**
   * How a connection to `server` over `wire` is dialled (null: undici's default TCP connector):
   * connect timeout, cached DNS, and for TLS the server name, CAs, client certificate and ALPN.
   * Over `h2`, or for the node:http2 sessions, a TLS server that does not agree to h2 is refused
   * (TOLLGATE_NO_H2, a TLS failure class).
   */
  #dialler(server: UpstreamServer, wire: Wire, forH2Sessions: boolean): Dialler | null {
    const requireH2 = forH2Sessions || wire === 'h2';
    const tls = server.transport.tls;
    if (tls === null && wire !== 'h2c') return null;
    // TLS material is read here (the files validation checked), so a pool always has a whole set.
    const material = tls === null ? null : this.tlsFiles.material(tls);
    const name = tls?.serverName ?? '';
    const connector = buildConnector({
      // A path's `timeouts.connect_seconds` (docs/traffic.md#timeouts) is part of its transport key.
      timeout: server.transport.connectTimeoutMs ?? this.#connectTimeoutMs,
      allowH2: wire !== 'h1',
      // Only the pool on node:http2 asks for h2 first; undici's pools let the server choose.
      ...(forH2Sessions ? { preferH2: true } : {}),
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
    return ({ servername: _fromHost, ...options }, callback) =>
      // Our server name, not the one undici derives from each request's Host.
      connector(options as buildConnector.Options, (error, connected) => {
        const socket = connected as DialledSocket | null;
        if (error === null && tls !== null && requireH2 && socket?.alpnProtocol !== 'h2') {
          socket?.destroy();
          const refused = new Error('the upstream did not agree to HTTP/2 (ALPN)') as NodeJS.ErrnoException;
          refused.code = 'TOLLGATE_NO_H2';
          callback(refused, null);
          return;
        }
        callback(error, socket);
      });
  }

  /**
   * The HTTP/2 sessions to `server` on node:http2 (h2-session-pool.ts), for gRPC: over TLS, ALPN
   * must give h2 (gRPC has no HTTP/1.1 form), `upstream_protocol: auto` included.
   */
  #createH2Sessions(server: UpstreamServer, wire: Wire): H2SessionPool {
    const dial = this.#dialler(server, wire, true) as Dialler;
    const { hostname, port, protocol } = new URL(server.origin);
    const target = {
      hostname: hostname.replace(/^\[|\]$/g, ''),
      host: hostname,
      protocol,
      port: port || (protocol === 'https:' ? '443' : '80'),
    } as buildConnector.Options;
    return new H2SessionPool({
      origin: server.origin,
      dial: (callback) => dial(target, callback),
      maxStreamsPerSession: H2_STREAMS_PER_CONNECTION,
      idleTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
      timeouts: { headersMs: this.#headersTimeoutMs, bodyMs: this.#headersTimeoutMs },
    });
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
  replace(server: UpstreamServer, wire: Wire = wireFor(server, false), grpc = false): void {
    const key = poolKey(server, wire, grpc);
    const entry = this.#pools.get(key);
    // node:http2 sessions refuse such a request without harm to the session: nothing to replace.
    if (entry === undefined || !(entry.pool instanceof Pool)) return;
    this.#pools.delete(key);
    void entry.pool.close().catch(() => {});
  }

  /** Closes (gracefully) the pools of servers the new table no longer names (or names otherwise). */
  retainOnly(table: RoutingTable): void {
    const change = this.#retained === null ? null : changeFrom(table, this.#retained);
    this.#retained = table;
    const uses = this.#uses;
    if (change !== null) {
      // Made from the table retained last: only the routes that left or arrived change the counts.
      for (const route of change.gone) forEachRouteServer(route, (server) => uses.remove(server));
      for (const route of change.arrived) forEachRouteServer(route, (server) => uses.add(server));
    } else {
      uses.clear();
      for (const route of table.routes) forEachRouteServer(route, (server) => uses.add(server));
    }
    // What is kept is the table's servers: from a change, the counts of its routes' servers (the
    // same set in a compiled table); else the list itself.
    const keepPools: { has(key: string): boolean } =
      change !== null ? uses.byPoolKey : new Set(table.servers.map((server) => server.poolKey));
    // Swept whole: a request on an older table may have made a pool since the last swap.
    for (const [key, entry] of this.#pools) {
      if (keepPools.has(entry.server.poolKey)) continue;
      this.#pools.delete(key);
      void entry.pool.close().catch(() => {});
    }
    const keep: { has(key: string): boolean } =
      change !== null ? uses.byOrigin : new Set(table.servers.map((server) => server.origin));
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

/** How many times the routes of a table name each pool key and each origin (one per route server). */
class ServerUses {
  readonly byPoolKey = new Map<string, number>();
  readonly byOrigin = new Map<string, number>();

  add(server: UpstreamServer): void {
    this.byPoolKey.set(server.poolKey, (this.byPoolKey.get(server.poolKey) ?? 0) + 1);
    this.byOrigin.set(server.origin, (this.byOrigin.get(server.origin) ?? 0) + 1);
  }

  remove(server: UpstreamServer): void {
    lower(this.byPoolKey, server.poolKey);
    lower(this.byOrigin, server.origin);
  }

  clear(): void {
    this.byPoolKey.clear();
    this.byOrigin.clear();
  }
}

function lower(counts: Map<string, number>, key: string): void {
  const count = (counts.get(key) ?? 0) - 1;
  if (count > 0) counts.set(key, count);
  else counts.delete(key);
}
