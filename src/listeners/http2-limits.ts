import http2, {
  type Http2SecureServer,
  type Http2Server,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Http2Limits } from '../config/types.ts';

const { NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

export interface Http2ConnectionLimits extends Pick<Http2Limits, 'maxResetsPerSecond'> {
  /** A connection that opens no stream within this time is closed (as HTTP/1.1's first byte). */
  firstByteMs: number;
  /**
   * A connection with no frame for this long is closed (HTTP/1.1 keep-alive) when it has no stream
   * open, or only streams the client takes no byte of (see stalled below).
   */
  idleMs: number;
  /** A request body that stops arriving for this long has its stream cancelled. */
  bodyIdleMs: number;
}

/**
 * The HTTP/2 side of docs/security.md "Client limits": the same first-byte, keep-alive and body
 * timeouts as HTTP/1.1, per connection and per stream rather than per socket (one connection
 * carries many requests), and the rapid-reset cap (CVE-2023-44487): a client that cancels more
 * than `maxResetsPerSecond` streams in a second is sent GOAWAY ENHANCE_YOUR_CALM and cut off, since
 * every stream it opens and cancels costs us a pipeline run (and perhaps an upstream request) it
 * never waits for. Stream concurrency and the header list size are SETTINGS (see listeners.ts).
 *
 * Streams waiting on the upstream keep an idle connection open; streams only waiting on the client
 * (a zero window) do not: such a connection is as idle as one with no stream, and is destroyed, its
 * streams reset and their upstream requests aborted (the forwarder's client_send_timeout_seconds
 * covers the streams of a connection that keeps sending frames). A client that hangs up is
 * forgotten at once (see onHangUp).
 */
export function applyHttp2Limits(
  server: Http2Server | Http2SecureServer,
  limits: Http2ConnectionLimits,
): void {
  server.on('session', (session) => {
    const open = new Set<ServerHttp2Stream>();
    let started = false;
    let windowStart = 0;
    let resets = 0;
    session.setTimeout(limits.firstByteMs, () => {
      if (session.closed || session.destroyed) return;
      if (open.size > 0) {
        // Nothing moved either way for the whole idle time: if every stream is only waiting for the
        // client to take its response, nothing will ever move again.
        for (const stream of open) if (!stalled(stream)) return;
        session.destroy();
        return;
      }
      // Never asked for anything: nothing to finish. Idle after requests: a graceful GOAWAY.
      if (started) session.close();
      else session.destroy();
    });
    onHangUp(session);
    session.on('stream', (stream: ServerHttp2Stream) => {
      open.add(stream);
      if (!started) {
        started = true;
        session.setTimeout(limits.idleMs);
      }
      stream.once('close', () => open.delete(stream));
      const countReset = () => {
        const now = performance.now();
        if (now - windowStart >= 1000) {
          windowStart = now;
          resets = 0;
        }
        if (++resets <= limits.maxResetsPerSecond || session.closed || session.destroyed) return;
        // GOAWAY ENHANCE_YOUR_CALM: no new stream is accepted, the connection closes once the
        // streams in flight are gone (at the latest a second later). Destroying it at once could
        // drop the GOAWAY before it is written.
        session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
        session.close();
        setTimeout(() => session.destroy(), 1000).unref();
      };
      // node:http2 announces streams on the next tick, after the whole read was parsed: a stream
      // opened and reset in the same burst is already aborted when we first see it.
      if (stream.aborted) countReset();
      else stream.once('aborted', countReset);
      if (stream.endAfterHeaders) return;
      // While the body arrives, silence is the client's; once it has all arrived, waiting is ours.
      stream.setTimeout(limits.bodyIdleMs, () => {
        if (!stream.readableEnded) stream.close(NGHTTP2_CANCEL);
      });
      stream.once('end', () => stream.setTimeout(0));
    });
  });
}

/**
 * A stream whose response has bytes the client has not taken: the client's flow-control window is
 * closed (node:http2 completes a write only once nghttp2 sent it).
 */
function stalled(stream: ServerHttp2Stream): boolean {
  return stream.writableLength > 0;
}

/**
 * A client that closes its side of the connection (FIN) will send no frame again, so no stream of
 * it can finish once its window is closed: the session is destroyed at once, which closes every
 * stream and so aborts their upstream requests. node:http2 would only notice on a socket that does
 * not stay half-open, and the h2c sockets come from the HTTP/1.1 server, which keeps them half-open.
 */
function onHangUp(session: ServerHttp2Session): void {
  // The session's socket is a proxy that forwards listeners to the real socket.
  session.socket.once('end', () => {
    if (!session.destroyed) session.destroy();
  });
}
