import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO = fileURLToPath(new URL('../fixtures/grpc/echo.proto', import.meta.url));

export interface EchoRequest {
  message: string;
  count?: number;
}
export interface EchoReply {
  message: string;
  seen: Record<string, string>;
}

/** The generated client constructor of tollgate.test.Echo (loaded once). */
// biome-ignore lint/suspicious/noExplicitAny: grpc-js generates clients at run time
export function echoClientClass(): any {
  const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: true });
  // biome-ignore lint/suspicious/noExplicitAny: as above
  const loaded = grpc.loadPackageDefinition(definition) as any;
  return loaded.tollgate.test.Echo;
}

export interface EchoServer {
  port: number;
  address: string;
  close(): Promise<void>;
}

/** Metadata keys the echo server reports back in `seen`. */
const REPORTED = ['x-forwarded-for', 'x-forwarded-proto', 'authorization', 'x-tollgate-subject', 'te'];

function seenOf(metadata: grpc.Metadata): Record<string, string> {
  const seen: Record<string, string> = {};
  for (const key of REPORTED) {
    const values = metadata.get(key);
    if (values.length > 0) seen[key] = String(values[0]);
  }
  return seen;
}

/**
 * A real gRPC server (@grpc/grpc-js, plaintext h2c) with one method of each shape. A message
 * `fail:<code>` makes a method answer that status; Unary waits `count` ms before answering.
 */
export async function startEchoServer(): Promise<EchoServer> {
  const Echo = echoClientClass();
  const server = new grpc.Server();
  const failure = (message: string) => {
    const match = /^fail:(\d+)$/.exec(message);
    return match ? { code: Number(match[1]), details: `failed as asked (${match[1]})` } : null;
  };
  server.addService(Echo.service, {
    Unary(call: grpc.ServerUnaryCall<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) {
      const failed = failure(call.request.message);
      if (failed) {
        callback(failed as grpc.ServiceError);
        return;
      }
      const reply = () => {
        const trailer = new grpc.Metadata();
        trailer.set('x-echo-trailer', 'unary');
        callback(null, { message: call.request.message, seen: seenOf(call.metadata) }, trailer);
      };
      const delay = call.request.count ?? 0;
      if (delay > 0) setTimeout(reply, delay);
      else reply();
    },
    ServerStream(call: grpc.ServerWritableStream<EchoRequest, EchoReply>) {
      const count = call.request.count ?? 1;
      for (let i = 0; i < count; i++) call.write({ message: `${call.request.message}#${i}`, seen: {} });
      call.end();
    },
    ClientStream(
      call: grpc.ServerReadableStream<EchoRequest, EchoReply>,
      callback: grpc.sendUnaryData<EchoReply>,
    ) {
      const messages: string[] = [];
      call.on('data', (request: EchoRequest) => messages.push(request.message));
      call.on('end', () => callback(null, { message: messages.join(','), seen: seenOf(call.metadata) }));
    },
    Bidi(call: grpc.ServerDuplexStream<EchoRequest, EchoReply>) {
      call.on('data', (request: EchoRequest) => {
        const failed = failure(request.message);
        if (failed) {
          call.emit('error', failed);
          return;
        }
        call.write({ message: `echo:${request.message}`, seen: {} });
      });
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return {
    port,
    address: `127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        server.forceShutdown();
      }),
  };
}
