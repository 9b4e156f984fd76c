import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * Small auth services on loopback that follow the documented forward-auth contracts of two products
 * teams already run, so the forward-auth tests exercise what Tollgate will meet in production:
 *
 * - oauth2-proxy `GET /oauth2/auth` (its "auth endpoint" for nginx auth_request / Traefik
 *   ForwardAuth): 202 Accepted with `X-Auth-Request-User` / `-Email` (with --set-xauthrequest) when
 *   the session cookie `_oauth2_proxy` is valid, 401 Unauthorized otherwise; `GET /oauth2/start?rd=`
 *   begins the sign-in (302 to the provider).
 * - Authelia `GET /api/authz/forward-auth` (its ForwardAuth implementation): reads
 *   X-Forwarded-Method/-Proto/-Host/-Uri to rebuild the URL; with a valid `authelia_session` cookie
 *   200 OK with `Remote-User`, `Remote-Groups`, `Remote-Name`, `Remote-Email`; without one, a browser
 *   request (GET/HEAD) gets 302 Found and any other method 303 See Other to the portal with
 *   `rd=<the original URL>&rm=<method>`; a session without access to that URL gets 403.
 *
 * Every check it receives is recorded (method, headers, body bytes). `mode` switches it to failure
 * behaviours: `slow` never answers, `error` answers 500.
 */
export interface AuthServiceCheck {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  bodyBytes: number;
  /** The client port of the connection the check came on: the same port again means keep-alive. */
  remotePort: number;
}

export interface AuthService {
  readonly origin: string;
  readonly checks: AuthServiceCheck[];
  mode: 'normal' | 'slow' | 'error';
  close(): Promise<void>;
}

export const OAUTH2_PROXY_COOKIE = '_oauth2_proxy=valid-session-alice';
export const AUTHELIA_COOKIE = 'authelia_session=valid-session-bob';
export const AUTHELIA_PORTAL = 'https://auth.example.com/';

async function serve(
  handle: (req: http.IncomingMessage, res: http.ServerResponse) => void,
  host = '127.0.0.1',
): Promise<AuthService> {
  const checks: AuthServiceCheck[] = [];
  const service: AuthService = {
    origin: '',
    checks,
    mode: 'normal',
    close: async () => {},
  };
  const server = http.createServer(async (req, res) => {
    let bodyBytes = 0;
    for await (const chunk of req) bodyBytes += (chunk as Buffer).length;
    checks.push({
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      bodyBytes,
      remotePort: req.socket.remotePort ?? 0,
    });
    if (service.mode === 'slow') return; // never answers; closed with the server
    if (service.mode === 'error') {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('internal error');
      return;
    }
    handle(req, res);
  });
  server.listen(0, host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  Object.assign(service, {
    origin: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  });
  return service;
}

const hasCookie = (req: http.IncomingMessage, cookie: string) =>
  (req.headers.cookie ?? '').split(';').some((pair) => pair.trim() === cookie);

/**
 * The address of this machine that is not loopback, or null: an Ingress's auth-url may not name
 * loopback (docs/ingress.md), so Ingress tests reach their auth service there.
 */
export function nonLoopbackAddress(): string | null {
  for (const addresses of Object.values(networkInterfaces()))
    for (const address of addresses ?? [])
      if (!address.internal && address.family === 'IPv4') return address.address;
  return null;
}

/** `host`: the address to listen on (default loopback). */
export function startOauth2Proxy(host?: string): Promise<AuthService> {
  return serve((req, res) => {
    const url = new URL(req.url ?? '/', 'http://oauth2-proxy');
    if (url.pathname === '/oauth2/auth') {
      if (hasCookie(req, OAUTH2_PROXY_COOKIE)) {
        res.writeHead(202, {
          'x-auth-request-user': 'alice',
          'x-auth-request-email': 'alice@example.com',
          // Refreshed session cookie, as oauth2-proxy sends when it renews one.
          'set-cookie': '_oauth2_proxy=refreshed; Path=/; HttpOnly',
        });
        res.end();
        return;
      }
      res.writeHead(401, {
        'content-type': 'text/plain; charset=utf-8',
        'set-cookie': '_oauth2_proxy_csrf=csrf-token; Path=/; HttpOnly',
      });
      res.end('Unauthorized');
      return;
    }
    if (url.pathname === '/oauth2/start') {
      res.writeHead(302, {
        location: `https://idp.example.com/authorize?state=${url.searchParams.get('rd')}`,
      });
      res.end();
      return;
    }
    res.writeHead(404);
    res.end();
  }, host);
}

export function startAuthelia(): Promise<AuthService> {
  return serve((req, res) => {
    const url = new URL(req.url ?? '/', 'http://authelia');
    if (url.pathname !== '/api/authz/forward-auth') {
      res.writeHead(404);
      res.end();
      return;
    }
    const method = String(req.headers['x-forwarded-method'] ?? '');
    const target = `${req.headers['x-forwarded-proto']}://${req.headers['x-forwarded-host']}${req.headers['x-forwarded-uri']}`;
    if (hasCookie(req, AUTHELIA_COOKIE)) {
      if (String(req.headers['x-forwarded-uri']).startsWith('/authelia/admin')) {
        res.writeHead(403, { 'content-type': 'text/html; charset=utf-8' });
        res.end('<h1>403 Forbidden</h1>');
        return;
      }
      res.writeHead(200, {
        'remote-user': 'bob',
        'remote-groups': 'admins,dev',
        'remote-name': 'Bob',
        'remote-email': 'bob@example.com',
      });
      res.end();
      return;
    }
    const location = `${AUTHELIA_PORTAL}?rd=${encodeURIComponent(target)}&rm=${method}`;
    const browser = method === 'GET' || method === 'HEAD';
    res.writeHead(browser ? 302 : 303, { location, 'content-type': 'text/html; charset=utf-8' });
    res.end(`<a href="${location}">${browser ? 302 : 303}</a>`);
  });
}
