/**
 * Reference target `http-proxy-3`: the smallest proxy built with http-proxy-3 (the other Node
 * calibration point in docs/benchmark.md), with a keep-alive agent to the upstream (its
 * default would open a connection per request) and `xfwd` on so that it sets X-Forwarded-* like the
 * other targets.
 *
 * Usage: node bench/reference/http-proxy-3-proxy.ts <listen port> <upstream origin>
 */
import { Agent, createServer, ServerResponse } from 'node:http';
import { createProxyServer } from 'http-proxy-3';

const [port, origin] = process.argv.slice(2);
if (port === undefined || origin === undefined)
  throw new Error('usage: http-proxy-3-proxy.ts <port> <origin>');

const proxy = createProxyServer({
  target: origin,
  agent: new Agent({ keepAlive: true, maxSockets: 128 }),
  xfwd: true,
});
// Without a listener an upstream error would crash the process; answer 502 like the others.
proxy.on('error', (_error, _req, res) => {
  if (!(res instanceof ServerResponse)) res.destroy();
  else if (res.headersSent) res.destroy();
  else res.writeHead(502).end();
});

createServer((req, res) => proxy.web(req, res)).listen(Number(port), '127.0.0.1');
