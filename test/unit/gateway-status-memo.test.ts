import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CustomObjectsApi, KubernetesObject } from '@kubernetes/client-node';
import {
  createStatusMemo,
  forgettingFailedWrites,
} from '../../src/sources/kubernetes/gateway/status-memo.ts';
import type { DesiredStatus } from '../../src/sources/kubernetes/gateway/translate.ts';

/**
 * The Gateway source hands the status writer only the statuses that changed since it last handed
 * them for the same stored object: an edit of one route out of thousands costs one comparison.
 */
const desired = (name: string, accepted: boolean): DesiredStatus => ({
  resource: 'httproutes',
  namespace: 'apps',
  name,
  status: {
    parents: [
      { controllerName: 'tollgate.io/gateway', conditions: [{ type: 'Accepted', status: String(accepted) }] },
    ],
  },
});

function store(versions: Record<string, string>) {
  return (status: DesiredStatus): KubernetesObject | undefined =>
    status.name in versions
      ? { metadata: { name: status.name, resourceVersion: versions[status.name] as string } }
      : undefined;
}

const names = (statuses: DesiredStatus[]) => statuses.map((status) => status.name);

describe('gateway status memo', () => {
  it('skips a status handed already for the same object; hands it when the status or the object changed', () => {
    const memo = createStatusMemo();
    const versions = { a: '1', b: '1', c: '1' };
    const all = [desired('a', true), desired('b', true), desired('c', true)];
    assert.deepEqual(names(memo.changed(all, store(versions))), ['a', 'b', 'c'], 'first translation: all');
    assert.deepEqual(names(memo.changed(all, store(versions))), [], 'nothing changed: none');
    // b's route was edited (its status changes); c's stored object changed (our write landed, or
    // someone else's): both go to the writer, which compares with what is stored.
    const next = [desired('a', true), desired('b', false), desired('c', true)];
    assert.deepEqual(names(memo.changed(next, store({ ...versions, c: '2' }))), ['b', 'c']);
    assert.deepEqual(names(memo.changed(next, store({ ...versions, c: '2' }))), []);
  });

  it('always hands on a status whose object is not stored (the writer decides), and forgets objects gone', () => {
    const memo = createStatusMemo();
    assert.deepEqual(names(memo.changed([desired('x', true)], store({}))), ['x']);
    assert.deepEqual(names(memo.changed([desired('x', true)], store({}))), ['x']);
    memo.changed([desired('y', true)], store({ y: '5' }));
    memo.changed([], store({ y: '5' }));
    assert.deepEqual(
      names(memo.changed([desired('y', true)], store({ y: '5' }))),
      ['y'],
      'dropped when unnamed',
    );
  });

  it('a failed write is forgotten: the next translation hands the same status again', async () => {
    const memo = createStatusMemo();
    let fail = true;
    const api = {
      replaceNamespacedCustomObjectStatus: async () => {
        if (fail) throw Object.assign(new Error('Internal error'), { code: 500 });
        return {};
      },
    } as unknown as CustomObjectsApi;
    const wrapped = forgettingFailedWrites(api, memo);
    const versions = { web: '7' };
    assert.deepEqual(names(memo.changed([desired('web', true)], store(versions))), ['web']);
    await assert.rejects(
      wrapped.replaceNamespacedCustomObjectStatus({
        group: 'gateway.networking.k8s.io',
        version: 'v1',
        plural: 'httproutes',
        namespace: 'apps',
        name: 'web',
        body: {},
      }),
      /Internal error/,
    );
    assert.deepEqual(names(memo.changed([desired('web', true)], store(versions))), ['web'], 'tried again');
    fail = false;
    await wrapped.replaceNamespacedCustomObjectStatus({
      group: 'gateway.networking.k8s.io',
      version: 'v1',
      plural: 'httproutes',
      namespace: 'apps',
      name: 'web',
      body: {},
    });
    assert.deepEqual(names(memo.changed([desired('web', true)], store(versions))), [], 'written: skipped');
  });
});
