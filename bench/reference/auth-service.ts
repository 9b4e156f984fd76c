/**
 * The forward-auth service of the `tollgate-forward` target: what oauth2-proxy's `/oauth2/auth` does
 * per request, and nothing more: 202 with `X-Auth-Request-User` when the session cookie is there, 401
 * otherwise, on a keep-alive connection (`/ping` answers 200, as oauth2-proxy's does). Its CPU is charged to the target, as a real auth service's
 * would be on the same machine.
 *
 * Usage: node bench/reference/auth-service.ts <listen port>
 */
import { createServer } from 'node:http';
import { BENCH_SESSION_COOKIE } from '../auth-session.ts';

const [port] = process.argv.slice(2);
if (port === undefined) throw new Error('usage: auth-service.ts <port>');

const server = createServer((req, res) => {
  req.resume();
  // oauth2-proxy's own health endpoint.
  if (req.url === '/ping') {
    res.writeHead(200, { 'content-length': '2' }).end('OK');
    return;
  }
  const cookie = req.headers.cookie ?? '';
  if (cookie.split(';').some((pair) => pair.trim() === BENCH_SESSION_COOKIE)) {
    res.writeHead(202, { 'x-auth-request-user': 'bench', 'content-length': '0' }).end();
  } else {
    res.writeHead(401, { 'content-type': 'text/plain', 'content-length': '12' }).end('Unauthorized');
  }
});
server.keepAliveTimeout = 60_000;
server.listen(Number(port), '127.0.0.1');
