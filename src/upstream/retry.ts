import type { Dispatcher } from 'undici';
import type { RetryConfig } from '../config/types.ts';
import { sendError } from '../errors.ts';
import { upstreamRetriesTotal } from '../observe/metrics.ts';
import type { ForwardingRequest } from '../request/record.ts';
import type { UpstreamFailure } from './failure.ts';

/**
 * A Gateway API rule's `retry` for one request (docs/gateway-api.md#retries): whether an attempt's
 * outcome may be retried, after how long, and how many retries are left. The forwarder
 * (upstream/forward.ts) asks it; which server a retry goes to is server choice's
 * (upstream/server-choice.ts retryIndex). Made only for a request whose route has `retry`.
 *
 * - An answer is retried only while nothing of it reached the client (decided at its headers).
 * - A request with a body never is: Tollgate streams bodies and keeps no copy to send again.
 * - A failure before any answer (refused, reset, timed out) is retried like a retried status code;
 *   a TLS failure is not (it will fail the same way).
 * - The rule's `timeouts.request` bounds every attempt and wait together: when it passes before an
 *   answer reached the client, the attempt in flight is abandoned and the client gets 504.
 * - Each attempt's wait for response headers (`timeouts.backendRequest`) is timed here to the
 *   millisecond: undici's own headers timer ticks by half-seconds, too coarse to tell a 200ms
 *   timeout from a 300ms answer, and an attempt that times out is retried.
 */
export class RetryState {
  readonly config: Readonly<RetryConfig>;
  readonly #request: ForwardingRequest;
  #used = 0;
  #expired = false;
  #wait: NodeJS.Timeout | null = null;
  #deadline: NodeJS.Timeout | null = null;
  /** The attempt in flight, aborted when its own time or the budget passes. */
  #current: Attempt | null = null;
  #attemptTimer: NodeJS.Timeout | null = null;
  readonly #attemptMs: number | null;

  constructor(request: ForwardingRequest, config: Readonly<RetryConfig>) {
    this.config = config;
    this.#request = request;
    this.#attemptMs = request.route.timeouts?.responseMs ?? null;
    if (config.budgetMs !== null) this.#deadline = setTimeout(() => this.#expire(), config.budgetMs);
    // The client gone (or the response over): no wait or deadline outlives it.
    request.res.once('close', () => this.stop());
  }

  /** Retries left, and the request's time not up. */
  get #left(): boolean {
    return !this.#expired && this.#used < this.config.attempts;
  }

  /** True when the request's time budget passed. */
  get expired(): boolean {
    return this.#expired;
  }

  /** May an answer with this status be dropped and the request sent again? */
  retriesStatus(statusCode: number, withBody: boolean): boolean {
    return !withBody && this.#left && this.config.codes.includes(statusCode);
  }

  /** May an attempt that failed before any answer be sent again? */
  retriesFailure(failure: UpstreamFailure, withBody: boolean): boolean {
    return !withBody && failure.kind !== 'tls' && this.#left;
  }

  /** An attempt was sent: it is the one a timeout aborts. */
  begin(attempt: Attempt): void {
    this.#current = attempt;
    if (this.#attemptMs === null) return;
    this.#endAttempt();
    this.#attemptTimer = setTimeout(() => {
      this.#attemptTimer = null;
      if (!this.#request.res.headersSent) abortTimedOut(attempt, 'the backend request timeout passed');
    }, this.#attemptMs);
  }

  #endAttempt(): void {
    if (this.#attemptTimer !== null) clearTimeout(this.#attemptTimer);
    this.#attemptTimer = null;
  }

  /** Counts a retry, then waits the backoff and calls `again` (never once the client left). */
  after(reason: 'status' | UpstreamFailure['kind'], again: () => void): void {
    this.#used++;
    this.#endAttempt();
    this.#current = null;
    upstreamRetriesTotal.inc({ route: this.#request.route.id, reason });
    this.#wait = setTimeout(() => {
      this.#wait = null;
      again();
    }, this.config.backoffMs);
  }

  /** An answer is on its way to the client: the budget no longer applies (as for a route without retry). */
  answered(): void {
    this.#endAttempt();
    if (this.#deadline !== null) clearTimeout(this.#deadline);
    this.#deadline = null;
  }

  stop(): void {
    this.answered();
    if (this.#wait !== null) clearTimeout(this.#wait);
    this.#wait = null;
    this.#current = null;
  }

  #expire(): void {
    this.#deadline = null;
    this.#expired = true;
    const { res } = this.#request;
    if (res.headersSent || res.destroyed) return;
    if (this.#wait !== null) {
      clearTimeout(this.#wait);
      this.#wait = null;
      sendError(res, 'gateway_timeout', undefined, "the route's request timeout passed between retries");
      return;
    }
    if (this.#current !== null) abortTimedOut(this.#current, "the route's request timeout passed");
  }
}

/** What RetryState needs of an attempt (upstream/forward.ts UpstreamExchange). */
interface Attempt {
  readonly controller: Dispatcher.DispatchController | null;
}

/** Ends an attempt as undici's headers timeout would: a timeout, answered 504 when not retried. */
function abortTimedOut(attempt: Attempt, why: string): void {
  attempt.controller?.abort(Object.assign(new Error(why), { code: 'UND_ERR_HEADERS_TIMEOUT' }));
}
