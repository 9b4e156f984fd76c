/**
 * The gRPC upstream of the gRPC targets (docs/benchmark.md): @grpc/grpc-js, plaintext h2c, serving
 * tollgate.test.Echo/Unary and /ServerStream from the tests' proto with a fixed reply. Run as its own process so its
 * CPU is counted apart: `node bench/grpc-server.ts <port>`.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO = fileURLToPath(new URL('../test/fixtures/grpc/echo.proto', import.meta.url));
const port = Number(process.argv[2]);
const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: true });
// biome-ignore lint/suspicious/noExplicitAny: grpc-js generates services at run time
const Echo = (grpc.loadPackageDefinition(definition) as any).tollgate.test.Echo;
const server = new grpc.Server();
server.addService(Echo.service, {
  Unary(call: grpc.ServerUnaryCall<{ message: string }, unknown>, callback: grpc.sendUnaryData<unknown>) {
    callback(null, { message: call.request.message, seen: {} });
  },
  // `count` replies as fast as the caller takes them (write() false: wait for 'drain').
  ServerStream(call: grpc.ServerWritableStream<{ message: string; count: number }, unknown>) {
    const reply = { message: call.request.message, seen: {} };
    let sent = 0;
    const pump = () => {
      while (sent < call.request.count && !call.cancelled) {
        sent++;
        if (!call.write(reply)) {
          call.once('drain', pump);
          return;
        }
      }
      if (!call.cancelled) call.end();
    };
    pump();
  },
});
server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (error) => {
  if (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`grpc server listening on ${port}\n`);
});
process.on('SIGTERM', () => server.forceShutdown());
