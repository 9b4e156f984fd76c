import type { StageRequest } from '../request/record.ts';
import type { Answer, Redirect, Verdict } from '../request/verdict.ts';
import { answer, PASS } from './verdict.ts';

const PREFLIGHT_VARY = 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers';

/**
 * `cors` (docs/policies.md#cors). A preflight (`OPTIONS` with `Origin` and
 * `Access-Control-Request-Method`) is answered here with 204, before redirects, rate limits and
 * authentication: browsers send it without credentials, so an authenticated route could never pass
 * it. An allowed origin gets the Access-Control-* headers, a disallowed one none (the browser then
 * refuses). Any other request from an allowed origin goes on with the response headers to add; the
 * forwarder adds `Vary: Origin` to every response of the route (docs/policies.md#cors).
 */
export function corsStage(request: StageRequest): Verdict {
  const cors = request.route.policy?.cors;
  if (cors == null) return PASS;
  const { headers } = request.req;
  const origin = headers.origin;
  if (origin === undefined) return PASS;
  const allowed = cors.allowOrigin(origin);
  const requestMethod = headers['access-control-request-method'];
  if (request.req.method === 'OPTIONS' && requestMethod !== undefined) {
    if (allowed === null) return answer(204, { vary: PREFLIGHT_VARY }, '');
    const asked = headers['access-control-request-headers'];
    return answer(
      204,
      {
        ...cors.preflight(requestMethod, asked),
        'access-control-allow-origin': allowed,
        vary: PREFLIGHT_VARY,
      },
      '',
    );
  }
  if (allowed !== null)
    request.responseHeaders = {
      ...request.responseHeaders,
      ...cors.response,
      'access-control-allow-origin': allowed,
    };
  return PASS;
}

/**
 * A later stage's answer (a 401, a 429, a 413) with the CORS headers this request earned, so a page
 * on an allowed origin can read why it was refused; unchanged on routes without `cors`.
 */
export function withCorsHeaders(request: StageRequest, verdict: Answer | Redirect): Answer | Redirect {
  if (request.route.policy?.cors == null) return verdict;
  // A stored response's own Vary (the response cache's answers) is kept, with Origin added.
  const vary = verdict.headers?.vary;
  const added: Record<string, string> = {
    vary:
      typeof vary === 'string' && /(^|,)\s*origin\s*(,|$)/i.test(vary)
        ? vary
        : vary
          ? `${vary}, Origin`
          : 'Origin',
  };
  const extra = request.responseHeaders;
  if (extra !== null)
    for (const name in extra) if (name.startsWith('access-control-')) added[name] = extra[name] as string;
  // One spread per kind: a redirect's headers are plain strings, an answer's may be lists.
  if (verdict.kind === 'redirect') return { ...verdict, headers: { ...verdict.headers, ...added } };
  return { ...verdict, headers: { ...verdict.headers, ...added } };
}
