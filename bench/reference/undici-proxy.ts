/**
 * Reference target `undici-minimal`: the kind of hand-written ~20-line undici reverse proxy that a
 * Node proxy's throughput is judged against (docs/benchmark.md). It does the same job per
 * request as nginx and Tollgate in the bench — forwards method, path and headers, adds X-Forwarded-*,
 * drops hop-by-hop headers both ways, streams both bodies — and nothing more: no routing table, no
 * stages, no metrics, no logging. Measured in the same run, it shows what a Node proxy can reach
 * against this bench's nginx, so Tollgate's ratio can be read against it.
 *
 * Usage: node bench/reference/undici-proxy.ts <listen port> <upstream origin> [reuseport]
 * With `reuseport`, several copies can listen on the same port and the kernel spreads connections
 * over them: the Node ceiling for Tollgate's workers.
 */
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [port, origin, sharing] = process.argv.slice(2);
if (port === undefined || origin === undefined) throw new Error('usage: undici-proxy.ts <port> <origin>');

// The same pool size as nginx's `keepalive 128` and the http-proxy-3 reference's agent.
const pool = new Pool(origin, { connections: 128 });
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
]);

type Headers = Record<string, string | string[] | undefined>;

function endToEnd(headers: Headers): Headers {
  const kept: Headers = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && !HOP_BY_HOP.has(name)) kept[name] = value;
  return kept;
}

createServer((req, res) => {
  const headers = endToEnd(req.headers);
  headers['x-forwarded-for'] = req.socket.remoteAddress;
  headers['x-forwarded-proto'] = 'http';
  headers['x-forwarded-host'] = req.headers.host;
  const hasBody =
    req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  // pool.stream writes the upstream body straight into `res` (no intermediate Readable); a client
  // abort destroys `res`, which aborts the upstream request.
  pool.stream(
    {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers,
      body: hasBody ? req : null,
    },
    ({ statusCode, headers: upstreamHeaders }) => {
      res.writeHead(statusCode, endToEnd(upstreamHeaders));
      return res;
    },
    (error) => {
      if (error === null) return;
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    },
  );
}).listen({ port: Number(port), host: '127.0.0.1', reusePort: sharing === 'reuseport' });
