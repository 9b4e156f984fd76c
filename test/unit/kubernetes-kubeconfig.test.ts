import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, mock, test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { connectKube, SERVICE_ACCOUNT_DIR } from '../../src/sources/kubernetes/kubeconfig.ts';
import { createKubernetesSource } from '../../src/sources/kubernetes/source.ts';
import { hasOpenssl } from '../helpers/certs.ts';
import { endpointSlice, startFakeKubeApi } from '../helpers/fake-kube-api.ts';

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-kubeconfig-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const silent = createLogger('silent');
const noMetrics = { setUp() {}, restarted() {}, setLastSync() {} };

test('an explicit kubeconfig wins over $KUBECONFIG; its context namespace is the default', async (t) => {
  const api = await startFakeKubeApi({ tls: false });
  t.after(() => api.stop());
  const explicit = api.writeKubeconfig(mkdtempSync(join(dir, 'a-')), 'from-explicit');
  const fromEnv = api.writeKubeconfig(mkdtempSync(join(dir, 'b-')), 'from-env');
  assert.equal(
    connectKube({ kubeconfig: explicit, env: { KUBECONFIG: fromEnv } }).namespace,
    'from-explicit',
  );
  assert.equal(connectKube({ env: { KUBECONFIG: fromEnv } }).namespace, 'from-env');
  assert.equal(connectKube({ env: { KUBECONFIG: fromEnv }, namespace: 'set' }).namespace, 'set');
  assert.match(connectKube({ env: { KUBECONFIG: fromEnv } }).origin, /^\$KUBECONFIG/);
  assert.throws(
    () => connectKube({ kubeconfig: join(dir, 'missing') }),
    /kubeconfig .*missing does not exist/,
  );
});

test('no credentials anywhere: a clear error', () => {
  const home = process.env.HOME;
  process.env.HOME = mkdtempSync(join(dir, 'home-'));
  try {
    assert.throws(
      () => connectKube({ env: {}, inClusterRoot: join(dir, 'nothing') }),
      /no Kubernetes credentials/,
    );
  } finally {
    process.env.HOME = home;
  }
});

test('in-cluster: service-account CA, token and namespace; a rotated token is re-read', {
  skip: !hasOpenssl() && 'needs openssl for the API server certificate',
}, async (t) => {
  const api = await startFakeKubeApi({ tls: true, token: 'token-one' });
  t.after(() => api.stop());
  const root = mkdtempSync(join(dir, 'pod-'));
  const accountDir = join(root, SERVICE_ACCOUNT_DIR);
  mkdirSync(accountDir, { recursive: true });
  writeFileSync(join(accountDir, 'ca.crt'), api.caCertificate as Buffer);
  writeFileSync(join(accountDir, 'token'), 'token-one');
  writeFileSync(join(accountDir, 'namespace'), 'tenant-a\n');
  const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
  // The client library's in-cluster loader reads these two from the process environment.
  process.env.KUBERNETES_SERVICE_HOST = '127.0.0.1';
  process.env.KUBERNETES_SERVICE_PORT = new URL(api.url).port;
  t.after(() => {
    for (const [name, value] of [
      ['KUBERNETES_SERVICE_HOST', saved.host],
      ['KUBERNETES_SERVICE_PORT', saved.port],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
  const connection = connectKube({ env: process.env, inClusterRoot: root });
  assert.equal(connection.origin, 'in-cluster service account');
  assert.equal(connection.namespace, 'tenant-a');
  // In a pod the service account wins over $KUBECONFIG; only main.yaml's kubeconfig overrides it.
  const stray = api.writeKubeconfig(mkdtempSync(join(dir, 'stray-')), 'from-env');
  const withEnv = connectKube({ env: { ...process.env, KUBECONFIG: stray }, inClusterRoot: root });
  assert.equal(withEnv.origin, 'in-cluster service account');
  assert.equal(withEnv.namespace, 'tenant-a');
  assert.equal(
    connectKube({ kubeconfig: stray, env: process.env, inClusterRoot: root }).namespace,
    'from-env',
  );

  api.apply(
    endpointSlice({
      service: 'web',
      namespace: 'tenant-a',
      ports: [{ port: 80 }],
      endpoints: [{ ip: '10.0.0.1' }],
    }),
  );
  // Only Date is faked: the library re-reads the token file when its last read is over a minute old.
  mock.timers.enable({ apis: ['Date'], now: Date.now() });
  t.after(() => mock.timers.reset());
  const source = createKubernetesSource({
    connection,
    logger: silent,
    metrics: noMetrics,
    tuning: { initialBackoffMs: 20, maxBackoffMs: 100 },
  });
  t.after(() => source.close());
  source.watchServices([{ name: 'web', namespace: 'tenant-a', port: 80 }]);
  await source.whenSynced();
  assert.ok(api.requests.every((r) => r.authorization === 'Bearer token-one'));

  // The kubelet rotates the projected token; the API server stops accepting the old one.
  writeFileSync(join(accountDir, 'token'), 'token-two');
  api.acceptTokens(['token-two']);
  api.dropWatches();
  const oldTokenRequests = () => api.requests.filter((r) => r.authorization === 'Bearer token-one').length;
  const before = oldTokenRequests();
  await api.waitFor(() => oldTokenRequests() > before, 'a retry refused with the old token');
  mock.timers.tick(61_000);
  await api.waitFor(() => api.requests.some((r) => r.authorization === 'Bearer token-two'), 'the new token');
  api.apply(
    endpointSlice({
      service: 'web',
      namespace: 'tenant-a',
      ports: [{ port: 80 }],
      endpoints: [{ ip: '10.0.0.2' }],
    }),
  );
  await api.waitFor(
    () => source.endpoints().get('web.tenant-a:80')?.[0]?.raw === '10.0.0.2:80',
    'the watch resumed with the new token',
  );
});
