import type { ServerResponse } from 'node:http';
import { ERRORS, type ErrorCode } from '../errors.ts';
import { writeLocalResponse } from '../local-response.ts';
import type { Answer, Pass, Redirect } from '../request/verdict.ts';

/**
 * Making a stage's verdict (its shapes are in request/verdict.ts, beside the request record):
 * stages only decide; `respond` is the one place a decision becomes bytes on the wire, so no stage
 * can half-write a response, and the HTTP and WebSocket paths answer alike.
 */

/** One shared object: passing allocates nothing on the hot path. */
export const PASS: Pass = Object.freeze({ kind: 'pass' });

/**
 * An error from the catalogue as a small JSON body: `{"error": code, "message": …}`, never a stack
 * trace. `message` overrides the catalogue's wording with something more precise.
 */
export function refuse(
  code: ErrorCode,
  headers: Readonly<Record<string, string>> = {},
  message: string = ERRORS[code].message,
): Answer {
  return {
    kind: 'answer',
    status: ERRORS[code].status,
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ error: code, message }),
    error: code,
  };
}

/**
 * An answer that is not one of the proxy's errors: the 303 of a browser-link exchange, or a
 * forward-auth service's refusal relayed as it came.
 */
export function answer(
  status: number,
  headers: Readonly<Record<string, string | readonly string[]>>,
  body: string | Buffer,
  representation = false,
): Answer {
  return representation
    ? { kind: 'answer', status, headers, body, representation }
    : { kind: 'answer', status, headers, body };
}

export function redirect(status: Redirect['status'], location: string): Redirect {
  return { kind: 'redirect', status, location };
}

/** Writes a stage's answer. Too late for a status (headers already out): the response is cut short. */
export function respond(res: ServerResponse, verdict: Answer | Redirect): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (verdict.kind === 'redirect') {
    const headers = {
      ...verdict.headers,
      location: verdict.location,
      'content-type': 'text/plain; charset=utf-8',
    };
    writeLocalResponse(res, verdict.status, headers, `Redirecting to ${verdict.location}\n`);
    return;
  }
  writeLocalResponse(res, verdict.status, verdict.headers, verdict.body, verdict.representation === true);
}
