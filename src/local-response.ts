import type { IncomingHttpHeaders, ServerResponse } from 'node:http';

/** Whether a request carries a body at all (RFC 9112 §6.3). */
export function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Responses Tollgate writes itself (errors, redirects) go through here, so the access log can report
 * their size: res.getHeader cannot see headers passed to writeHead as an object, and these bodies are
 * not counted by the forwarder. The WeakMap entry goes away with the response.
 */
const bodyBytes = new WeakMap<ServerResponse, number>();

export function writeLocalResponse(
  res: ServerResponse,
  status: number,
  headers: Readonly<Record<string, string | number | readonly string[]>>,
  body: string | Buffer,
): void {
  const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  bodyBytes.set(res, length);
  // An answer given before the request body arrived (401, 429, 404…): close rather than let Node read
  // and discard a body that a hostile client can trickle in forever to keep the connection.
  const unreadBody = res.req !== undefined && hasBody(res.req.headers) && !res.req.complete;
  res.writeHead(status, {
    ...(headers as Record<string, string | number | string[]>),
    'content-length': length,
    ...(unreadBody ? { connection: 'close' } : {}),
  });
  res.end(body);
}

/** Body bytes of a response written by writeLocalResponse, or 0. */
export function localResponseBytes(res: ServerResponse): number {
  return bodyBytes.get(res) ?? 0;
}
