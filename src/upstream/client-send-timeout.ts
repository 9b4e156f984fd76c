import http2, { type Http2Stream } from 'node:http2';
import { http2StreamOf } from '../local-response.ts';
import { clientSendTimeoutsTotal } from '../observe/metrics.ts';
import type { ForwardingRequest } from '../request/record.ts';

const { NGHTTP2_CANCEL } = http2.constants;

/** `client_send_timeout_seconds` when a forwarder is built without it (tests); main.yaml's default. */
export const DEFAULT_CLIENT_SEND_TIMEOUT_MS = 60_000;

/**
 * Resets the response of a client that took none of it for `client_send_timeout_seconds`
 * (docs/security.md "Client limits"): an HTTP/2 stream gets RST_STREAM CANCEL (its connection and
 * other streams live on); an HTTP/1.1 response can only be abandoned with its connection. Counted
 * and marked for the access log. The caller aborts the upstream request.
 */
function cutStalledResponse(request: ForwardingRequest): void {
  const { res } = request;
  if (res.destroyed || request.cutShort !== null) return;
  request.cutShort = 'client_send_timeout';
  clientSendTimeoutsTotal.inc({ route: request.route.id });
  const stream = http2StreamOf(res);
  if (stream !== null) stream.close(NGHTTP2_CANCEL);
  else res.destroy();
}

/**
 * The send timeout of one response (docs/security.md "Client limits"). Made at the response's first
 * back-pressure, so a response that flows allocates nothing and arms no timer. `stalled()` is called
 * each time the client's socket or stream takes no more (write() returned false): the upstream stays
 * paused until 'drain', which comes only once the client actually took bytes (sent on its socket,
 * or let through by its HTTP/2 window), not when they were queued. Waiting that long for a 'drain'
 * resets the response and calls `abort` to release the upstream request.
 */
export class ClientSendTimer {
  readonly #request: ForwardingRequest;
  readonly #resume: () => void;
  readonly #abort: () => void;
  readonly #timer: NodeJS.Timeout;
  #waiting = false;

  constructor(request: ForwardingRequest, timeoutMs: number, resume: () => void, abort: () => void) {
    this.#request = request;
    this.#resume = resume;
    this.#abort = abort;
    this.#timer = setTimeout(this.#onTimeout, timeoutMs).unref();
    this.#wait();
  }

  /** The client's socket or stream refused more: wait for its 'drain', for at most the timeout. */
  stalled(): void {
    if (this.#waiting) return;
    this.#wait();
    // One timer per response: refresh() re-arms it from now, whether it fired already or not.
    this.#timer.refresh();
  }

  /**
   * The upstream's part is over. A response still waiting for its client keeps the timer: it then
   * guards the client connection alone (an HTTP/1.1 socket has no other timer while it writes).
   */
  finish(): void {
    if (!this.#waiting || this.#request.res.destroyed) clearTimeout(this.#timer);
  }

  #wait(): void {
    this.#waiting = true;
    this.#request.res.once('drain', this.#onDrain);
  }

  readonly #onDrain = (): void => {
    this.#waiting = false;
    this.#resume();
  };

  readonly #onTimeout = (): void => {
    // Drained since: the timer is left running rather than cleared on every 'drain'.
    if (!this.#waiting) return;
    cutStalledResponse(this.#request);
    this.#abort();
  };
}

/**
 * The responses ended in this turn of the event loop whose HTTP/2 stream still held bytes. A response
 * small enough to be handed over whole never meets back-pressure, so ClientSendTimer never sees it:
 * with the client's window at 0 its stream would stay open, holding memory, for as long as the
 * connection lives. Every stream holds its last bytes for a moment after end() (node:http2 completes
 * a write only once it was sent), so they are looked at again together once the turn's writes went
 * out (one setImmediate for all of them, no timer per response); only those still holding bytes
 * then get a timer.
 */
const endedRequests: ForwardingRequest[] = [];
const endedTimeouts: number[] = [];

/**
 * Called when Tollgate ended a response (docs/security.md "Client limits"): an HTTP/2 stream whose
 * bytes cannot reach the client is reset after `timeoutMs`, as a stalled download is.
 */
export function watchEndedResponse(request: ForwardingRequest, timeoutMs: number): void {
  const stream = http2StreamOf(request.res);
  if (stream === null || stream.writableLength === 0) return;
  if (endedRequests.length === 0) setImmediate(checkEndedResponses);
  endedRequests.push(request);
  endedTimeouts.push(timeoutMs);
}

function checkEndedResponses(): void {
  for (let i = 0; i < endedRequests.length; i++) {
    const request = endedRequests[i] as ForwardingRequest;
    const stream = http2StreamOf(request.res);
    if (stream !== null && !stream.closed && stream.writableLength > 0)
      guardUnflushed(request, stream, endedTimeouts[i] as number);
  }
  endedRequests.length = 0;
  endedTimeouts.length = 0;
}

/**
 * Resets the stream once its last bytes have made no progress for `timeoutMs`. Progress is a write
 * completed (its bytes sent): a client taking a small response slowly is not cut, one that takes
 * nothing is.
 */
function guardUnflushed(request: ForwardingRequest, stream: Http2Stream, timeoutMs: number): void {
  let held = stream.writableLength;
  const timer = setTimeout(() => {
    if (stream.closed || stream.writableLength === 0) return;
    if (stream.writableLength < held) {
      held = stream.writableLength;
      timer.refresh();
      return;
    }
    cutStalledResponse(request);
  }, timeoutMs).unref();
  stream.once('close', () => clearTimeout(timer));
}
