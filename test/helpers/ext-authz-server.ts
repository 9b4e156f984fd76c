import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/**
 * A real Envoy external-authorization server (`envoy.service.auth.v3.Authorization/Check`) built with
 * grpc-js from the .proto subset in test/fixtures/grpc/envoy-auth (Envoy's package names and field
 * numbers). `decide` answers each check: a CheckResponse, raw bytes (garbage on the wire), a gRPC
 * error, or `hang` (no answer ever).
 */

const PROTO_DIR = fileURLToPath(new URL('../fixtures/grpc/envoy-auth', import.meta.url));

// biome-ignore lint/suspicious/noExplicitAny: CheckRequest as proto-loader decodes it (keepCase)
export type CheckRequest = any;
export type Decision = Record<string, unknown> | Buffer | { error: grpc.status; message: string } | 'hang';

export interface ExtAuthzServer {
  readonly port: number;
  readonly address: string;
  readonly checks: CheckRequest[];
  /** The client address:port of each call: one value = one connection. */
  readonly peers: Set<string>;
  decide: (check: CheckRequest) => Decision | Promise<Decision>;
  close(): Promise<void>;
}

export async function startExtAuthzServer(
  decide: ExtAuthzServer['decide'],
  { host = '127.0.0.1', tls }: { host?: string; tls?: { cert: Buffer; key: Buffer } } = {},
): Promise<ExtAuthzServer> {
  const credentials =
    tls === undefined
      ? grpc.ServerCredentials.createInsecure()
      : grpc.ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }]);
  const definition = protoLoader.loadSync('envoy/service/auth/v3/external_auth.proto', {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: Number,
    enums: Number,
    oneofs: true,
    defaults: true,
  });
  const service = definition['envoy.service.auth.v3.Authorization'] as grpc.ServiceDefinition;
  const check = service.Check as grpc.MethodDefinition<unknown, unknown>;
  // Raw bytes go out as they are: what a broken service would put on the wire.
  const raw: grpc.ServiceDefinition = {
    Check: {
      ...check,
      responseSerialize: (value: unknown) =>
        Buffer.isBuffer(value) ? value : check.responseSerialize(value as never),
    },
  };
  const hanging = new Set<grpc.ServerUnaryCall<unknown, unknown>>();
  const server = new grpc.Server();
  const state: ExtAuthzServer = {
    port: 0,
    address: '',
    checks: [],
    peers: new Set(),
    decide,
    close: () =>
      new Promise((resolve) => {
        server.forceShutdown();
        resolve();
      }),
  };
  server.addService(raw, {
    Check: async (
      call: grpc.ServerUnaryCall<CheckRequest, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) => {
      state.checks.push(call.request);
      state.peers.add(call.getPeer());
      const decision = await state.decide(call.request);
      if (decision === 'hang') {
        hanging.add(call);
        return;
      }
      if (!Buffer.isBuffer(decision) && 'error' in decision && typeof decision.error === 'number') {
        callback({ code: decision.error, details: String(decision.message) });
        return;
      }
      callback(null, decision);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:0`, credentials, (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return Object.assign(state, { port, address: `${host}:${port}` });
}

/** An OK CheckResponse with header changes (`append: false` replaces, as OPA-Envoy writes them). */
export function allow(
  changes: {
    set?: Record<string, string>;
    append?: Record<string, string>;
    remove?: string[];
    responseHeaders?: Record<string, string>;
  } = {},
): Record<string, unknown> {
  const option =
    (append: boolean) =>
    ([key, value]: [string, string]) => ({
      header: { key, value },
      append: { value: append },
    });
  return {
    status: { code: 0 },
    ok_response: {
      headers: [
        ...Object.entries(changes.set ?? {}).map(option(false)),
        ...Object.entries(changes.append ?? {}).map(option(true)),
      ],
      headers_to_remove: changes.remove ?? [],
      response_headers_to_add: Object.entries(changes.responseHeaders ?? {}).map(option(false)),
    },
  };
}

/** A denied CheckResponse (gRPC PERMISSION_DENIED) with an HTTP answer for the client. */
export function deny(
  status: number,
  headers: Record<string, string> = {},
  body = '',
): Record<string, unknown> {
  return {
    status: { code: grpc.status.PERMISSION_DENIED, message: 'denied' },
    denied_response: {
      status: { code: status },
      headers: Object.entries(headers).map(([key, value]) => ({ header: { key, value } })),
      body,
    },
  };
}
