import type { ServerResponse } from 'node:http';

/**
 * Responses Tollgate writes itself (errors, redirects) go through here, so the access log can report
 * their size: res.getHeader cannot see headers passed to writeHead as an object, and these bodies are
 * not counted by the forwarder. The WeakMap entry goes away with the response.
 */
const bodyBytes = new WeakMap<ServerResponse, number>();

export function writeLocalResponse(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | number>,
  body: string,
): void {
  const length = Buffer.byteLength(body);
  bodyBytes.set(res, length);
  res.writeHead(status, { ...headers, 'content-length': length });
  res.end(body);
}

/** Body bytes of a response written by writeLocalResponse, or 0. */
export function localResponseBytes(res: ServerResponse): number {
  return bodyBytes.get(res) ?? 0;
}
