import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import { type ErrorCode, sendError } from '../errors.ts';
import { hasBody, http2StreamOf, isGrpcRequest } from '../local-response.ts';
import { upstreamRejectedTotal } from '../observe/metrics.ts';
import type { ClientSpan, ForwardingRequest } from '../request/record.ts';
import { upstreamTarget } from '../request/targets.ts';
import type { UpstreamServer } from '../routing/types.ts';
import type { ForwardObserver } from './attempt-observer.ts';
import {
  ClientSendTimer,
  DEFAULT_CLIENT_SEND_TIMEOUT_MS,
  watchEndedResponse,
} from './client-send-timeout.ts';
import { type AttemptFailure, classifyUpstreamError } from './failure.ts';
import { addVary, clientResponseHeaders, earlyHintHeaders, upstreamRequestHeaders } from './headers.ts';
import { sendMirrors } from './mirror.ts';
import { tlsServerName, type UpstreamDispatcher, type UpstreamPools, type Wire, wireFor } from './pools.ts';
import { RetryState } from './retry.ts';
import { failoverIndex, retryIndex, spareServer } from './server-choice.ts';
import type { QueueOutcome, Release } from './slots.ts';

export interface ForwarderDeps {
  pools: UpstreamPools;
  observer: ForwardObserver;
  /**
   * `upstream_response_timeout_seconds` in ms. A gRPC call is cut only after this long with no
   * message either way (and at its `grpc-timeout`), not by undici's headers and body timers: a
   * client-streaming call gets its response headers only at the end (docs/traffic.md#grpc).
   */
  responseTimeoutMs?: number;
  /**
   * `client_send_timeout_seconds` in ms: how long a response may wait for a client that takes none
   * of it before it is reset and its upstream request aborted (docs/security.md "Client limits").
   */
  sendTimeoutMs?: number;
}

/**
 * What a WebSocket upgrade adds to a forwarded request: the upstream's 101 is checked by `accept`
 * (null = acceptable, else why not), then the upgraded upstream socket is handed to `open`.
 */
export interface UpgradeHooks {
  accept(statusCode: number, headers: IncomingHttpHeaders): string | null;
  open(upstream: Duplex, headers: IncomingHttpHeaders): void;
}

/** An upstream that answered an upgrade with no valid WebSocket handshake: it was reached. */
const BAD_HANDSHAKE: AttemptFailure = Object.freeze({ kind: 'protocol', unreachable: false });

/**
 * Streams the request to the first candidate server and the response back to the client, trying
 * the next candidate when a server cannot be reached (which one, and whether, server choice says:
 * upstream/server-choice.ts). Never buffers a body: backpressure flows both ways (undici pauses
 * reading the upstream while the client socket is full).
 */
export function createForwarder(deps: ForwarderDeps): (request: ForwardingRequest) => void {
  return (request) => {
    // Gateway API RequestMirror: copies go out beside, never before or instead of, this request.
    const mirrors = request.route.mirrors;
    if (mirrors != null) sendMirrors(request, mirrors, deps.pools);
    // A Gateway API rule's `retry` (upstream/retry.ts); a route without one allocates nothing more.
    const retry = request.route.retry;
    attempt(request, deps, 0, null, retry == null ? null : new RetryState(request, retry));
  };
}

/**
 * The same path for a WebSocket upgrade: same pools, connect timeout, failover, failure classes and
 * passive health as a plain request; only the upstream's answer is handled differently (docs/
 * architecture.md "Upstream layer").
 */
export function forwardUpgrade(request: ForwardingRequest, deps: ForwarderDeps, hooks: UpgradeHooks): void {
  attempt(request, deps, 0, hooks, null);
}

/** Takes a connection slot of `server` (waiting in its queue if need be), then dispatches. */
function attempt(
  request: ForwardingRequest,
  deps: ForwarderDeps,
  index: number,
  upgrade: UpgradeHooks | null,
  retry: RetryState | null,
): void {
  const server = request.candidates[index];
  if (server === undefined) {
    if (request.cacheTap?.error(true) === true) return;
    sendError(request.res, 'bad_gateway');
    return;
  }
  const slots = deps.pools.slots(server);
  const release = slots.tryAcquire(request.route.id);
  if (release !== null) {
    new UpstreamExchange(request, deps, index, upgrade, server, release, retry).send();
    return;
  }
  // This server is at its limit: server choice may name a later candidate with a free slot.
  const spare = spareServer(request, index, (other) => deps.pools.slots(other).tryAcquire(request.route.id));
  if (spare !== null) {
    new UpstreamExchange(request, deps, spare.index, upgrade, spare.server, spare.release, retry).send();
    return;
  }
  request.upstream = server;
  const onClientGone = () => {
    waitingFor = null;
  };
  let waitingFor: ((outcome: QueueOutcome) => void) | null = (outcome) => {
    request.res.off('close', onClientGone);
    if (!outcome.ok) {
      upstreamRejectedTotal.inc({ route: request.route.id, server: server.address, reason: outcome.reason });
      if (request.cacheTap?.error(true) === true) return;
      sendError(request.res, 'upstream_busy');
      return;
    }
    new UpstreamExchange(request, deps, index, upgrade, server, outcome.release, retry).send();
  };
  request.res.once('close', onClientGone);
  slots.wait(request.route.id, (outcome) => {
    if (waitingFor === null) {
      // The client left while queued: the slot goes straight back.
      if (outcome.ok) outcome.release();
      return;
    }
    waitingFor(outcome);
  });
}

/**
 * One attempt to forward a request to one server: the undici dispatch handler that streams the
 * upstream's answer into the client's response. An object with its state in fields: the handler's
 * callbacks as closures were a share of the per-request allocations (docs/benchmark.md).
 */
class UpstreamExchange implements Dispatcher.DispatchHandler {
  #call: GrpcCall | null = null;
  controller: Dispatcher.DispatchController | null = null;
  #trailersOnly: { statusCode: number; outgoing: IncomingHttpHeaders } | null = null;
  #responded = false;
  #finished = false;
  #clientGone = false;
  /** The response cache answered the client in place of this response (see ResponseTap). */
  #tapped = false;
  /** This attempt's CLIENT span when the request is traced (docs/observability.md#tracing). */
  #span: ClientSpan | null = null;
  /** The client's `close`/`aborted` listener (one closure per exchange, so it can be removed). */
  readonly #onClientGone = () => this.#clientClosed();
  /** Made at the first back-pressure only (see #pauseUntilDrained). */
  #sendTimer: ClientSendTimer | null = null;
  /** This attempt's answer was dropped to be retried (upstream/retry.ts): its abort is ours. */
  #retried = false;

  readonly request: ForwardingRequest;
  readonly deps: ForwarderDeps;
  readonly index: number;
  readonly upgrade: UpgradeHooks | null;
  readonly server: UpstreamServer;
  readonly release: Release;
  readonly retry: RetryState | null;
  readonly withBody: boolean;
  readonly grpc: boolean;
  readonly wire: Wire;

  constructor(
    request: ForwardingRequest,
    deps: ForwarderDeps,
    index: number,
    upgrade: UpgradeHooks | null,
    server: UpstreamServer,
    release: Release,
    retry: RetryState | null,
  ) {
    this.request = request;
    this.deps = deps;
    this.index = index;
    this.upgrade = upgrade;
    this.server = server;
    this.release = release;
    this.retry = retry;
    this.withBody = upgrade === null && hasBody(request.req);
    this.grpc = upgrade === null && isGrpcRequest(request.req);
    // WebSockets are HTTP/1.1 whatever the path's protocol (an HTTP/2 connection cannot carry them here).
    this.wire = upgrade === null ? wireFor(server, this.grpc) : 'h1';
  }

  /** Sends the request to this exchange's server. */
  send(): void {
    const { request, server, deps, withBody, wire } = this;
    request.upstream = server;
    const { req, res } = request;
    const path = upstreamTarget(request);
    const options: Dispatcher.DispatchOptions & { servername?: string } = {
      origin: server.origin,
      method: req.method ?? 'GET',
      path,
      headers: upstreamRequestHeaders(request, request.secure ? 'https' : 'http', request.rawHost),
      body: withBody ? (request.body ?? req) : null,
      upgrade: this.upgrade === null ? null : 'websocket',
    };
    // A TLS server's name is the route's, never the client's Host (undici reconnects when it changes).
    const servername = tlsServerName(server);
    if (servername !== undefined) options.servername = servername;
    if (request.trace !== null)
      this.#span = request.trace.upstreamAttempt(request, server, options.headers as string[]);
    // A path's `timeouts` (docs/traffic.md#timeouts) over main.yaml's, which the pool carries.
    const timeouts = request.route.timeouts;
    if (this.grpc) {
      this.#call = grpcCall(request, timeouts?.responseMs ?? deps.responseTimeoutMs ?? 0, this);
      options.headersTimeout = 0;
      options.bodyTimeout = 0;
    } else if (timeouts != null) {
      if (timeouts.responseMs !== null) options.headersTimeout = timeouts.responseMs;
      if (timeouts.idleMs !== null) options.bodyTimeout = timeouts.idleMs;
    }
    this.#watchClient();
    if (this.retry !== null) this.retry.begin(this);
    // `Expect: 100-continue` (the server's checkContinue goes to the normal handler): the client is
    // told to send its body only now that the pipeline admitted the request and a connection is ready.
    if (withBody && !res.headersSent && expectsContinue(req.headers.expect)) res.writeContinue();
    let pool: UpstreamDispatcher;
    try {
      pool = deps.pools.dispatcher(server, wire, this.grpc);
    } catch {
      // A TLS file gone since validation read it (the reloads keep the last good copy once read).
      this.onResponseError(
        null as never,
        Object.assign(new Error('upstream TLS material unavailable'), { code: 'ERR_SSL_NO_MATERIAL' }),
      );
      return;
    }
    pool.dispatch(options, this);
  }

  /** Listens for the client leaving, which releases the upstream request. */
  #watchClient(): void {
    const { req, res } = this.request;
    // `on`: a response closes once, and #done() removes it; `once` would allocate a wrapper.
    res.on('close', this.#onClientGone);
    // A request body the client abandoned must never look complete upstream: node:http2's
    // compatibility request ends its body cleanly when the stream is reset (a content-length the DATA
    // frames contradict, RST_STREAM), and says so only by 'aborted', before that end.
    if (this.withBody) req.on('aborted', this.#onClientGone);
    if ((req as { aborted?: boolean }).aborted === true) this.#clientClosed();
  }

  /** The client went away: release the upstream request instead of reading a response nobody wants. */
  #clientClosed(): void {
    // Once the cache answered, the upstream's answer is still read whole: the cache stores it.
    if (this.#finished || this.#tapped) return;
    this.#clientGone = true;
    this.controller?.abort(new Error('client closed the connection'));
  }

  #done(spanError?: string): void {
    this.#finished = true;
    this.#span?.end(spanError);
    this.#call?.stop();
    this.#sendTimer?.finish();
    const { req, res } = this.request;
    res.off('close', this.#onClientGone);
    if (this.withBody) req.off('aborted', this.#onClientGone);
    this.release();
  }

  onRequestStart(ctrl: Dispatcher.DispatchController): void {
    this.controller = ctrl;
    if (this.#clientGone) ctrl.abort(new Error('client closed the connection'));
    else if (this.request.res.destroyed) this.#clientClosed();
  }

  onResponseStart(
    ctrl: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    statusMessage?: string,
  ): void {
    const { request, upgrade } = this;
    const { req, res } = request;
    if (statusCode < 200) {
      // Informational (103 Early Hints…): never the final answer. Early hints are passed on to
      // HTTP/1.1 clients; any other 1xx is only for this hop.
      if (statusCode === 103 && upgrade === null) passEarlyHints(request, headers);
      return;
    }
    if (this.retry !== null && this.#retriesAnswer(ctrl, statusCode)) return;
    this.#responded = true;
    this.#span?.responded(statusCode);
    this.deps.observer.onUpstreamSuccess(request, this.server);
    if (request.cacheTap?.head(statusCode, headers) === true) {
      this.#tapped = true;
      return;
    }
    if (res.destroyed) return;
    const outgoing = clientResponseHeaders(
      headers,
      request.responseCookies,
      request.responseHeaders,
      request.route.responseHeaders,
    );
    // Responses of a CORS route differ by Origin: caches must keep them apart (docs/policies.md#cors).
    if (request.route.policy?.cors != null) addVary(outgoing, 'Origin');
    if (this.#call !== null && headers['grpc-status'] !== undefined) {
      // A gRPC "trailers-only" answer: held until we know whether a body follows (see onResponseEnd).
      this.#trailersOnly = { statusCode, outgoing };
      return;
    }
    // HTTP/2 has no reason phrase (node:http2 warns when given one).
    if (statusMessage && req.httpVersionMajor === 1) res.writeHead(statusCode, statusMessage, outgoing);
    else res.writeHead(statusCode, outgoing);
    if (res.writableNeedDrain) this.#pauseUntilDrained(ctrl);
  }

  /**
   * A status the route's `retry` names, while nothing reached the client: this answer is dropped
   * (its connection aborted, the body unread) and the request sent again (see #retryAfter).
   */
  #retriesAnswer(ctrl: Dispatcher.DispatchController, statusCode: number): boolean {
    const retry = this.retry as RetryState;
    if (this.request.res.headersSent || !retry.retriesStatus(statusCode, this.withBody)) {
      retry.answered();
      return false;
    }
    this.#retried = true;
    this.#span?.responded(statusCode);
    this.deps.observer.onUpstreamSuccess(this.request, this.server);
    ctrl.abort(new Error('answer dropped to be retried'));
    return true;
  }

  /** After the backoff, the request goes again, to the server server choice names next (this one done). */
  #retryAfter(reason: 'status' | AttemptFailure['kind']): void {
    const { request, deps, upgrade } = this;
    const retry = this.retry as RetryState;
    if (this.#clientGone || request.res.destroyed) return;
    retry.after(reason, () => attempt(request, deps, retryIndex(request, this.index), upgrade, retry));
  }

  onResponseData(ctrl: Dispatcher.DispatchController, chunk: Buffer): void {
    const { request } = this;
    const { res } = request;
    request.cacheTap?.data(chunk);
    if (this.#tapped) return;
    request.responseBytes += chunk.length;
    this.#call?.alive();
    if (this.#trailersOnly !== null) {
      res.writeHead(this.#trailersOnly.statusCode, this.#trailersOnly.outgoing);
      this.#trailersOnly = null;
    }
    if (!res.write(chunk)) this.#pauseUntilDrained(ctrl);
  }

  /**
   * The client's socket or stream holds all it will buffer: the upstream is read no further until
   * the client takes some of it ('drain', bytes actually accepted, not queued). A client that takes
   * nothing for the send timeout (an HTTP/2 window left at 0, an HTTP/1.1 reader that stopped) would
   * hold the upstream connection for good: its response is reset and the upstream request aborted.
   */
  #pauseUntilDrained(ctrl: Dispatcher.DispatchController): void {
    ctrl.pause();
    if (this.#sendTimer !== null) this.#sendTimer.stalled();
    else
      this.#sendTimer = new ClientSendTimer(
        this.request,
        this.deps.sendTimeoutMs ?? DEFAULT_CLIENT_SEND_TIMEOUT_MS,
        () => ctrl.resume(),
        () => this.#clientClosed(),
      );
  }

  onResponseEnd(
    _ctrl: Dispatcher.DispatchController,
    trailers: Record<string, string | string[] | undefined>,
  ): void {
    const { res, cacheTap } = this.request;
    this.#done();
    cacheTap?.end();
    if (this.#tapped) return;
    if (this.#trailersOnly !== null) {
      endTrailersOnly(res, this.#trailersOnly.statusCode, this.#trailersOnly.outgoing);
      return;
    }
    // gRPC's status travels in trailers (docs/traffic.md#grpc); an HTTP/1.1 client gets them when
    // the response is chunked.
    const relayed = clientTrailers(trailers);
    if (relayed !== null && !res.destroyed) res.addTrailers(relayed);
    res.end();
    // Handed over whole, it may still wait for a client whose window is closed.
    watchEndedResponse(this.request, this.deps.sendTimeoutMs ?? DEFAULT_CLIENT_SEND_TIMEOUT_MS);
  }

  onRequestUpgrade(
    _ctrl: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    socket: Duplex,
  ): void {
    const { request, upgrade, server } = this;
    const { res } = request;
    this.#span?.responded(statusCode);
    this.#done();
    const incoming = headers as IncomingHttpHeaders;
    const problem = upgrade === null ? 'an upgrade nobody asked for' : upgrade.accept(statusCode, incoming);
    if (problem !== null) {
      // No raw tunnel without a proper WebSocket handshake: the socket could carry anything.
      socket.destroy();
      this.deps.observer.onUpstreamFailure(request, server, BAD_HANDSHAKE);
      sendError(res, 'bad_gateway', undefined, `the upstream's WebSocket handshake is not valid: ${problem}`);
      return;
    }
    this.deps.observer.onUpstreamSuccess(request, server);
    if (res.destroyed) {
      socket.destroy();
      return;
    }
    upgrade?.open(socket, incoming);
  }

  /** `error.type` of a failed attempt's span: the failure class, or who ended it. */
  #spanError(error: Error): string {
    if (this.#clientGone || (this.request.res.destroyed && !this.#responded)) return 'client_closed';
    if ((error as NodeJS.ErrnoException).code === 'UND_ERR_INVALID_ARG') return 'invalid_request';
    if (this.#call?.expired) return 'deadline_exceeded';
    return classifyUpstreamError(error).kind;
  }

  onResponseError(_ctrl: Dispatcher.DispatchController, error: Error): void {
    const { request, deps, server } = this;
    const { res, cacheTap } = request;
    // A retried answer's span keeps its status as error.type (docs/observability.md#tracing).
    this.#done(this.#span === null || this.#retried ? undefined : this.#spanError(error));
    const code = (error as NodeJS.ErrnoException).code;
    if (this.#retried) {
      this.#retryAfter('status');
      return;
    }
    if (code === 'UND_ERR_INVALID_ARG') {
      cacheTap?.error(false);
      // undici refused to send this request (a header it considers invalid): the client's fault,
      // not the upstream's, and the pool needs replacing (see UpstreamPools.replace).
      deps.pools.replace(server, this.wire, this.grpc);
      sendError(res, 'bad_request', undefined, 'the request cannot be forwarded as sent');
      return;
    }
    // The client left first (mid-download or before the answer), or its body was refused on the way
    // (docs/policies.md#max_body_bytes, already answered): not the upstream's failure.
    if (this.#clientGone || (res.destroyed && !this.#responded)) {
      cacheTap?.error(false);
      return;
    }
    if ((error as { clientSide?: boolean }).clientSide === true) {
      cacheTap?.error(false);
      return;
    }
    if (this.#call?.expired) {
      // The call's own deadline (grpc-timeout): the caller's budget, not the server's failure.
      if (this.#responded) {
        res.addTrailers({ 'grpc-status': '4', 'grpc-message': 'deadline exceeded' });
        res.end();
      } else sendError(res, 'gateway_timeout', undefined, 'the gRPC deadline (grpc-timeout) passed');
      return;
    }
    const failure = classifyUpstreamError(error);
    deps.observer.onUpstreamFailure(request, server, failure, error);
    if (this.#responded) {
      // A body cut short is never stored; the cache may already have answered the client itself.
      cacheTap?.error(false);
      if (this.#tapped) return;
      // The upstream broke mid-body: the client must see a truncated response, not a clean end.
      res.destroy(error);
      return;
    }
    const next = failoverIndex(request, this.index, failure, this.withBody);
    if (next !== -1) {
      attempt(request, deps, next, this.upgrade, this.retry);
      return;
    }
    if (this.retry !== null) {
      if (this.retry.retriesFailure(failure, this.withBody)) {
        this.#retryAfter(failure.kind);
        return;
      }
      // Retries spent on servers that never answered: 503, as the Gateway API's retry cases expect.
      if (!this.withBody && !this.retry.expired && failure.answer === 'bad_gateway') {
        if (cacheTap?.error(true) === true) return;
        sendError(res, 'upstream_unavailable');
        return;
      }
    }
    // The last server failed too: a stale copy the upstream allowed (stale-if-error) beats an error.
    if (cacheTap?.error(true) === true) return;
    const answer: ErrorCode = failure.answer;
    sendError(res, answer);
  }
}

/**
 * A gRPC answer with no body, its status in the headers: on HTTP/2 it must be one HEADERS frame
 * ending the stream (the compatibility API would add an empty DATA frame, which gRPC clients read
 * as a response missing its trailers).
 */
function endTrailersOnly(
  res: ForwardingRequest['res'],
  statusCode: number,
  outgoing: IncomingHttpHeaders,
): void {
  if (res.destroyed) return;
  const stream = http2StreamOf(res);
  if (stream === null || stream.headersSent) {
    res.writeHead(statusCode, outgoing);
    res.end();
    return;
  }
  res.statusCode = statusCode;
  stream.respond({ ...outgoing, ':status': statusCode }, { endStream: true });
}

/** Trailers worth passing on (hop-by-hop ones never are); null when there are none. */
function clientTrailers(trailers: Record<string, string | string[] | undefined> | null | undefined) {
  if (trailers === null || trailers === undefined) return null;
  let out: Record<string, string | string[]> | null = null;
  for (const name in trailers) {
    const value = trailers[name];
    if (value === undefined || TRAILERS_NEVER_RELAYED.has(name)) continue;
    out ??= {};
    out[name] = value;
  }
  return out;
}

const TRAILERS_NEVER_RELAYED = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'te',
  'trailer',
  'upgrade',
]);

interface GrpcCall {
  /** True once the call's grpc-timeout passed (its abort is then not the upstream's failure). */
  readonly expired: boolean;
  /** A message went either way: the idle timer starts again. */
  alive(): void;
  stop(): void;
}

/**
 * The timers of one gRPC call (docs/traffic.md#grpc): its `grpc-timeout` deadline, and an idle limit
 * of the response timeout that every request or response chunk resets, so a live stream is never
 * cut by a timer meant for a silent server.
 */
function grpcCall(
  request: ForwardingRequest,
  idleMs: number,
  exchange: { readonly controller: Dispatcher.DispatchController | null },
): GrpcCall {
  let expired = false;
  let idle: NodeJS.Timeout | null = null;
  const deadlineMs = parseGrpcTimeout(request.req.headers['grpc-timeout']);
  const abort = (why: string) =>
    exchange.controller?.abort(Object.assign(new Error(why), { code: 'UND_ERR_HEADERS_TIMEOUT' }));
  const deadline =
    deadlineMs === null
      ? null
      : setTimeout(() => {
          expired = true;
          abort('the gRPC deadline passed');
        }, deadlineMs);
  const alive = () => {
    if (idleMs <= 0) return;
    if (idle === null)
      idle = setTimeout(() => abort('no gRPC message either way for the response timeout'), idleMs);
    else idle.refresh();
  };
  alive();
  // Each request message is a sign of life too, watched on the HTTP/2 stream under the request once
  // the request flows (node:http2's compatibility request reads that stream only from then on, and a
  // listener added earlier would take the data from it). gRPC clients speak HTTP/2; over HTTP/1.1
  // only the response's messages count.
  const stream = http2StreamOf(request.req);
  const watch = () => stream?.on('data', alive);
  if (stream !== null) {
    if (request.req.readableFlowing === true) watch();
    else request.req.once('resume', watch);
  }
  return {
    get expired() {
      return expired;
    },
    alive,
    stop() {
      if (deadline !== null) clearTimeout(deadline);
      if (idle !== null) clearTimeout(idle);
      stream?.off('data', alive);
      request.req.off('resume', watch);
    },
  };
}

const GRPC_TIMEOUT_UNITS: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

/** `grpc-timeout: 1S`, `250m`…: at most 8 digits and a unit (gRPC over HTTP/2); null when absent or malformed. */
export function parseGrpcTimeout(value: string | string[] | undefined): number | null {
  if (typeof value !== 'string') return null;
  const match = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (match === null) return null;
  const ms = Number(match[1]) * (GRPC_TIMEOUT_UNITS[match[2] as string] as number);
  // setTimeout's ceiling; a longer deadline is no deadline in practice.
  return Math.min(Math.max(1, Math.ceil(ms)), 2_147_483_647);
}

function expectsContinue(expect: string | undefined): boolean {
  return expect !== undefined && expect.toLowerCase() === '100-continue';
}

function passEarlyHints(
  request: ForwardingRequest,
  headers: Record<string, string | string[] | undefined>,
): void {
  const { req, res } = request;
  if (res.headersSent || req.httpVersionMajor !== 1 || req.httpVersionMinor < 1) return;
  const hints = earlyHintHeaders(headers);
  if (hints === null) return;
  try {
    res.writeEarlyHints(hints);
  } catch {
    // A Link value Node refuses to write: the hint is optional, the final response is not.
  }
}
