import http from 'node:http';
import { sendError } from '../errors.ts';
import type { Runtime } from '../runtime.ts';
import { registry } from './metrics.ts';

/**
 * The admin listener: what the kubelet probes and Prometheus scrapes. Kept apart from the proxy port
 * so neither can be reached through a route, and so it stays up while the proxy drains.
 */
export function createAdminServer(runtime: Runtime): http.Server {
  return http.createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    const route = ADMIN_ROUTES[path as keyof typeof ADMIN_ROUTES];
    if (route === undefined) return sendError(res, 'not_found', undefined, 'unknown admin path');
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return sendError(res, 'method_not_allowed', { allow: 'GET, HEAD' });
    await route(runtime, res);
  });
}

const ADMIN_ROUTES = {
  '/healthz': (_runtime: Runtime, res: http.ServerResponse) => json(res, 200, { status: 'ok' }),
  '/readyz': (runtime: Runtime, res: http.ServerResponse) =>
    runtime.phase === 'ready'
      ? json(res, 200, { status: 'ready', config_hash: runtime.table().hash })
      : json(res, 503, { status: runtime.phase }),
  '/metrics': async (_runtime: Runtime, res: http.ServerResponse) => {
    const body = await registry.metrics();
    res.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  },
};

function json(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
