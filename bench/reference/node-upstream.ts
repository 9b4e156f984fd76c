/**
 * The optional Node upstream (BENCH_UPSTREAM=node): one process answering every request with the same
 * 100-byte body as the nginx upstream. It is the weaker upstream the figures were probably
 * taken with; one Node event loop caps every proxy in front of it, so ratios compress toward 1. The
 * default upstream stays nginx.
 *
 * Usage: node bench/reference/node-upstream.ts <listen port>
 */
import { createServer } from 'node:http';
import { BODY, BODY_BYTES } from '../body.ts';

const [port] = process.argv.slice(2);
if (port === undefined) throw new Error('usage: node-upstream.ts <port>');

const headers = { 'content-type': 'text/plain', 'content-length': String(BODY_BYTES) };
const server = createServer((req, res) => {
  // Drain any request body so that the keep-alive connection can carry the next request.
  req.resume();
  res.writeHead(200, headers).end(BODY);
});
// Like nginx's keepalive_requests 1000000 and a long keep-alive timeout: never the one closing.
server.keepAliveTimeout = 60_000;
server.listen(Number(port), '127.0.0.1');
