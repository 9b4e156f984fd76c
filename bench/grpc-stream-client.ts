/**
 * The load generator of the gRPC streaming targets (docs/benchmark.md): a @grpc/grpc-js client in
 * its own process keeping `calls` server-streaming calls (tollgate.test.Echo/ServerStream, 10,000
 * replies each, a new call as one ends) open on one channel for `seconds`, counting the messages
 * received. Prints one JSON line: { messages, seconds, errors }.
 *
 * Usage: node bench/grpc-stream-client.ts <host:port> <authority> <seconds> <calls>
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO = fileURLToPath(new URL('../test/fixtures/grpc/echo.proto', import.meta.url));
const REPLIES_PER_CALL = 10_000;
const [target, authority, secondsText, callsText] = process.argv.slice(2);
if (target === undefined || authority === undefined)
  throw new Error('usage: grpc-stream-client.ts <host:port> <authority> <seconds> <calls>');
const seconds = Number(secondsText ?? 5);
const calls = Number(callsText ?? 8);

const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: true });
// biome-ignore lint/suspicious/noExplicitAny: grpc-js generates clients at run time
const Echo = (grpc.loadPackageDefinition(definition) as any).tollgate.test.Echo;
const client = new Echo(target, grpc.credentials.createInsecure(), { 'grpc.default_authority': authority });

let messages = 0;
let errors = 0;
let ending = false;
const open = new Set<grpc.ClientReadableStream<unknown>>();

function startCall(): void {
  const call = client.ServerStream({
    message: 'bench',
    count: REPLIES_PER_CALL,
  }) as grpc.ClientReadableStream<unknown>;
  open.add(call);
  call.on('data', () => {
    messages++;
  });
  call.on('error', (error: grpc.ServiceError) => {
    if (!ending || error.code !== grpc.status.CANCELLED) errors++;
  });
  call.on('close', () => {
    open.delete(call);
    if (!ending) startCall();
  });
}

const started = process.hrtime.bigint();
for (let index = 0; index < calls; index++) startCall();
setTimeout(() => {
  ending = true;
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  const counted = messages;
  for (const call of open) call.cancel();
  client.close();
  process.stdout.write(`${JSON.stringify({ messages: counted, seconds: elapsed, errors })}\n`);
  process.exit(0);
}, seconds * 1000);
