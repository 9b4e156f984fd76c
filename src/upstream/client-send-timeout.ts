import http2 from 'node:http2';
import { clientSendTimeoutsTotal } from '../admin/metrics.ts';
import { http2StreamOf } from '../local-response.ts';
import type { ProxyRequest } from '../pipeline/request.ts';

const { NGHTTP2_CANCEL } = http2.constants;

/** `client_send_timeout_seconds` when a forwarder is built without it (tests); main.yaml's default. */
export const DEFAULT_CLIENT_SEND_TIMEOUT_MS = 60_000;

/** Why Tollgate cut a response short: the access log's `reason` (docs/errors.md "Responses cut short"). */
export type CutReason = 'client_send_timeout';

/**
 * Resets the response of a client that took none of it for `client_send_timeout_seconds`
 * (docs/security.md "Client limits"): an HTTP/2 stream gets RST_STREAM CANCEL (its connection and
 * other streams live on); an HTTP/1.1 response can only be abandoned with its connection. Counted
 * and marked for the access log. The caller aborts the upstream request.
 */
function cutStalledResponse(request: ProxyRequest): void {
  const { res } = request;
  if (res.destroyed) return;
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
  readonly #request: ProxyRequest;
  readonly #resume: () => void;
  readonly #abort: () => void;
  readonly #timer: NodeJS.Timeout;
  #waiting = false;

  constructor(request: ProxyRequest, timeoutMs: number, resume: () => void, abort: () => void) {
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
