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
    const state: SessionState = {
      session,
      open,
      limits,
      windowStart: 0,
      resets: 0,
    };
    session.on('stream', (stream: ServerHttp2Stream) => {
      open.add(stream);
      if (!started) {
        started = true;
        session.setTimeout(limits.idleMs);
      }
      // Module functions that find their session on the stream, not closures made for each stream:
      // a gRPC call is small enough for those to show (docs/benchmark.md#grpc). `on`, not `once`
      // (a wrapper per call): each of these events comes at most once per stream.
      (stream as LimitedStream)[SESSION] = state;
      stream.on('close', forgetStream);
      // node:http2 announces streams on the next tick, after the whole read was parsed: a stream
      // opened and reset in the same burst is already aborted when we first see it.
      if (stream.aborted) countReset(state);
      else stream.on('aborted', onAborted);
      if (stream.endAfterHeaders) return;
      // While the body arrives, silence is the client's; once it has all arrived, waiting is ours.
      stream.setTimeout(limits.bodyIdleMs, onBodyIdle);
      stream.on('end', onBodyEnd);
    });
  });
}

/** What the limits keep per connection. */
interface SessionState {
  readonly session: ServerHttp2Session;
  /** Streams not yet closed. */
  readonly open: Set<ServerHttp2Stream>;
  readonly limits: Http2ConnectionLimits;
  /** The one-second window of the rapid-reset count, and the resets in it. */
  windowStart: number;
  resets: number;
}

const SESSION = Symbol('tollgate.http2Limits');

type LimitedStream = ServerHttp2Stream & { [SESSION]: SessionState };

function forgetStream(this: LimitedStream): void {
  this[SESSION].open.delete(this);
}

function onAborted(this: LimitedStream): void {
  countReset(this[SESSION]);
}

/** Silence while the body arrives: the client's, the stream is cancelled. */
function onBodyIdle(this: LimitedStream): void {
  if (!this.readableEnded) this.close(NGHTTP2_CANCEL);
}

function onBodyEnd(this: LimitedStream): void {
  this.setTimeout(0);
}

function countReset(state: SessionState): void {
  const now = performance.now();
  if (now - state.windowStart >= 1000) {
    state.windowStart = now;
    state.resets = 0;
  }
  const { session } = state;
  if (++state.resets <= state.limits.maxResetsPerSecond || session.closed || session.destroyed) return;
  // GOAWAY ENHANCE_YOUR_CALM: no new stream is accepted, the connection closes once the
  // streams in flight are gone (at the latest a second later). Destroying it at once could
  // drop the GOAWAY before it is written.
  session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
  session.close();
  setTimeout(() => session.destroy(), 1000).unref();
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
