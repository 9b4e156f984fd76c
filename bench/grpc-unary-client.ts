/**
 * The load generator of the grpc-js unary targets (docs/benchmark.md): a @grpc/grpc-js client in its
 * own process keeping `calls` unary calls (tollgate.test.Echo/Unary) in flight on one channel for
 * `seconds`, a new call as each one answers, counting the calls answered OK. This is the issue's own
 * measure (a grpc-js client → Tollgate → a grpc-js server, against client → server); h2load's unary
 * targets are the stricter one (a load generator that costs nearly nothing per call).
 * Prints one JSON line: { calls, seconds, errors }.
 *
 * Usage: node bench/grpc-unary-client.ts <host:port> <authority> <seconds> <calls>
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO = fileURLToPath(new URL('../test/fixtures/grpc/echo.proto', import.meta.url));
const [target, authority, secondsText, callsText] = process.argv.slice(2);
if (target === undefined || authority === undefined)
  throw new Error('usage: grpc-unary-client.ts <host:port> <authority> <seconds> <calls>');
const seconds = Number(secondsText ?? 5);
const inFlight = Number(callsText ?? 64);

const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: true });
// biome-ignore lint/suspicious/noExplicitAny: grpc-js generates clients at run time
const Echo = (grpc.loadPackageDefinition(definition) as any).tollgate.test.Echo;
const client = new Echo(target, grpc.credentials.createInsecure(), { 'grpc.default_authority': authority });

let calls = 0;
let errors = 0;
let ending = false;

function call(): void {
  client.Unary({ message: 'bench' }, (error: grpc.ServiceError | null) => {
    if (ending) return;
    if (error) errors++;
    else calls++;
    call();
  });
}

const started = process.hrtime.bigint();
for (let index = 0; index < inFlight; index++) call();
setTimeout(() => {
  ending = true;
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  client.close();
  process.stdout.write(`${JSON.stringify({ calls, seconds: elapsed, errors })}\n`);
  process.exit(0);
}, seconds * 1000);
