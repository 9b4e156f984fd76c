import type { IncomingMessage, ServerResponse } from 'node:http';
import { http2StreamOf } from '../local-response.ts';
import type { Logger } from '../log.ts';
import type { RequestRecorder } from '../observe/requests.ts';
import { withCorsHeaders } from '../pipeline/1b-cors.ts';
import type { Pipeline } from '../pipeline/pipeline.ts';
import { refuse as refusal, respond } from '../pipeline/verdict.ts';
import type { ProxyRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import { DEFAULT_CLIENT_SEND_TIMEOUT_MS, watchEndedResponse } from '../upstream/client-send-timeout.ts';

export interface ProxyHandlerDeps {
  pipeline: Pipeline;
  forward: (request: ProxyRequest) => void;
  recorder: RequestRecorder;
  logger: Logger;
  /** `client_send_timeout_seconds` in ms: also for the pipeline's own answers (401, 429, redirects…). */
  sendTimeoutMs?: number;
}

export interface ProxyHandler {
  /** The `'request'` listener of the proxy's http and https servers. */
  handleRequest(req: IncomingMessage, res: ServerResponse): void;
  /**
   * The `'checkContinue'` listener: a request with `Expect: 100-continue` is told to send its body
   * only once the pipeline admitted it; a refusal (401, 429, a redirect…) goes out without
   * `100 Continue` and the body is never read (docs/traffic.md).
   */
  handleExpectContinue(req: IncomingMessage, res: ServerResponse): void;
}

/**
 * The proxy's HTTP entry point: route the request, run the pipeline, then either forward it
 * (upstream/) or send the pipeline's answer. A request is recorded (metrics, access log) once, when
 * its response closes, whatever the outcome.
 */
export function createProxyHandler(deps: ProxyHandlerDeps): ProxyHandler {
  const { pipeline, forward, recorder, logger } = deps;
  const sendTimeoutMs = deps.sendTimeoutMs ?? DEFAULT_CLIENT_SEND_TIMEOUT_MS;

  const handle = (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => {
    const startedAt = performance.now();
    const routed = pipeline.route(req, res, startedAt);
    if (!routed.ok) {
      refuse(res, routed.verdict, expectsContinue);
      recorder.unrouted(req, res, startedAt, routed);
      return;
    }
    const { request } = routed;
    // `on`, not `once`: a response closes exactly once, and `once` wraps the listener anew for every
    // request (docs/benchmark.md: per-request allocations).
    res.on('close', () => recorder.routed(request));
    const verdict = pipeline.run(request);
    if (verdict instanceof Promise) verdict.then((settled) => admit(request, settled, expectsContinue));
    else admit(request, verdict, expectsContinue);
  };

  /** Defined once, not per request: the synchronous (common) path allocates no closure for it. */
  const admit = (request: ProxyRequest, verdict: Verdict, expectsContinue: boolean) => {
    // Admitted: the forwarder sends `100 Continue` once a connection to the upstream is ready.
    if (verdict.kind !== 'pass') {
      // Refused after the response cache took the request (no healthy server): a stale copy the
      // upstream allowed for errors (stale-if-error) answers instead (docs/traffic.md#response-cache).
      if (request.cacheTap?.error(true) === true) return;
      refuse(request.res, withCorsHeaders(request, verdict), expectsContinue);
      // Small, so written whole: it may still wait for a client whose HTTP/2 window is closed.
      watchEndedResponse(request, sendTimeoutMs);
      return;
    }
    try {
      forward(request);
    } catch (error) {
      logger.error({ err: error }, 'request failed inside the proxy');
      respond(request.res, refusal('internal_error'));
    }
  };

  return {
    handleRequest: (req, res) => handle(req, res, false),
    handleExpectContinue: (req, res) => handle(req, res, true),
  };
}

function refuse(res: ServerResponse, verdict: Exclude<Verdict, { kind: 'pass' }>, expectsContinue: boolean) {
  // The client holds its body back until a 100 that will not come: close the connection after this
  // answer, so what it sends next is never read as a request.
  // (HTTP/2 has no Connection header: the refusal resets the stream instead, see local-response.ts.)
  if (expectsContinue && !res.headersSent && http2StreamOf(res) === null)
    res.setHeader('connection', 'close');
  respond(res, verdict);
}
