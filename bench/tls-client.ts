/**
 * The load generator of the client-certificate targets (docs/benchmark.md): neither wrk nor h2load
 * presents a client certificate, so a node:https client in its own process keeps `connections`
 * requests in flight for `seconds`, with or without a certificate, either on keep-alive connections
 * (a request on a verified connection) or on a new connection per request (a full handshake each;
 * Tollgate does not resume sessions while client certificates are configured). Prints one JSON line:
 * { requests, seconds, errors, badStatuses }.
 *
 * Usage: node bench/tls-client.ts <url> <host> <seconds> <connections> <keepalive|handshake> [cert key]
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';

const [url, host, secondsText, connectionsText, mode, certFile, keyFile] = process.argv.slice(2);
if (url === undefined || host === undefined || mode === undefined)
  throw new Error(
    'usage: tls-client.ts <url> <host> <seconds> <connections> <keepalive|handshake> [cert key]',
  );
const seconds = Number(secondsText ?? 5);
const connections = Number(connectionsText ?? 16);
const credentials =
  certFile === undefined || keyFile === undefined
    ? {}
    : { cert: readFileSync(certFile), key: readFileSync(keyFile) };
const agent =
  mode === 'keepalive'
    ? new Agent({ keepAlive: true, maxSockets: connections, rejectUnauthorized: false, ...credentials })
    : false;

let requests = 0;
let errors = 0;
let badStatuses = 0;
const started = process.hrtime.bigint();
const deadline = Date.now() + seconds * 1000;

function one(): Promise<void> {
  return new Promise((resolve) => {
    const outgoing = request(url as string, {
      headers: { host: host as string },
      agent,
      rejectUnauthorized: false,
      ...(agent === false ? credentials : {}),
    });
    outgoing.on('error', () => {
      errors++;
      resolve();
    });
    outgoing.on('response', (response) => {
      response.resume();
      response.on('end', () => {
        requests++;
        if ((response.statusCode ?? 0) >= 400) badStatuses++;
        resolve();
      });
    });
    outgoing.end();
  });
}

async function loop(): Promise<void> {
  while (Date.now() < deadline) await one();
}

await Promise.all(Array.from({ length: connections }, loop));
const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
process.stdout.write(`${JSON.stringify({ requests, seconds: elapsed, errors, badStatuses })}\n`);
if (agent !== false) agent.destroy();
