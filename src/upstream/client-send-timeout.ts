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
export function cutStalledResponse(request: ProxyRequest): void {
  const { res } = request;
  if (res.destroyed) return;
  request.cutShort = 'client_send_timeout';
  clientSendTimeoutsTotal.inc({ route: request.route.id });
  const stream = http2StreamOf(res);
  if (stream !== null) stream.close(NGHTTP2_CANCEL);
  else res.destroy();
}
