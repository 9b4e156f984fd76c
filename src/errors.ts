import type { ServerResponse } from 'node:http';
import { writeLocalResponse } from './local-response.ts';

/**
 * The error catalogue: every error Tollgate answers with, by stable code. Logs, metrics and tests refer
 * to these codes; the HTTP layer only ever sends one through sendError, so bodies stay small JSON and
 * never carry a stack trace.
 */
export const ERRORS = {
  not_found: { status: 404, message: 'no route matches this host and path' },
  bad_path: { status: 400, message: 'the request path is not acceptable' },
  bad_request: { status: 400, message: 'the request is malformed' },
  method_not_allowed: { status: 405, message: 'method not allowed' },
  bad_gateway: { status: 502, message: 'no upstream server answered' },
  gateway_timeout: { status: 504, message: 'the upstream server did not answer in time' },
  no_healthy_upstream: { status: 503, message: 'every upstream server of this route is down' },
  upstream_unavailable: {
    status: 503,
    message: "no upstream server answered within this route's retries",
  },
  upstream_busy: { status: 503, message: 'the upstream server has no free connection; try again' },
  no_ready_endpoints: { status: 503, message: "the route's Kubernetes Service has no ready endpoint" },
  rate_limited: { status: 429, message: 'too many requests' },
  missing_credentials: { status: 401, message: 'authentication required' },
  invalid_credentials: { status: 401, message: 'authentication failed' },
  token_expired: { status: 401, message: 'the token has expired' },
  token_invalid: { status: 401, message: 'the token is not valid' },
  token_revoked: { status: 401, message: 'the token has been revoked' },
  token_out_of_scope: { status: 403, message: 'the token is not valid for this resource' },
  login_required: { status: 401, message: 'log in first: no valid session' },
  headers_too_large: { status: 431, message: 'request headers too large' },
  request_timeout: { status: 408, message: 'the request headers did not arrive in time' },
  unsupported_media_type: { status: 415, message: 'Content-Type must be application/json' },
  payload_too_large: { status: 413, message: 'request body too large' },
  body_too_large: { status: 413, message: "the request body is larger than this route's max_body_bytes" },
  source_denied: { status: 403, message: 'the client address is not allowed on this route' },
  forbidden: { status: 403, message: 'master_key is not valid' },
  token_issuance_disabled: { status: 503, message: 'no masterkey is configured: token issuance is disabled' },
  auth_misconfigured: {
    status: 503,
    message: "this route's authentication cannot be set up; it stays closed until it can",
  },
  auth_overloaded: { status: 503, message: 'too many password checks are waiting; try again shortly' },
  auth_unavailable: {
    status: 503,
    message: 'the authentication service did not answer usably; try again shortly',
  },
  auth_failures: {
    status: 429,
    message: 'too many failed authentications from this client; try again later',
  },
  client_certificate_required: {
    status: 401,
    message: 'this route needs a verified client certificate (mutual TLS)',
  },
  misdirected_request: {
    status: 421,
    message:
      "this connection's TLS server name asks for other client certificates than this host; connect again",
  },
  internal_error: { status: 500, message: 'internal error' },
  backend_not_resolved: { status: 500, message: "this route's backend cannot be resolved" },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

/** Sends `{"error": code, "message": …}` with the catalogue's status. Safe to call once headers are out. */
export function sendError(
  res: ServerResponse,
  code: ErrorCode,
  headers?: Record<string, string | number | string[]>,
  message: string = ERRORS[code].message,
): void {
  const { status } = ERRORS[code];
  if (res.headersSent) {
    // Too late for a status: the only honest signal left is to cut the response short.
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: code, message });
  writeLocalResponse(res, status, { ...headers, 'content-type': 'application/json' }, body);
}
