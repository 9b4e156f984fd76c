import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CHART,
  find,
  helm,
  helmTemplate,
  KUBE_VERSION,
  mountedFile,
  parseYaml,
  TEST_MASTERKEY,
  tollgateContainer,
} from './manifests.ts';

/** main.yaml as the chart renders it for the pod. */
async function renderedMain(set: string[]) {
  const manifests = await helmTemplate({ set });
  return parseYaml(mountedFile(manifests, find(manifests, 'Deployment').spec.template.spec, 'main.yaml'));
}

describe('helm: config.workers (docs/workers.md)', () => {
  test('empty: one process without a CPU limit, auto (the limit) with one', async () => {
    assert.equal((await renderedMain([])).workers, 1);
    assert.equal((await renderedMain(['resources.limits.cpu=2'])).workers, 'auto');
  });

  test('a number or auto is written as given', async () => {
    assert.equal((await renderedMain(['config.workers=3'])).workers, 3);
    assert.equal((await renderedMain(['config.workers=auto'])).workers, 'auto');
  });

  test('anything else is refused by the chart schema', async () => {
    for (const value of ['0', 'all']) {
      const result = await helm(['template', 'tollgate', CHART, '--set', `config.workers=${value}`]);
      assert.equal(result.ok, false, `config.workers=${value} was accepted`);
      assert.match(result.stderr, /workers/);
    }
  });
});

describe('helm: memory follows the worker count (docs/workers.md#memory)', () => {
  const resources = async (set: string[]) =>
    tollgateContainer(find(await helmTemplate({ set }), 'Deployment').spec.template.spec).resources;

  test('one process: the resources as given', async () => {
    const one = await resources([]);
    assert.equal(one.requests.memory, '128Mi');
    assert.equal(one.limits.memory, '256Mi');
  });

  test('each worker beyond the first adds memoryPerExtraWorker, whether counted or auto from the CPU limit', async () => {
    const two = await resources(['config.workers=2']);
    assert.deepEqual([two.requests.memory, two.limits.memory], ['224Mi', '416Mi']);
    const auto = await resources(['resources.limits.cpu=2500m']);
    assert.deepEqual([auto.requests.memory, auto.limits.memory], ['320Mi', '576Mi']);
    const gi = await resources([
      'config.workers=3',
      'resources.limits.memory=1Gi',
      'memoryPerExtraWorker.limit=512Mi',
    ]);
    assert.equal(gi.limits.memory, '2048Mi');
  });

  test('a request that would exceed the limit is refused with what to change', async () => {
    const result = await helm([
      'template',
      'tollgate',
      CHART,
      '--kube-version',
      KUBE_VERSION,
      '--set',
      `masterkey.value=${TEST_MASTERKEY}`,
      '--set',
      'config.workers=4',
      '--set',
      'memoryPerExtraWorker.limit=',
    ]);
    assert.equal(result.ok, false);
    assert.match(result.stderr, /memory request \(416Mi with 4 workers\) exceeds the limit \(256Mi\)/);
  });
});
