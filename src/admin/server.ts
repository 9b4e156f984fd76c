import http from 'node:http';
import { sendError } from '../errors.ts';
import type { Runtime } from '../runtime.ts';
import { registry } from './metrics.ts';

/** What /readyz answers: 200 with a body when ready, 503 with the reason otherwise. */
export interface Readiness {
  ready: boolean;
  body: Record<string, unknown>;
}

/**
 * Where /readyz and /metrics come from when this process is not the whole Tollgate: the primary of
 * a set of workers reports their readiness and their summed metrics (docs/workers.md).
 */
export interface AdminSources {
  readiness(): Readiness;
  metrics(): Promise<string>;
}

/** A single process: ready once its own listeners are bound; its own registry. */
function processSources(runtime: Runtime): AdminSources {
  return {
    readiness: () =>
      runtime.phase === 'ready'
        ? { ready: true, body: { status: 'ready', config_hash: runtime.table().hash } }
        : { ready: false, body: { status: runtime.phase } },
    metrics: () => registry.metrics(),
  };
}

/**
 * The admin listener: what the kubelet probes and Prometheus scrapes. Kept apart from the proxy port
 * so neither can be reached through a route, and so it stays up while the proxy drains.
 */
export function createAdminServer(
  runtime: Runtime,
  sources: AdminSources = processSources(runtime),
): http.Server {
  return http.createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    const route = path !== undefined && Object.hasOwn(ADMIN_ROUTES, path) ? ADMIN_ROUTES[path] : undefined;
    if (route === undefined) return sendError(res, 'not_found', undefined, 'unknown admin path');
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return sendError(res, 'method_not_allowed', { allow: 'GET, HEAD' });
    await route(sources, res, req.url ?? '/');
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

type AdminRoute = (sources: AdminSources, res: http.ServerResponse, url: string) => void | Promise<void>;

const ADMIN_ROUTES: Record<string, AdminRoute> = {
  '/drain': (_sources, res, url) => drain(res, url),
  '/healthz': (_sources, res) => json(res, 200, { status: 'ok' }),
  '/readyz': (sources, res) => {
    const { ready, body } = sources.readiness();
    json(res, ready ? 200 : 503, body);
  },
  '/metrics': async (sources, res) => {
    const body = await sources.metrics();
    res.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  },
};

function json(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
