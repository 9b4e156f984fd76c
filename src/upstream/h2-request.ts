import http2 from 'node:http2';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { PooledSession } from './h2-pooled-session.ts';

const { NGHTTP2_CANCEL } = http2.constants;

/** undici's headersTimeout and bodyTimeout, in ms (0: none); a request's own options override them. */
export interface H2RequestTimeouts {
  headersMs: number;
  bodyMs: number;
}

/**
 * Request headers HTTP/2 forbids (RFC 9113 §8.2.2; node:http2 throws on them). The forwarder already
 * drops hop-by-hop headers; `host` becomes `:authority`.
 */
const NOT_ON_HTTP2: ReadonlySet<string> = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/**
 * One request on one stream of a pooled `node:http2` session, seen by the forwarder's handler as an
 * undici dispatch (the same callbacks and controller), so failover, failure classes, trailers,
 * timeouts and backpressure are the forwarder's one code path whichever client carries the request
 * (docs/architecture.md "Upstream layer"). Errors carry the codes undici would give: a request
 * refused as invalid is UND_ERR_INVALID_ARG, the timers are UND_ERR_HEADERS_TIMEOUT/BODY_TIMEOUT.
 */
export class H2Request implements Dispatcher.DispatchController {
  readonly #options: Dispatcher.DispatchOptions;
  readonly #handler: Dispatcher.DispatchHandler;
  readonly #scheme: string;
  readonly #headersMs: number;
  readonly #bodyMs: number;
  #stream: http2.ClientHttp2Stream | null = null;
  #pooled: PooledSession | null = null;
  #timer: NodeJS.Timeout | null = null;
  #timerMs = 0;
  #trailers: http2.IncomingHttpHeaders | null = null;
  #responded = false;
  #finished = false;
  #paused = false;
  #reason: Error | null = null;

  constructor(
    options: Dispatcher.DispatchOptions,
    handler: Dispatcher.DispatchHandler,
    scheme: string,
    timeouts: H2RequestTimeouts,
  ) {
    this.#options = options;
    this.#handler = handler;
    this.#scheme = scheme;
    this.#headersMs = options.headersTimeout ?? timeouts.headersMs;
    this.#bodyMs = options.bodyTimeout ?? timeouts.bodyMs;
  }

  get aborted(): boolean {
    return this.#reason !== null;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get reason(): Error | null {
    return this.#reason;
  }

  /** Tells the handler the request starts; false when it aborted it already. */
  begin(): boolean {
    this.#handler.onRequestStart?.(this, {});
    return !this.#finished;
  }

  abort(reason: Error): void {
    if (this.#finished) return;
    this.#reason = reason;
    this.fail(reason);
  }

  pause(): void {
    this.#paused = true;
    this.#stream?.pause();
    // undici's body timer does not run while the consumer holds the response back.
    this.#clearTimer();
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    if (this.#finished) return;
    this.#arm(this.#bodyMs);
    this.#stream?.resume();
  }

  /** Opens the stream on `pooled` (a stream of it is taken for this request) and sends the body. */
  start(pooled: PooledSession): void {
    this.#pooled = pooled;
    if (this.#finished) {
      this.#releaseStream();
      return;
    }
    const { body } = this.#options;
    let stream: http2.ClientHttp2Stream;
    try {
      stream = pooled.session.request(this.#requestHeaders(), {
        endStream: body === null || body === undefined,
      });
    } catch (error) {
      this.#releaseStream();
      const code = (error as NodeJS.ErrnoException).code ?? '';
      // A session closing under us (GOAWAY, reset) never saw the request: the next server may be tried.
      if (code === 'ERR_HTTP2_INVALID_SESSION' || code === 'ERR_HTTP2_GOAWAY_SESSION') {
        pooled.usable = false;
        this.fail(Object.assign(new Error((error as Error).message), { code: 'ERR_HTTP2_GOAWAY_SESSION' }));
        return;
      }
      // A header node:http2 refuses: the client's request, as undici reports it.
      this.fail(Object.assign(new Error((error as Error).message), { code: 'UND_ERR_INVALID_ARG' }));
      return;
    }
    this.#stream = stream;
    // The same seven functions for every stream (they find their request on it), not seven
    // closures per request: a gRPC call is small enough for that to show (docs/benchmark.md#grpc).
    (stream as RequestStream)[REQUEST] = this;
    stream.on('close', onClose);
    stream.on('error', onError);
    stream.on('headers', onInformational);
    stream.on('response', onResponse);
    stream.on('trailers', onTrailers);
    stream.on('data', onData);
    stream.on('end', onEnd);
    this.#arm(this.#headersMs);
    if (body instanceof Readable) body.pipe(stream);
    else if (typeof body === 'string' || body instanceof Uint8Array) stream.end(body);
  }

  /** The request ends in error (once): the stream is cancelled and the handler told. */
  fail(error: Error): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#clearTimer();
    const stream = this.#stream;
    if (stream !== null) {
      const { body } = this.#options;
      if (body instanceof Readable) body.unpipe(stream);
      if (!stream.closed) stream.close(NGHTTP2_CANCEL);
    }
    this.#handler.onResponseError?.(this, error);
  }

  #requestHeaders(): http2.OutgoingHttpHeaders {
    const { method, path, headers } = this.#options;
    const out: http2.OutgoingHttpHeaders = { ':method': method, ':path': path, ':scheme': this.#scheme };
    const list = headers as string[] | null | undefined;
    if (!Array.isArray(list)) return out;
    for (let i = 0; i < list.length; i += 2) {
      const name = (list[i] as string).toLowerCase();
      const value = list[i + 1] as string;
      if (name === 'host') out[':authority'] = value;
      if (NOT_ON_HTTP2.has(name)) continue;
      const previous = out[name];
      if (previous === undefined) out[name] = value;
      else out[name] = Array.isArray(previous) ? [...previous, value] : [String(previous), value];
    }
    return out;
  }

  /**
   * Starts the response timer for `ms`, or restarts the running one when it already runs for as
   * long (the headers and body timeouts are usually one value: one timer per request, not two).
   * Whether it is the headers or the body timeout is read when it fires.
   */
  #arm(ms: number): void {
    if (ms <= 0) return;
    if (this.#timer !== null && this.#timerMs === ms) {
      this.#timer.refresh();
      return;
    }
    this.#clearTimer();
    this.#timerMs = ms;
    this.#timer = setTimeout(() => {
      const code = this.#responded ? 'UND_ERR_BODY_TIMEOUT' : 'UND_ERR_HEADERS_TIMEOUT';
      const what = this.#responded ? 'body' : 'headers';
      this.fail(Object.assign(new Error(`upstream response ${what} timeout`), { code }));
    }, ms);
  }

  #clearTimer(): void {
    if (this.#timer === null) return;
    clearTimeout(this.#timer);
    this.#timer = null;
  }

  #releaseStream(): void {
    const pooled = this.#pooled;
    this.#pooled = null;
    pooled?.give();
  }

  // The stream's events, through the shared listeners below.

  onInformational(headers: http2.IncomingHttpHeaders): void {
    const status = Number(headers[':status']);
    if (status >= 100 && status < 200)
      this.#handler.onResponseStart?.(this, status, withoutPseudo(headers), '');
  }

  onResponse(headers: http2.IncomingHttpHeaders): void {
    if (this.#finished) return;
    this.#responded = true;
    // The body timer, if any, starts once the handler has the headers (it may pause at once).
    const timer = this.#timer;
    if (timer !== null && this.#timerMs !== this.#bodyMs) this.#clearTimer();
    this.#handler.onResponseStart?.(this, Number(headers[':status']), withoutPseudo(headers), '');
    if (this.#finished) return;
    if (this.#paused) this.#clearTimer();
    else this.#arm(this.#bodyMs);
  }

  onData(chunk: Buffer): void {
    if (this.#finished) return;
    if (!this.#paused) this.#timer?.refresh();
    this.#handler.onResponseData?.(this, chunk);
  }

  onTrailers(trailers: http2.IncomingHttpHeaders): void {
    this.#trailers = trailers;
  }

  onEnd(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#clearTimer();
    this.#handler.onResponseEnd?.(this, (this.#trailers ?? {}) as Record<string, string | string[]>);
  }

  onError(error: Error): void {
    this.fail(error);
  }

  /** The stream is gone: its place on the session is free; gone before its end is a reset. */
  onClose(): void {
    this.#releaseStream();
    if (this.#finished) return;
    const stream = this.#stream as http2.ClientHttp2Stream;
    const reset = Object.assign(
      new Error(
        this.#responded
          ? 'the upstream HTTP/2 stream closed before the response ended'
          : `the upstream HTTP/2 stream closed before a response (code ${stream.rstCode ?? 'none'})`,
      ),
      { code: 'ECONNRESET' },
    );
    this.fail(reset);
  }
}

/** The request a stream carries, set on the stream when it opens. */
const REQUEST = Symbol('tollgate.h2Request');

type RequestStream = http2.ClientHttp2Stream & { [REQUEST]: H2Request };

function onClose(this: RequestStream): void {
  this[REQUEST].onClose();
}
function onError(this: RequestStream, error: Error): void {
  this[REQUEST].onError(error);
}
function onInformational(this: RequestStream, headers: http2.IncomingHttpHeaders): void {
  this[REQUEST].onInformational(headers);
}
function onResponse(this: RequestStream, headers: http2.IncomingHttpHeaders): void {
  this[REQUEST].onResponse(headers);
}
function onTrailers(this: RequestStream, trailers: http2.IncomingHttpHeaders): void {
  this[REQUEST].onTrailers(trailers);
}
function onData(this: RequestStream, chunk: Buffer): void {
  this[REQUEST].onData(chunk);
}
function onEnd(this: RequestStream): void {
  this[REQUEST].onEnd();
}

/** Response headers as undici gives them: no pseudo-headers. */
function withoutPseudo(headers: http2.IncomingHttpHeaders): Record<string, string | string[] | undefined> {
  const out: Record<string, string | string[] | undefined> = {};
  for (const name in headers) if (name.charCodeAt(0) !== 0x3a) out[name] = headers[name];
  return out;
}
