import type { Dispatcher } from 'undici';
import { Pool } from 'undici';
import { upstreamErrorsTotal } from '../admin/metrics.ts';
import type { Timeouts } from '../config/types.ts';
import { type ErrorCode, sendError } from '../errors.ts';
import type { ProxyRequest } from '../proxy/context.ts';
import type { RoutingTable, UpstreamServer } from '../routing/types.ts';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.ts';

/** What the forwarder tells the rest of the process about each attempt (health, logs). */
export interface ForwardObserver {
  onUpstreamFailure(request: ProxyRequest, server: UpstreamServer, kind: UpstreamFailureKind): void;
  onUpstreamSuccess(request: ProxyRequest, server: UpstreamServer): void;
}

export type UpstreamFailureKind = 'connect' | 'timeout' | 'reset' | 'protocol';

/** Errors raised before the upstream saw the request: safe to try the next server. */
const CONNECT_ERRORS = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/**
 * A reused keep-alive connection the upstream closed at the same moment we wrote on it. Retried only
 * for requests without a body (nothing was consumed from the client), which is what nginx does for
 * idempotent requests with proxy_next_upstream error.
 */
const STALE_CONNECTION_ERRORS = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

function failureKind(code: string | undefined): UpstreamFailureKind {
  if (
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT' ||
    code === 'UND_ERR_CONNECT_TIMEOUT'
  )
    return 'timeout';
  if (code !== undefined && CONNECT_ERRORS.has(code)) return 'connect';
  if (code !== undefined && STALE_CONNECTION_ERRORS.has(code)) return 'reset';
  return 'protocol';
}

/**
 * One undici Pool per upstream origin, shared by every route naming that server. Pools outlive
 * reloads while their server stays configured; `retainOnly` closes the others, and Pool.close()
 * lets in-flight requests finish first.
 */
export class UpstreamPools {
  readonly #pools = new Map<string, Pool>();
  readonly #options: Pool.Options;

  constructor(timeouts: Timeouts) {
    this.#options = {
      connections: 512,
      pipelining: 1,
      connectTimeout: timeouts.upstreamConnectMs,
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
  }

  get size(): number {
    return this.#pools.size;
  }

  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.allSettled(pools.map((pool) => pool.close()));
  }
}

export interface ForwarderDeps {
  pools: UpstreamPools;
  observer: ForwardObserver;
}

function hasBody(request: ProxyRequest): boolean {
  const { headers } = request.req;
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * Streams the request to the first candidate server and the response back to the client, trying the
 * next candidate when a server cannot be reached. Never buffers a body: backpressure flows both ways
 * (undici pauses reading the upstream while the client socket is full).
 */
export function createForwarder(deps: ForwarderDeps): (request: ProxyRequest) => void {
  return (request) => attempt(request, deps, 0);
}

function attempt(request: ProxyRequest, deps: ForwarderDeps, index: number): void {
  const server = request.candidates[index];
  if (server === undefined) {
    sendError(request.res, 'bad_gateway');
    return;
  }
  request.upstream = server;
  const { req, res } = request;
  const withBody = hasBody(request);
  const path = request.forwardQuery ? `${request.path}?${request.forwardQuery}` : request.path;
  const options: Dispatcher.DispatchOptions = {
    origin: server.origin,
    method: req.method ?? 'GET',
    path,
    headers: upstreamRequestHeaders(request, request.secure ? 'https' : 'http', request.rawHost),
    body: withBody ? req : null,
  };

  let controller: Dispatcher.DispatchController | null = null;
  let responded = false;
  let finished = false;
  const onClientGone = () => {
    // The client went away: release the upstream request instead of reading a response nobody wants.
    if (!finished) controller?.abort(new Error('client closed the connection'));
  };
  res.once('close', onClientGone);

  const handler: Dispatcher.DispatchHandler = {
    onRequestStart(ctrl) {
      controller = ctrl;
      if (res.destroyed) ctrl.abort(new Error('client closed the connection'));
    },
    onResponseStart(ctrl, statusCode, headers, statusMessage) {
      responded = true;
      deps.observer.onUpstreamSuccess(request, server);
      if (res.destroyed) return;
      const outgoing = clientResponseHeaders(headers, request.responseCookies);
      if (statusMessage) res.writeHead(statusCode, statusMessage, outgoing);
      else res.writeHead(statusCode, outgoing);
      if (res.writableNeedDrain) pauseUntilDrained(ctrl, res);
    },
    onResponseData(ctrl, chunk) {
      request.responseBytes += chunk.length;
      if (!res.write(chunk)) pauseUntilDrained(ctrl, res);
    },
    onResponseEnd() {
      finished = true;
      res.off('close', onClientGone);
      res.end();
    },
    onResponseError(_ctrl, error) {
      finished = true;
      res.off('close', onClientGone);
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'UND_ERR_INVALID_ARG') {
        // undici refused to send this request (a header it considers invalid): the client's fault,
        // not the upstream's, and the pool needs replacing (see UpstreamPools.replace).
        deps.pools.replace(server);
        sendError(res, 'bad_request', undefined, 'the request cannot be forwarded as sent');
        return;
      }
      if (res.destroyed && !responded) return; // the client left first; nothing to report
      const kind = failureKind(code);
      upstreamErrorsTotal.inc({ route: request.route.id, server: server.address, kind });
      deps.observer.onUpstreamFailure(request, server, kind);
      if (responded) {
        // The upstream broke mid-body: the client must see a truncated response, not a clean end.
        res.destroy(error);
        return;
      }
      const retryable =
        (code !== undefined && CONNECT_ERRORS.has(code)) ||
        (code !== undefined && STALE_CONNECTION_ERRORS.has(code) && !withBody);
      if (retryable && index + 1 < request.candidates.length) {
        attempt(request, deps, index + 1);
        return;
      }
      const status: ErrorCode = code === 'UND_ERR_HEADERS_TIMEOUT' ? 'gateway_timeout' : 'bad_gateway';
      sendError(res, status);
    },
  };
  deps.pools.get(server).dispatch(options, handler);
}

function pauseUntilDrained(controller: Dispatcher.DispatchController, res: NodeJS.WritableStream): void {
  controller.pause();
  res.once('drain', () => controller.resume());
}
