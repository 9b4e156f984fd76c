/**
 * The authorization service of the `tollgate-ext-authz` target (docs/benchmark.md): Envoy's
 * `envoy.service.auth.v3.Authorization/Check` on @grpc/grpc-js, from the tests' .proto subset
 * (test/fixtures/grpc/envoy-auth), allowing every request and setting one header, as a policy
 * engine answering from memory would. Its own process, so its CPU is counted apart:
 * `node bench/reference/ext-authz-service.ts <port>`.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO_DIR = fileURLToPath(new URL('../../test/fixtures/grpc/envoy-auth', import.meta.url));
const port = Number(process.argv[2]);
const definition = protoLoader.loadSync('envoy/service/auth/v3/external_auth.proto', {
  includeDirs: [PROTO_DIR],
  keepCase: true,
  longs: Number,
  enums: Number,
  oneofs: true,
});
// biome-ignore lint/suspicious/noExplicitAny: grpc-js generates services at run time
const Authorization = (grpc.loadPackageDefinition(definition) as any).envoy.service.auth.v3.Authorization;
const ALLOW = {
  status: { code: 0 },
  ok_response: { headers: [{ header: { key: 'x-user', value: 'bench' }, append: { value: false } }] },
};
const server = new grpc.Server();
server.addService(Authorization.service, {
  Check(_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) {
    callback(null, ALLOW);
  },
});
server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (error) => {
  if (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`ext_authz service listening on ${port}\n`);
});
process.on('SIGTERM', () => server.forceShutdown());
