import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2, { type Http2SecureServer, type Http2Server, type ServerHttp2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { MainConfig } from '../config/types.ts';
import { ERRORS, sendError } from '../errors.ts';
import type { DrainableServer } from '../lifecycle.ts';
import { http2StreamOf } from '../local-response.ts';
import { acceptCleartextHttp2 } from './h2c.ts';
import { applyHttp2Limits } from './http2-limits.ts';

/**
 * What the proxy listeners hand every request to, whatever protocol carried it. HTTP/2 requests
 * arrive through node:http2's compatibility API, whose request and response objects offer what the
 * pipeline and the forwarder use of IncomingMessage and ServerResponse (headers, rawHeaders, url,
 * method, socket address, writeHead/write/end, 'close'), so one pipeline serves both
 * (docs/architecture.md "Listeners").
 */
export interface ProxyHandlers {
  request(req: IncomingMessage, res: ServerResponse): void;
  /** `Expect: 100-continue` requests (both protocols). */
  checkContinue(req: IncomingMessage, res: ServerResponse): void;
  /** HTTP/1.1 only: WebSocket upgrades (those `shouldUpgrade` accepts). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  shouldUpgrade(req: IncomingMessage): boolean;
  /** HTTP/1.1 only: what Node's parser refused before it became a request. */
  clientError(error: Error & { code?: string }, socket: Duplex): void;
}

export interface ProxyListeners {
  /** Listens on proxy_address_http: HTTP/1.1, plus h2c with prior knowledge when http2_cleartext. */
  plain: http.Server;
  /** Listens on proxy_address_tls: ALPN h2 and http/1.1. Its certificate is set by the caller. */
  tls: Http2SecureServer | null;
  /** Every server whose connections and requests the graceful shutdown drains. */
  drainable: DrainableServer[];
}

/**
 * Builds the proxy listeners (not bound yet): the plain one and, when `tls` is given, the TLS one.
 * `tls` carries the initial certificate options (key/cert or SNICallback).
 */
export function createProxyListeners(
  main: MainConfig,
  handlers: ProxyHandlers,
  tls: http2.SecureServerOptions | null,
  misdirected?: (req: IncomingMessage) => boolean,
): ProxyListeners {
  const http1Options: http.ServerOptions = {
    keepAliveTimeout: main.timeouts.clientKeepAliveMs,
    headersTimeout: main.timeouts.clientHeadersMs,
    // Uploads and long responses are bounded by the upstream timeouts, not by a total request timer.
    requestTimeout: 0,
    // Only WebSocket upgrades leave the HTTP path; any other Upgrade (h2c included) is a plain request.
    shouldUpgradeCallback: handlers.shouldUpgrade,
    // A missing Host is answered by the route stage with our JSON 400 rather than Node's bare one.
    requireHostHeader: false,
    // Node enforces headersTimeout only when it sweeps its connections (every 30 s by default), so
    // slow headers were answered up to a sweep late; sweep every second.
    connectionsCheckingInterval: 1_000,
  };
  const http2Options: http2.ServerOptions = {
    settings: {
      maxConcurrentStreams: main.http2.maxConcurrentStreams,
      maxHeaderListSize: main.http2.maxHeaderListBytes,
      enablePush: false,
    },
    maxHeaderListPairs: 256,
  };
  const h2Limits = {
    firstByteMs: main.timeouts.clientFirstByteMs,
    idleMs: main.timeouts.clientKeepAliveMs,
    bodyIdleMs: main.timeouts.clientBodyIdleMs,
    maxResetsPerSecond: main.http2.maxResetsPerSecond,
  };
  // A stream the client reset before node:http2 announced it (a rapid-reset burst) costs no pipeline run.
  const live =
    (handler: ProxyHandlers['request']) =>
    (req: IncomingMessage, res: ServerResponse): void => {
      if (http2StreamOf(req)?.destroyed === true) return;
      handler(req, res);
    };
  const request = live(handlers.request);
  const checkContinue = live(handlers.checkContinue);
  const serve = <T extends http.Server | Http2Server | Http2SecureServer>(
    server: T,
    http1: boolean,
    guard?: (req: IncomingMessage) => boolean,
  ): T => {
    server.on('request', guard ? refuseMisdirected(guard, request) : request);
    server.on('checkContinue', guard ? refuseMisdirected(guard, checkContinue) : checkContinue);
    if (http1) {
      server.on('upgrade', guard ? refuseMisdirectedUpgrade(guard, handlers.upgrade) : handlers.upgrade);
      server.on('clientError', handlers.clientError);
    }
    return server;
  };

  const plain = serve(http.createServer(http1Options), true);
  const drainable: DrainableServer[] = [plain];
  if (main.http2Cleartext) {
    const h2c = serve(http2.createServer(http2Options), false);
    applyHttp2Limits(h2c, h2Limits);
    acceptCleartextHttp2(plain, h2c, main.timeouts.clientFirstByteMs);
    drainable.push(drainableHttp2(h2c, false));
  }

  let secure: Http2SecureServer | null = null;
  if (tls !== null) {
    secure = http2.createSecureServer({ ...http1Options, ...http2Options, ...tls, allowHTTP1: true });
    // node:http2 replaces the HTTP/1.1 upgrade test with its own (any 'upgrade' listener): keep ours.
    (secure as unknown as { shouldUpgradeCallback: ProxyHandlers['shouldUpgrade'] }).shouldUpgradeCallback =
      handlers.shouldUpgrade;
    serve(secure, true, misdirected);
    applyHttp2Limits(secure, h2Limits);
    drainable.push(drainableHttp2(secure, true));
  }
  return { plain, tls: secure, drainable };
}

/**
 * A request whose host's client-certificate check differs from its connection's (docs/authentication.md
 * #client-certificates) is answered 421 before the pipeline sees it: the client retries on a
 * connection of its own for that host, whose handshake applies the right check.
 */
function refuseMisdirected(
  misdirected: (req: IncomingMessage) => boolean,
  handler: ProxyHandlers['request'],
): ProxyHandlers['request'] {
  return (req, res) => {
    if (misdirected(req)) sendError(res, 'misdirected_request');
    else handler(req, res);
  };
}

function refuseMisdirectedUpgrade(
  misdirected: (req: IncomingMessage) => boolean,
  upgrade: ProxyHandlers['upgrade'],
): ProxyHandlers['upgrade'] {
  return (req, socket, head) => {
    if (!misdirected(req)) {
      upgrade(req, socket, head);
      return;
    }
    const body = JSON.stringify({
      error: 'misdirected_request',
      message: ERRORS.misdirected_request.message,
    });
    socket.end(
      `HTTP/1.1 421 Misdirected Request\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  };
}

/**
 * An HTTP/2 server as the graceful shutdown sees a listener (lifecycle.ts): closing sends every
 * session GOAWAY (in-flight streams finish, no new one starts), which is also what "close the idle
 * connections" means for a session; the TLS server's HTTP/1.1 connections are closed by Node's own
 * closeIdleConnections. The h2c server never listens: the plain server accepts its connections and
 * the shutdown tracks them there.
 */
function drainableHttp2(server: Http2Server | Http2SecureServer, secure: boolean): DrainableServer {
  const sessions = new Set<ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  const goaway = () => {
    for (const session of sessions) if (!session.closed) session.close();
  };
  return {
    get listening() {
      return server.listening;
    },
    close(callback) {
      if (server.listening) server.close(callback);
      else callback?.();
      goaway();
    },
    closeIdleConnections() {
      // Node's HTTP/1.1 fallback of an http2 server has it, untyped in @types/node.
      if (secure) (server as unknown as { closeIdleConnections(): void }).closeIdleConnections();
      goaway();
    },
    closeAllConnections() {
      for (const session of sessions) session.destroy();
    },
    listenerCount: (event) => server.listenerCount(event),
    on(event, listener: (socket: Socket) => void) {
      // h2c connections are the plain server's sockets, tracked there already.
      if (secure) server.on(event, listener);
      return this;
    },
    prependListener(event, listener) {
      server.prependListener(event, listener as never);
      return this;
    },
  };
}
