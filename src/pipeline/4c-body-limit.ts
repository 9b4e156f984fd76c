import { type Readable, Transform } from 'node:stream';
import { hasBody } from '../local-response.ts';
import type { StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import { withCorsHeaders } from './1b-cors.ts';
import { PASS, refuse, respond } from './verdict.ts';

/**
 * `max_body_bytes` (docs/policies.md#max_body_bytes), after authentication (an anonymous client is
 * told 401, not how large a body may be) and before any upstream is contacted or `100 Continue` is
 * sent. A declared `Content-Length` above the limit is refused with 413 `body_too_large` here; the
 * HTTP layers enforce a declared length, so such a body can never grow past it. A body without one
 * (chunked, or HTTP/2 without content-length) is counted as it streams (limitedBody below).
 */
export function bodyLimitStage(request: StageRequest): Verdict {
  const limit = request.route.policy?.maxBodyBytes;
  if (limit == null) return PASS;
  const { req } = request;
  const declared = req.headers['content-length'];
  if (declared !== undefined) return Number(declared) > limit ? refuse('body_too_large') : PASS;
  if (hasBody(req)) request.body = limitedBody(request, limit);
  return PASS;
}

/**
 * The body of a request whose length was not declared, counted on its way upstream
 * (docs/policies.md#max_body_bytes). Past `limit` bytes nothing more is passed on and the request is
 * cut: the client gets 413 `body_too_large` when nothing was answered yet (its connection closed, or
 * its HTTP/2 stream reset, so the rest is never read), else its response is cut short. The upstream's
 * request is aborted, never ended: a body cut in the middle must not look complete there.
 */
export function limitedBody(request: StageRequest, limit: number): Transform {
  let seen = 0;
  let cut = false;
  // A body an authenticator already started reading (ext_authz include_body_bytes) comes as request.body.
  const source = request.body ?? request.req;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (cut) return callback();
      seen += chunk.length;
      if (seen <= limit) return callback(null, chunk);
      cut = true;
      callback();
      tooLarge(request, source, counter);
    },
  });
  source.pipe(counter);
  return counter;
}

/** Raised through the upstream request when a client's body passed the limit: the client's doing. */
export class BodyTooLargeError extends Error {
  readonly code = 'TOLLGATE_BODY_TOO_LARGE';
  /** Not the upstream's failure: no passive-health mark, no retry (upstream/forward). */
  readonly clientSide = true;
}

function tooLarge(request: StageRequest, source: Readable, counter: Transform): void {
  const { res } = request;
  source.unpipe(counter);
  if (res.headersSent) res.destroy();
  else respond(res, withCorsHeaders(request, refuse('body_too_large')));
  counter.destroy(new BodyTooLargeError('the request body is larger than max_body_bytes'));
}
