import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import { upstreamErrorsTotal } from '../admin/metrics.ts';
import { sendError } from '../errors.ts';
import type { RequestRecorder } from '../observe.ts';
import type { ProxyRequest, Stage } from '../proxy/context.ts';
import { resolveRequest, runStages } from '../proxy/server.ts';
import type { Runtime } from '../runtime.ts';
import type { TrustTest } from './client-address.ts';
import type { ForwardObserver } from './forward.ts';
import { upstreamRequestHeaders } from './headers.ts';

/**
 * WebSocket upgrades (BEHAVIOUR.md §4 "WebSocket upgrades are proxied after auth"). An upgrade is an
 * ordinary request until the upstream answers 101, so it goes through exactly what a request does:
 * the same host/path normalisation and route match, the same pipeline (to_https, rate limit,
 * authentication, balance), the same header hygiene (consumed credentials removed,
 * X-Tollgate-Subject and X-Forwarded-* set). Then http-proxy-3 relays the handshake and pipes both
 * sockets; closing either side closes the other.
 *
 * Decisions:
 * - to_https applies: a plain-HTTP upgrade on a to_https route gets the same 301 as a GET (nginx
 *   does the same); WebSocket clients do not follow it, so an operator sees the handshake fail with
 *   a Location that says why, instead of an unencrypted socket being opened.
 * - Only the first candidate server is tried: http-proxy-3 closes the client socket when the
 *   upstream connection fails, so there is no failover; the failure is reported to health checks
 *   and the client gets 502 (504 when the upstream accepts but does not answer the handshake).
 * - An established WebSocket has no idle timeout (long-lived by design); the handshake does.
 * - A non-WebSocket Upgrade (h2c…) is refused with 400 (use isWebSocketUpgrade as the server's
 *   shouldUpgradeCallback to serve those as plain requests instead).
 */

export interface WebSocketHandlerDeps {
  runtime: Runtime;
  stages: readonly Stage[];
  recorder: RequestRecorder;
  isTrustedProxy: TrustTest;
  /** Told about upstream failures and successes, like the HTTP forwarder (server health). */
  observer?: ForwardObserver;
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

interface Attempt {
  request: ProxyRequest;
  upgraded: boolean;
}

export function createWebSocketHandler(deps: WebSocketHandlerDeps): WebSocketProxy {
  const { runtime, stages, recorder, isTrustedProxy, observer } = deps;
  const handshakeTimeoutMs = runtime.main.timeouts.upstreamResponseHeadersMs;
  const proxy = createProxyServer({ ws: true, xfwd: false, changeOrigin: false });
  const attempts = new WeakMap<IncomingMessage, Attempt>();
  const open = new Set<Duplex>();

  // Per-request hooks on the upstream handshake: status for the access log, Set-Cookie from the
  // balance stage (sticky sessions) added to the 101, and a timeout on the handshake itself.
  proxy.on('proxyReqWs', (proxyReq, req) => {
    const attempt = attempts.get(req);
    if (!attempt) return;
    const { request } = attempt;
    proxyReq.setTimeout(handshakeTimeoutMs, () => {
      proxyReq.destroy(
        Object.assign(new Error('upstream did not answer the upgrade'), { code: 'ETIMEDOUT' }),
      );
    });
    proxyReq.once('upgrade', (proxyRes: IncomingMessage) => {
      attempt.upgraded = true;
      request.res.statusCode = 101;
      if (request.upstream) observer?.onUpstreamSuccess(request, request.upstream);
      if (request.responseCookies.length > 0) {
        const existing = proxyRes.headers['set-cookie'] ?? [];
        proxyRes.headers['set-cookie'] = [...existing, ...request.responseCookies];
      }
    });
    proxyReq.once('response', (proxyRes: IncomingMessage) => {
      request.res.statusCode = proxyRes.statusCode ?? 502;
      if (request.upstream) observer?.onUpstreamSuccess(request, request.upstream);
    });
  });

  function forward(request: ProxyRequest, socket: Duplex, head: Buffer): void {
    const server = request.candidates[0];
    if (server === undefined) {
      sendError(request.res, 'bad_gateway');
      return;
    }
    const { req } = request;
    request.upstream = server;
    req.url = request.forwardQuery ? `${request.path}?${request.forwardQuery}` : request.path;
    req.headers = upgradeRequestHeaders(request);
    const attempt: Attempt = { request, upgraded: false };
    attempts.set(req, attempt);
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    proxy.ws(req, socket, head, { target: server.origin }, (error) => {
      if (attempt.upgraded) {
        // The tunnel broke (reset by either side): http-proxy-3 already tears both sockets down.
        socket.destroy();
        return;
      }
      const code = (error as NodeJS.ErrnoException).code;
      const timedOut = code === 'ETIMEDOUT';
      const kind = timedOut ? 'timeout' : code === 'ECONNREFUSED' ? 'connect' : 'reset';
      upstreamErrorsTotal.inc({ route: request.route.id, server: server.address, kind });
      observer?.onUpstreamFailure(request, server, kind);
      sendError(request.res, timedOut ? 'gateway_timeout' : 'bad_gateway');
    });
  }

  function handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const startedAt = performance.now();
    // Node types the upgrade socket as a Duplex; for a TCP or TLS listener it is a net.Socket.
    const netSocket = socket as Socket;
    // Until http-proxy-3 owns the socket, a client reset must not become an unhandled 'error'.
    socket.on('error', () => socket.destroy());
    // A response object on the raw socket, so stages and sendError work exactly as for a request.
    const res = new http.ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(netSocket);
    // Once a stage (or an error) answered over HTTP, the socket carries nothing else.
    res.once('finish', () => netSocket.destroySoon());

    const resolved = resolveRequest(req, res, runtime, isTrustedProxy, startedAt);
    if (!resolved.ok) {
      recorder.unrouted(req, res, startedAt, resolved.clientIp);
      return;
    }
    const { request } = resolved;
    res.once('close', () => {
      request.responseBytes = netSocket.bytesWritten;
      recorder.routed(request);
    });
    if (!isWebSocketUpgrade(req) || req.method !== 'GET') {
      sendError(
        res,
        'bad_request',
        undefined,
        'only WebSocket upgrades (GET with Upgrade: websocket) are supported',
      );
      return;
    }
    runStages(stages, request).then(
      (pass) => {
        if (pass && !socket.destroyed) forward(request, socket, head);
      },
      (error: unknown) => {
        runtime.logger.error({ err: error }, 'WebSocket upgrade failed inside the proxy');
        sendError(res, 'internal_error');
      },
    );
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

/**
 * The handshake headers for the upstream: the HTTP forwarder's hygiene (hop-by-hop and consumed
 * credentials removed, X-Forwarded-*, X-Tollgate-Subject) plus the two hop-by-hop headers that ARE
 * the upgrade. Duplicate names are joined as RFC 9110 allows (`;` for Cookie).
 */
function upgradeRequestHeaders(request: ProxyRequest): IncomingHttpHeaders {
  const flat = upstreamRequestHeaders(request, request.secure ? 'https' : 'http', request.rawHost);
  const headers: IncomingHttpHeaders = {};
  for (let i = 0; i < flat.length; i += 2) {
    const name = (flat[i] as string).toLowerCase();
    const value = flat[i + 1] as string;
    const previous = headers[name];
    headers[name] = previous === undefined ? value : `${previous}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  headers.connection = 'Upgrade';
  headers.upgrade = 'websocket';
  return headers;
}
