/**
 * gRPC unary calls (docs/benchmark.md): a grpc-js server in its own process, driven straight and
 * through Tollgate's plain listener (`http2_cleartext: true`, h2c to the server under
 * `upstream_protocol: auto`) by h2load with a framed request body, the same HTTP/2 settings
 * either way. h2load counts HTTP statuses only, so each target is first checked with a real
 * grpc-js call (grpc-status OK and the echoed message), which a broken relay of trailers would fail.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { h2load } from './h2load.ts';
import { type LoadGenerator, runTimeoutMs } from './load.ts';
import { freePort, makeTempDir, runToCompletion, type Started, startProcess } from './processes.ts';

const SERVER_SCRIPT = fileURLToPath(new URL('grpc-server.ts', import.meta.url));
const PROTO = fileURLToPath(new URL('../test/fixtures/grpc/echo.proto', import.meta.url));
export const GRPC_AUTHORITY = 'grpc.bench.local';
export const GRPC_PATH = '/tollgate.test.Echo/Unary';
const MESSAGE = 'bench';

export async function startGrpcServer(): Promise<{ port: number; started: Started }> {
  const port = await freePort();
  const started = startProcess('grpc server', process.execPath, [SERVER_SCRIPT, String(port)]);
  const deadline = Date.now() + 15_000;
  while (!started.output().includes('listening')) {
    if (Date.now() > deadline) throw new Error(`the gRPC server did not start:\n${started.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { port, started };
}

/** One real call; rejects unless it returns OK with the message echoed. */
export async function checkGrpc(target: string, authority: string): Promise<void> {
  const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: true });
  // biome-ignore lint/suspicious/noExplicitAny: grpc-js generates clients at run time
  const Echo = (grpc.loadPackageDefinition(definition) as any).tollgate.test.Echo;
  const client = new Echo(target, grpc.credentials.createInsecure(), { 'grpc.default_authority': authority });
  try {
    const reply = await new Promise<{ message: string }>((resolve, reject) =>
      client.Unary(
        { message: MESSAGE },
        { deadline: Date.now() + 5_000 },
        (error: Error | null, answer: { message: string }) => (error ? reject(error) : resolve(answer)),
      ),
    );
    if (reply.message !== MESSAGE)
      throw new Error(`gRPC reply ${JSON.stringify(reply)}, expected ${MESSAGE}`);
  } finally {
    client.close();
  }
}

/** h2load sending EchoRequest { message: "bench" } as a gRPC unary call on every stream. */
export function grpcGenerator(h2loadPath: string): LoadGenerator {
  const dir = makeTempDir('tollgate-bench-grpc-');
  const message = Buffer.from(MESSAGE);
  const body = Buffer.concat([Buffer.from([0x0a, message.length]), message]);
  const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, body.length]), body]);
  const dataFile = join(dir, 'request.bin');
  writeFileSync(dataFile, frame);
  return h2load(h2loadPath, 'h2', ['-d', dataFile]);
}

export const GRPC_HEADERS = { 'content-type': 'application/grpc', te: 'trailers' } as const;

/** The path the streaming targets show (the client calls it itself, bench/grpc-stream-client.ts). */
export const GRPC_STREAM_PATH = '/tollgate.test.Echo/ServerStream';
const STREAM_CLIENT = fileURLToPath(new URL('grpc-stream-client.ts', import.meta.url));
/** Calls open at once: the unary targets' 8 streams per connection. */
const STREAM_CALLS = 8;

const UNARY_CLIENT = fileURLToPath(new URL('grpc-unary-client.ts', import.meta.url));
/** Unary calls in flight at once: h2load's 8 connections × 8 streams. */
const UNARY_CALLS = 64;

/** Unary calls per second answered OK to a grpc-js client in its own process (grpc-unary-client.ts). */
export function grpcUnaryClientGenerator(): LoadGenerator {
  return {
    name: 'grpc-js unary client',
    async run(settings) {
      const target = new URL(settings.url).host;
      const authority = settings.headers.host ?? GRPC_AUTHORITY;
      const stdout = await runToCompletion(
        process.execPath,
        [UNARY_CLIENT, target, authority, String(settings.seconds), String(UNARY_CALLS)],
        { timeoutMs: runTimeoutMs(settings) + 10_000 },
      );
      const { calls, seconds, errors } = JSON.parse(stdout) as Record<string, number>;
      return {
        requestsPerSecond: Number(((calls ?? 0) / (seconds ?? 1)).toFixed(0)),
        p50Ms: Number.NaN,
        p99Ms: Number.NaN,
        p999Ms: Number.NaN,
        requests: calls ?? 0,
        socketErrors: errors ?? 0,
        badStatuses: 0,
      };
    },
  };
}

/**
 * Server-streaming messages per second, received by a grpc-js client in its own process
 * (grpc-stream-client.ts): each LoadResult "request" is one message.
 */
export function grpcStreamGenerator(): LoadGenerator {
  return {
    name: 'grpc-js server streaming',
    async run(settings) {
      const target = new URL(settings.url).host;
      const authority = settings.headers.host ?? GRPC_AUTHORITY;
      const stdout = await runToCompletion(
        process.execPath,
        [STREAM_CLIENT, target, authority, String(settings.seconds), String(STREAM_CALLS)],
        { timeoutMs: runTimeoutMs(settings) + 10_000 },
      );
      const { messages, seconds, errors } = JSON.parse(stdout) as Record<string, number>;
      return {
        requestsPerSecond: Number(((messages ?? 0) / (seconds ?? 1)).toFixed(0)),
        p50Ms: Number.NaN,
        p99Ms: Number.NaN,
        p999Ms: Number.NaN,
        requests: messages ?? 0,
        socketErrors: errors ?? 0,
        badStatuses: 0,
      };
    },
  };
}
