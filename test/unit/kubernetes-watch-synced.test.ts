import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { CoreV1Api, type V1Service } from '@kubernetes/client-node';
import { createLogger } from '../../src/log.ts';
import { connectKube } from '../../src/sources/kubernetes/kubeconfig.ts';
import { type ResourceWatch, startResourceWatch } from '../../src/sources/kubernetes/resource-watch.ts';
import { createWatchHealth } from '../../src/sources/kubernetes/watch-health.ts';
import { service, startFakeKubeApi } from '../helpers/fake-kube-api.ts';

/**
 * A source translates when any of its watches brings a change, once every watch is synced. A watch
 * that said "synced" when its list came back, before its objects reached the source, let another
 * watch's change run a translation that found nothing and reported existing objects as missing
 * (`Service … does not exist`). Synced means: the listed objects were handed over.
 */
test('a watch is synced only once its listed objects were handed over', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-watch-synced-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  api.apply(service({ name: 'web', namespace: 'apps', ports: [{ name: 'http', port: 80 }] }));
  const connection = connectKube({ kubeconfig: api.writeKubeconfig(dir, 'apps'), env: {} });
  const core = connection.kubeConfig.makeApiClient(CoreV1Api);
  const health = createWatchHealth({ setUp() {}, restarted() {}, setLastSync() {} });

  // What the source saw each time it looked: right after the list came back (as another watch's
  // change would make it look), and when the objects arrived.
  const seen: Array<{ when: string; synced: boolean; allSynced: boolean; objects: number | null }> = [];
  let objects: readonly V1Service[] | null = null;
  let delivered: () => void = () => {};
  const arrived = new Promise<void>((resolve) => {
    delivered = resolve;
  });
  const watch: ResourceWatch = startResourceWatch<V1Service>({
    kubeConfig: connection.kubeConfig,
    resource: 'services',
    description: 'Services in apps',
    path: '/api/v1/namespaces/apps/services',
    list: async (options) => {
      const list = await core.listNamespacedService({ namespace: 'apps' }, options);
      setImmediate(() =>
        seen.push({
          when: 'after the list',
          synced: watch.synced,
          allSynced: health.allSynced(),
          objects: objects?.length ?? null,
        }),
      );
      return list;
    },
    onObjects: (listed) => {
      objects = listed;
      seen.push({
        when: 'objects',
        synced: watch.synced,
        allSynced: health.allSynced(),
        objects: listed.length,
      });
      delivered();
    },
    health,
    logger: createLogger('error', { write: () => {} }),
    tuning: { idleTimeoutMs: 5_000 },
  });
  await arrived;
  await new Promise((resolve) => setImmediate(resolve));
  void watch.stop();
  for (const look of seen)
    assert.ok(
      look.objects !== null || (!look.synced && !look.allSynced),
      `synced before the objects were handed over: ${JSON.stringify(seen)}`,
    );
  assert.deepEqual(seen.at(-1), { when: 'objects', synced: true, allSynced: true, objects: 1 });
});
