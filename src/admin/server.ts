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
    const route = path !== undefined && Object.hasOwn(ADMIN_ROUTES, path) ? ADMIN_ROUTES[path] : undefined;
    if (route === undefined) return sendError(res, 'not_found', undefined, 'unknown admin path');
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return sendError(res, 'method_not_allowed', { allow: 'GET, HEAD' });
    await route(runtime, res, req.url ?? '/');
  });
}

/** Longest wait /drain grants: a preStop hook is bounded by the pod's grace period anyway. */
const MAX_DRAIN_SECONDS = 300;

/**
 * GET /drain?seconds=N answers after N seconds. The preStop hook of an app container behind a Tollgate
 * sidecar calls it (an httpGet handler, so the app image needs no `sleep` binary): the app then
 * outlives the endpoint removal while Tollgate keeps forwarding to it (docs/deployment.md).
 */
async function drain(res: http.ServerResponse, url: string): Promise<void> {
  const text = new URL(url, 'http://admin').searchParams.get('seconds') ?? '5';
  const seconds = /^\d{1,3}$/.test(text) ? Number(text) : Number.NaN;
  if (!(seconds <= MAX_DRAIN_SECONDS))
    return sendError(
      res,
      'bad_request',
      undefined,
      `seconds must be a whole number from 0 to ${MAX_DRAIN_SECONDS}`,
    );
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000).unref());
  json(res, 200, { status: 'drained', waited_seconds: seconds });
}

type AdminRoute = (runtime: Runtime, res: http.ServerResponse, url: string) => void | Promise<void>;

const ADMIN_ROUTES: Record<string, AdminRoute> = {
  '/drain': (_runtime, res, url) => drain(res, url),
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
