import { readFileSync } from 'node:fs';
import type http from 'node:http';
import type { Http2SecureServer } from 'node:http2';
import type https from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { hasBody } from './local-response.ts';

/**
 * What one listener allows a client before Tollgate hangs up: how long a new connection may stay
 * silent, how long a request body may pause between two chunks, and how many connections may be open
 * at once. Node closes idle keep-alive connections (keepAliveTimeout) and slow request headers
 * (headersTimeout) itself; these close the gaps it leaves. See docs/security.md.
 */
export interface ClientLimits {
  /** A connection that sends no byte within this time is closed (before TLS: the handshake too). */
  firstByteMs: number;
  /** A request body that stops arriving for this long has its connection closed. */
  bodyIdleMs: number;
  /** Connections beyond this many are closed as soon as they are accepted. */
  maxConnections: number;
}

function onRequest(limits: ClientLimits) {
  return (req: http.IncomingMessage) => {
    // HTTP/2 streams share their connection: their limits are per stream (listeners/http2-limits.ts).
    if (req.httpVersionMajor === 2) return;
    const socket = req.socket;
    if (!hasBody(req) || req.complete) {
      socket.setTimeout(0);
      return;
    }
    // While the body arrives, silence is the client's; once it has all arrived, waiting is ours.
    socket.setTimeout(limits.bodyIdleMs);
    req.once('end', () => socket.setTimeout(0));
  };
}

/**
 * Applies `limits` to a server. Must be called before the server listens. Timeouts destroy the socket
 * (Node's default when nothing handles a socket's timeout), which also aborts the upstream request.
 */
export function applyClientLimits(
  server: http.Server | https.Server | Http2SecureServer,
  limits: ClientLimits,
  tls = false,
): void {
  server.maxConnections = limits.maxConnections;
  const silentUntilFirstRequest = (socket: Socket) => socket.setTimeout(limits.firstByteMs);
  if (tls) {
    // Before the handshake the raw socket belongs to TLS: bound it with the handshake timeout.
    (server as unknown as { handshakeTimeout: number }).handshakeTimeout = limits.firstByteMs;
    // An HTTP/2 connection's socket is read natively, so its timer would never see activity: its
    // limits are per session and stream instead (listeners/http2-limits.ts).
    server.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol !== 'h2') silentUntilFirstRequest(socket);
    });
  } else {
    server.on('connection', silentUntilFirstRequest);
  }
  // First, so the body timer starts before any stage can pause or consume the body.
  server.prependListener('request', onRequest(limits));
  // Where the app answers `Expect: 100-continue` itself (the proxy listeners), such requests arrive
  // as 'checkContinue' instead; a listener anywhere else would stop Node's automatic 100.
  if (server.listenerCount('checkContinue') > 0) server.prependListener('checkContinue', onRequest(limits));
  server.prependListener('upgrade', (req: http.IncomingMessage) => req.socket.setTimeout(0));
}

/** The process's soft limit on open file descriptors, or null where /proc does not say. */
export function openFileLimit(procLimits = '/proc/self/limits'): number | null {
  try {
    const line = readFileSync(procLimits, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.split(/\s{2,}/)[1];
    return soft === undefined || soft === 'unlimited' ? null : Number(soft);
  } catch {
    return null;
  }
}

/** Connections the admin listener takes at once: probes and scrapes, never a crowd. */
export const ADMIN_CONNECTIONS = 32;
/** Connections the token API takes at once. */
export const TOKEN_API_CONNECTIONS = 128;
/**
 * Descriptors kept back from the proxy listeners: the admin and token API caps, plus files, logs,
 * watchers and DNS. This is what keeps probes and reloads working while the proxy port is flooded.
 */
export const RESERVED_DESCRIPTORS = 512;

/**
 * The per-listener client-connection cap that cannot exhaust descriptors: every proxied client
 * connection may hold an upstream connection too, so the proxy listeners share at most half of what
 * is left after the reserve.
 */
export function safeConnectionCap(configured: number, fileLimit: number | null, proxyListeners = 1): number {
  if (fileLimit === null) return configured;
  const affordable = Math.floor((fileLimit - RESERVED_DESCRIPTORS) / 2 / proxyListeners);
  return Math.max(1, Math.min(configured, affordable));
}
