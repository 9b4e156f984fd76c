import http from 'node:http';
import type { Socket } from 'node:net';
import { ADMIN_CONNECTIONS } from '../client-limits.ts';
import { sendError } from '../errors.ts';
import { registry } from '../observe/metrics.ts';
import { reloadRecords } from '../observe/reload-journal.ts';
import { buildStatus, type StatusModel, sharedFor } from '../observe/status.ts';
import type { RoutingTable } from '../routing/types.ts';
import type { Phase } from '../runtime.ts';
import { renderStatusPage } from './status-page.ts';

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
  /** What /status and /status.json show (observe/status). */
  status(): Promise<StatusModel>;
  /**
   * `DELETE /cache`: removes the response cache's entries of a host key under a path prefix, in
   * every process that has a store (docs/traffic.md#response-cache); resolves with how many.
   */
  purgeCache?(hostKey: string, prefix: string): Promise<{ purged: number; missing?: number }>;
}

/** How long one /status build is reused: a reload loop costs one build per second (see sharedFor). */
const STATUS_REUSE_MS = 1_000;

/** What the admin port reports of the configuration served: readiness and the live table. */
export interface ServedConfig {
  readonly phase: Phase;
  table(): RoutingTable;
}

/** A single process: ready once its own listeners are bound; its own registry. */
export function processSources(runtime: ServedConfig): AdminSources {
  return {
    readiness: () =>
      runtime.phase === 'ready'
        ? { ready: true, body: { status: 'ready', config_hash: runtime.table().hash } }
        : { ready: false, body: { status: runtime.phase } },
    metrics: () => registry.metrics(),
    status: async () =>
      buildStatus({
        now: Date.now(),
        phase: runtime.phase,
        table: runtime.table(),
        metrics: await registry.getMetricsAsJSON(),
        reloads: reloadRecords(),
        workers: null,
      }),
  };
}

/**
 * The admin listener: what the kubelet probes and Prometheus scrapes. Kept apart from the proxy port
 * so neither can be reached through a route, and so it stays up while the proxy drains. Nothing it
 * serves changes state (docs/security.md, "The admin port"): it only reports, except `DELETE /cache`,
 * which empties part of the response cache (docs/traffic.md#response-cache), as internal as /status.
 *
 * Its connections are capped (ADMIN_CONNECTIONS), and a probe must never find the cap taken by
 * connections that hold it open: at the cap, a new connection evicts the one that waited longest
 * without a request being answered on it (silent, trickling headers, idle keep-alive, or not reading
 * its answer). Only connections whose request is being computed right now are never evicted, and
 * those take milliseconds; a hard ceiling of twice the cap bounds even those.
 */
export function createAdminServer(sources: AdminSources): http.Server {
  const status = sharedFor(STATUS_REUSE_MS, () => sources.status());
  const served: AdminSources = { ...sources, status };
  // Insertion order is the eviction order: a connection moves to the end when it was last served.
  const open = new Map<Socket, { computing: number }>();
  const server = http.createServer(async (req, res) => {
    const state = open.get(req.socket);
    if (state) state.computing += 1;
    try {
      const path = (req.url ?? '/').split('?', 1)[0];
      if (path === '/cache') return await purgeCache(served, req, res);
      const route = path !== undefined && Object.hasOwn(ADMIN_ROUTES, path) ? ADMIN_ROUTES[path] : undefined;
      if (route === undefined) return sendError(res, 'not_found', undefined, 'unknown admin path');
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return sendError(res, 'method_not_allowed', { allow: 'GET, HEAD' });
      await route(served, res);
    } finally {
      if (state) {
        state.computing -= 1;
        open.delete(req.socket);
        if (!req.socket.destroyed) open.set(req.socket, state);
      }
    }
  });
  server.maxConnections = ADMIN_CONNECTIONS * 2;
  server.on('connection', (socket: Socket) => {
    if (open.size >= ADMIN_CONNECTIONS) {
      for (const [held, state] of open) {
        if (state.computing > 0) continue;
        open.delete(held);
        held.destroy();
        break;
      }
    }
    open.set(socket, { computing: 0 });
    socket.once('close', () => open.delete(socket));
  });
  return server;
}

/** `DELETE /cache?host=<host key>&prefix=<path prefix>`: 200 with `{"purged": n}` (0 when nothing matched). */
async function purgeCache(sources: AdminSources, req: http.IncomingMessage, res: http.ServerResponse) {
  if (req.method !== 'DELETE') return sendError(res, 'method_not_allowed', { allow: 'DELETE' });
  if (sources.purgeCache === undefined)
    return sendError(res, 'not_found', undefined, 'no response cache here');
  const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
  const host = query.get('host')?.trim().toLowerCase() ?? '';
  const prefix = query.get('prefix') ?? '/';
  if (host === '')
    return sendError(res, 'bad_request', undefined, "'host' is required: a host key of upstreams.yaml");
  if (!prefix.startsWith('/') || /[\s?#]/.test(prefix))
    return sendError(res, 'bad_request', undefined, "'prefix' must be a path starting with '/'");
  const { purged, missing } = await sources.purgeCache(host === 'default' ? 'DEFAULT' : host, prefix);
  json(res, 200, missing ? { purged, workers_not_answering: missing } : { purged }, {
    'cache-control': 'no-store',
  });
}

type AdminRoute = (sources: AdminSources, res: http.ServerResponse) => void | Promise<void>;

const ADMIN_ROUTES: Record<string, AdminRoute> = {
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
  // Read-only, like everything here; never cached by a browser or proxy: it is a live view.
  '/status': async (sources, res) => {
    const body = renderStatusPage(await sources.status());
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      // Nothing on the page runs or loads: no script, no frame, only its own inline style.
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    });
    res.end(body);
  },
  '/status.json': async (sources, res) =>
    json(res, 200, await sources.status(), { 'cache-control': 'no-store' }),
};

function json(
  res: http.ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify(value);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}
