import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { connectKube } from '../../src/sources/kubernetes/kubeconfig.ts';
import { service, startFakeKubeApi } from '../helpers/fake-kube-api.ts';

/**
 * client-node 2.x gives each API request a new connection pool, so every list and status write
 * opened its own TLS connection (with a new secure context): most of the control plane's CPU at
 * a few thousand objects. connectKube shares one pool: requests one after another reuse its
 * connections, and the API server going away and coming back is still survived.
 */
test('API requests one after another share one connection; a restarted API server is reached again', async (t) => {
  const api = await startFakeKubeApi({ tls: true });
  t.after(() => api.stop());
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-kube-connections-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  api.apply(service({ name: 'web', namespace: 'apps', ports: [{ name: 'http', port: 80 }] }));
  const { kubeConfig } = connectKube({ kubeconfig: api.writeKubeconfig(dir, 'apps'), env: {} });
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);

  const before = api.connectionsOpened;
  for (let i = 0; i < 10; i++) {
    const list = await core.listNamespacedService({ namespace: 'apps' });
    assert.equal(list.items.length, 1);
  }
  // One pool: a request may open a second connection when it starts before the previous one's
  // socket is back in the pool; one connection per request (ten) is what the library does alone.
  assert.ok(
    api.connectionsOpened - before <= 2,
    `${api.connectionsOpened - before} connections for ten requests`,
  );
  const afterLists = api.connectionsOpened;
  // Another API class made from the same connection shares the pool too.
  await custom
    .listNamespacedCustomObject({
      group: 'gateway.networking.k8s.io',
      version: 'v1',
      plural: 'httproutes',
      namespace: 'apps',
    })
    .catch(() => {});
  assert.equal(api.connectionsOpened, afterLists, 'no new connection for another API class');

  await api.stop();
  await api.restart();
  // A request that races the close of its pooled connection may fail, as with any keep-alive client
  // (client-go's too); the watches retry with backoff. The next request connects again.
  let items: number | null = null;
  for (let attempt = 0; attempt < 3 && items === null; attempt++) {
    items = await core.listNamespacedService({ namespace: 'apps' }).then(
      (list) => list.items.length,
      () => null,
    );
  }
  assert.equal(items, 1, 'a new connection after the old one was cut');
});
