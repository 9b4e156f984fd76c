/**
 * The trace collector of the `tollgate-tracing` target: takes OTLP/HTTP `POST /v1/traces` and answers
 * 200 at once, reading and discarding the body (a real collector runs elsewhere; its CPU is not the
 * proxy's and is not charged to the target). `/ping` answers 200 for the start-up check.
 *
 * Usage: node bench/reference/otlp-sink.ts <listen port>
 */
import { createServer } from 'node:http';

const [port] = process.argv.slice(2);
if (port === undefined) throw new Error('usage: otlp-sink.ts <port>');

let spansBytes = 0;
const server = createServer((req, res) => {
  req.on('data', (chunk: Buffer) => {
    spansBytes += chunk.length;
  });
  req.on('end', () => {
    if (req.url === '/ping') {
      res.writeHead(200, { 'content-length': '2' }).end('OK');
      return;
    }
    res.writeHead(req.method === 'POST' && req.url === '/v1/traces' ? 200 : 404, {
      'content-type': 'application/x-protobuf',
      'content-length': '0',
    });
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(port), '127.0.0.1');
// Says how much arrived when stopped, so a run that exported nothing is visible in the bench output.
process.on('SIGTERM', () => {
  process.stderr.write(`otlp-sink: ${spansBytes} bytes of spans received\n`);
  process.exit(0);
});
