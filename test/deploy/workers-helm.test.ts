import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CHART, find, helm, helmTemplate, mountedFile, parseYaml } from './manifests.ts';

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
