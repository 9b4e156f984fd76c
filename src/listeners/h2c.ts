import type http from 'node:http';
import type { Http2Server } from 'node:http2';
import type { Socket } from 'node:net';

/** RFC 9113 §3.4: the first 24 bytes every HTTP/2 client sends with prior knowledge. */
export const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export type FirstBytes = 'h2' | 'http/1.1' | 'undecided';

/** What the first bytes of a plain connection say: the HTTP/2 preface, anything else, or not yet known. */
export function classifyFirstBytes(head: Buffer): FirstBytes {
  const n = Math.min(head.length, H2_PREFACE.length);
  if (head.compare(H2_PREFACE, 0, n, 0, n) !== 0) return 'http/1.1';
  return n === H2_PREFACE.length ? 'h2' : 'undecided';
}

/**
 * Makes the plain HTTP/1.1 server also take HTTP/2 with prior knowledge (h2c) on the same port
 * (docs/traffic.md "HTTP/2"): each new connection's first bytes are read until they either match the
 * connection preface (the connection goes to `h2`) or do not (it goes to the HTTP/1.1 parser). The
 * bytes already read are handed on with the connection, so neither server misses any.
 *
 * `Upgrade: h2c` is a different thing (an HTTP/1.1 request asking to switch) and is never honoured:
 * see upstream/headers.ts, which never forwards `Upgrade` except for WebSockets.
 *
 * Until the first bytes decide, neither server watches the connection, so the first-byte timeout is
 * kept here (docs/security.md "Client limits"): a connection silent for `firstByteMs`, or still
 * undecided (a lone byte, part of the preface) once that much time has passed, is closed. It reuses
 * the socket's own idle timer, so a connection that decides at once costs no timer of its own.
 */
export function acceptCleartextHttp2(server: http.Server, h2: Http2Server, firstByteMs: number): void {
  const [http1Listener] = server.listeners('connection') as Array<(socket: Socket) => void>;
  if (http1Listener === undefined) throw new Error('the HTTP/1.1 server has no connection listener');
  server.removeListener('connection', http1Listener);
  server.prependListener('connection', (socket: Socket) => {
    let head: Buffer = Buffer.alloc(0);
    const acceptedAt = performance.now();
    const tooSlow = () => socket.destroy();
    const onData = (chunk: Buffer) => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const kind = classifyFirstBytes(head);
      if (kind === 'undecided') {
        // Trickled: the idle timer alone would let each byte buy another `firstByteMs`.
        if (performance.now() - acceptedAt >= firstByteMs) socket.destroy();
        return;
      }
      socket.off('data', onData);
      socket.off('timeout', tooSlow);
      socket.pause();
      if (kind === 'h2') {
        // The session keeps its own timers (listeners/http2-limits.ts); the socket's would see no
        // activity once node:http2 reads it natively.
        socket.setTimeout(0);
        // The bytes read are put back; node:http2 feeds a new session what the socket already
        // holds before reading it natively, so the session keeps the real socket (no JavaScript
        // stream in between, which cost more than the rest of a proxied gRPC call).
        socket.unshift(head);
        h2.emit('connection', socket);
        return;
      }
      http1Listener.call(server, socket);
      // The HTTP/1.1 parser reads the socket from now on; what was read already is fed to it the way
      // a read would have been (its 'data' listener), before any newer byte.
      socket.emit('data', head);
      socket.resume();
    };
    socket.on('data', onData);
    socket.setTimeout(firstByteMs);
    socket.once('timeout', tooSlow);
  });
}
