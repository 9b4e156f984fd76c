import { createHash } from 'node:crypto';
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { sendError } from '../errors.ts';
import type { RequestRecorder } from '../observe/requests.ts';
import type { Pipeline } from '../pipeline/pipeline.ts';
import { refuse, respond } from '../pipeline/verdict.ts';
import type { ProxyRequest } from '../request/record.ts';
import type { Runtime } from '../runtime.ts';
import type { ForwardObserver } from '../upstream/attempt-observer.ts';
import { forwardUpgrade } from '../upstream/forward.ts';
import { clientResponseHeaders } from '../upstream/headers.ts';
import type { UpstreamPools } from '../upstream/pools.ts';
import { relay } from '../upstream/tunnel.ts';

/**
 * WebSocket upgrades (docs/architecture.md "Upstream layer"). An upgrade is an ordinary request until
 * the upstream answers 101, so it goes through exactly what a request does: the same host/path
 * normalisation and route match, the same pipeline (to_https, rate limit, authentication, balance),
 * the same header hygiene, and the same upstream path as plain requests (pools, connect timeout,
 * failover before the upgrade is sent, failure classes, passive health).
 *
 * Decisions:
 * - to_https applies: a plain-HTTP upgrade on a to_https route gets the same 301 as a GET (nginx
 *   does the same); WebSocket clients do not follow it, so an operator sees the handshake fail with
 *   a Location that says why, instead of an unencrypted socket being opened.
 * - Only a `101` with `Upgrade: websocket` and the `Sec-WebSocket-Accept` that matches the client's
 *   key opens the tunnel; anything else from the upstream is a 502 and its socket is closed, so a
 *   second request can never ride an unchecked tunnel past authentication.
 * - A final non-101 answer (401, 426…) is relayed like any response.
 * - An established WebSocket has no idle timeout (long-lived by design) and holds no connection slot;
 *   the handshake has the upstream response timeout.
 * - A non-WebSocket Upgrade (h2c…) is refused with 400 (isWebSocketUpgrade, as the server's
 *   shouldUpgradeCallback, serves those as plain requests instead).
 */

export interface WebSocketHandlerDeps {
  runtime: Runtime;
  pipeline: Pipeline;
  recorder: RequestRecorder;
  pools: UpstreamPools;
  /** Told about upstream failures and successes, exactly as for plain requests (server health). */
  observer: ForwardObserver;
}

export interface WebSocketProxy {
  /** The `'upgrade'` listener for the proxy's http and https servers. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Open proxied WebSockets (client side). */
  openCount(): number;
  /** Ends every open WebSocket (shutdown, after the grace period). */
  closeAll(): void;
}

/** For `http.createServer({ shouldUpgradeCallback })`: only WebSocket upgrades leave the HTTP path. */
export function isWebSocketUpgrade(req: IncomingMessage): boolean {
  return req.headers.upgrade?.toLowerCase() === 'websocket';
}

const HANDSHAKE_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** RFC 6455 §4.1: the base64 of 16 random bytes. */
const CLIENT_KEY = /^[A-Za-z0-9+/]{22}==$/;

/** The Sec-WebSocket-Accept a server must answer to this key (RFC 6455 §4.2.2). */
export function expectedAccept(key: string): string {
  return createHash('sha1')
    .update(key + HANDSHAKE_GUID)
    .digest('base64');
}

/** Why an upstream's answer to an upgrade is not a valid WebSocket handshake, or null when it is. */
export function handshakeProblem(
  statusCode: number,
  headers: IncomingHttpHeaders,
  key: string,
): string | null {
  if (statusCode !== 101) return `status ${statusCode} instead of 101`;
  if (headers.upgrade?.toLowerCase() !== 'websocket') return 'no Upgrade: websocket';
  const connection = String(headers.connection ?? '').toLowerCase();
  if (!connection.split(',').some((token) => token.trim() === 'upgrade')) return 'no Connection: upgrade';
  if (headers['sec-websocket-accept'] !== expectedAccept(key)) return 'wrong Sec-WebSocket-Accept';
  return null;
}

export function createWebSocketHandler(deps: WebSocketHandlerDeps): WebSocketProxy {
  const { runtime, pipeline, recorder } = deps;
  const forwarder = { pools: deps.pools, observer: deps.observer };
  const open = new Set<Duplex>();

  function handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const startedAt = performance.now();
    // Node types the upgrade socket as a Duplex; for a TCP or TLS listener it is a net.Socket.
    const netSocket = socket as Socket;
    // Until the tunnel owns the socket, a client reset must not become an unhandled 'error'.
    const onEarlyError = () => socket.destroy();
    socket.on('error', onEarlyError);
    // A response object on the raw socket, so answers are written exactly as for a request.
    const res = new http.ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(netSocket);
    // Once a stage (or an error) answered over HTTP, the socket carries nothing else.
    res.once('finish', () => netSocket.destroySoon());

    const routed = pipeline.route(req, res, startedAt);
    if (!routed.ok) {
      respond(res, routed.verdict);
      recorder.unrouted(req, res, startedAt, routed);
      return;
    }
    const { request } = routed;
    let recorded = false;
    const record = () => {
      if (recorded) return;
      recorded = true;
      request.responseBytes = netSocket.bytesWritten;
      recorder.routed(request);
    };
    res.once('close', record);
    if (!isWebSocketUpgrade(req) || req.method !== 'GET') {
      sendError(
        res,
        'bad_request',
        undefined,
        'only WebSocket upgrades (GET with Upgrade: websocket) are supported',
      );
      return;
    }
    const key = req.headers['sec-websocket-key'];
    if (typeof key !== 'string' || !CLIENT_KEY.test(key)) {
      sendError(res, 'bad_request', undefined, 'Sec-WebSocket-Key is missing or malformed');
      return;
    }
    const length = req.headers['content-length'];
    if ((length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined) {
      // A handshake has no body (RFC 6455 §4.1); bytes after it would go into the tunnel unchecked.
      sendError(res, 'bad_request', undefined, 'a WebSocket upgrade cannot carry a body');
      return;
    }
    Promise.resolve(pipeline.run(request))
      .then((verdict) => {
        if (verdict.kind !== 'pass') return respond(res, verdict);
        if (socket.destroyed) return;
        open.add(socket);
        socket.once('close', () => open.delete(socket));
        forwardUpgrade(request, forwarder, {
          accept: (statusCode, headers) => handshakeProblem(statusCode, headers, key),
          open(upstream, headers) {
            // From here on the socket is a tunnel: the response object and its 'close' are done with.
            res.off('close', record);
            res.detachSocket(netSocket);
            socket.off('error', onEarlyError);
            res.statusCode = 101;
            socket.write(switchingProtocols(headers, request));
            relay(socket, upstream, head, (outcome) => {
              request.completed = outcome.completed;
              record();
            });
          },
        });
      })
      .catch((error: unknown) => {
        runtime.logger.error({ err: error }, 'WebSocket upgrade failed inside the proxy');
        respond(res, refuse('internal_error'));
      });
  }

  return {
    handleUpgrade,
    openCount: () => open.size,
    closeAll() {
      for (const socket of open) socket.destroy();
      open.clear();
    },
  };
}

/** The 101 for the client: the upstream's headers minus hop-by-hop ones, plus the upgrade and our cookies. */
function switchingProtocols(upstream: IncomingHttpHeaders, request: ProxyRequest): string {
  const headers = clientResponseHeaders(
    upstream as Record<string, string | string[]>,
    request.responseCookies,
    null,
    request.route.responseHeaders,
  );
  let head = 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n';
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const line of Array.isArray(value) ? value : [value]) head += `${name}: ${line}\r\n`;
  }
  return `${head}\r\n`;
}
