import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { createLogger } from '../../src/log.ts';
import { createStatusWriter } from '../../src/sources/kubernetes/gateway/status.ts';
import type { DesiredStatus } from '../../src/sources/kubernetes/gateway/translate.ts';

/**
 * The Gateway API status writer (docs/gateway-api.md#status-and-errors) against a stand-in for the
 * API's status endpoints that behaves like the API server: a replace carrying a stale
 * resourceVersion is refused with 409, and every accepted write bumps the resourceVersion.
 */
function fakeApi(initial: Record<string, unknown>) {
  let object = structuredClone(initial) as {
    metadata: { resourceVersion: string };
    status?: Record<string, unknown>;
  };
  const writes: unknown[] = [];
  let conflictsLeft = 0;
  const api = {
    replaceNamespacedCustomObjectStatus: async ({ body }: { body: typeof object }) => {
      if (conflictsLeft > 0 || body.metadata.resourceVersion !== object.metadata.resourceVersion) {
        conflictsLeft = Math.max(0, conflictsLeft - 1);
        throw Object.assign(new Error('Conflict'), { code: 409 });
      }
      writes.push(body.status);
      object = {
        ...body,
        metadata: { ...body.metadata, resourceVersion: String(Number(object.metadata.resourceVersion) + 1) },
      };
      return object;
    },
    getNamespacedCustomObjectStatus: async () => structuredClone(object),
  } as unknown as CustomObjectsApi;
  return {
    api,
    writes,
    current: () => object,
    /** Another controller writes meanwhile (what makes the next write conflict). */
    otherWrites(status: Record<string, unknown>) {
      object = {
        ...object,
        status,
        metadata: { resourceVersion: String(Number(object.metadata.resourceVersion) + 1) },
      };
    },
    conflictNext(times: number) {
      conflictsLeft = times;
    },
  };
}

const ours = (accepted: boolean): DesiredStatus => ({
  resource: 'httproutes',
  namespace: 'apps',
  name: 'web',
  status: {
    parents: [
      {
        parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'gw' },
        controllerName: 'tollgate.io/gateway-controller',
        conditions: [
          {
            type: 'Accepted',
            status: accepted ? 'True' : 'False',
            reason: accepted ? 'Accepted' : 'NotAllowedByListeners',
            message: 'm',
            observedGeneration: 1,
          },
        ],
      },
    ],
  },
});
const theirs = {
  parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'other' },
  controllerName: 'example.com/other',
  conditions: [{ type: 'Accepted', status: 'True', reason: 'Accepted', message: 'theirs' }],
};

describe('gateway status writer', () => {
  const logger = createLogger('silent', { write: () => {} });

  it('retries on 409 with the object read again, keeping what another controller wrote meanwhile', async () => {
    const fake = fakeApi({
      metadata: { name: 'web', namespace: 'apps', resourceVersion: '5' },
      status: { parents: [] },
    });
    // What the watches last saw: an older copy (another controller wrote since).
    const stale = structuredClone(fake.current());
    fake.otherWrites({ parents: [theirs] });
    const writer = createStatusWriter({ custom: fake.api, logger, current: () => stale });
    writer.write([ours(true)]);
    await writer.idle();
    assert.equal(fake.writes.length, 1);
    const parents = (fake.current().status as { parents: Array<{ controllerName: string }> }).parents;
    assert.deepEqual(
      parents.map((p) => p.controllerName),
      ['example.com/other', 'tollgate.io/gateway-controller'],
    );
  });

  it('skips a write that changes nothing, and keeps lastTransitionTime while the status stays', async () => {
    const fake = fakeApi({ metadata: { name: 'web', namespace: 'apps', resourceVersion: '1' }, status: {} });
    let now = new Date('2026-01-01T00:00:00Z');
    const writer = createStatusWriter({
      custom: fake.api,
      logger,
      current: () => fake.current(),
      now: () => now,
    });
    writer.write([ours(true)]);
    await writer.idle();
    now = new Date('2026-01-02T00:00:00Z');
    writer.write([ours(true)]);
    await writer.idle();
    assert.equal(fake.writes.length, 1, 'an equal status is not written again');
    writer.write([ours(false)]);
    await writer.idle();
    assert.equal(fake.writes.length, 2);
    const condition = (
      fake.current().status as { parents: Array<{ conditions: Array<{ lastTransitionTime: string }> }> }
    ).parents[0]?.conditions[0];
    assert.equal(condition?.lastTransitionTime, '2026-01-02T00:00:00Z');
  });

  it('an empty write leaves the writer ready: a later status is written', async () => {
    const fake = fakeApi({ metadata: { name: 'web', namespace: 'apps', resourceVersion: '1' }, status: {} });
    const writer = createStatusWriter({ custom: fake.api, logger, current: () => fake.current() });
    writer.write([]);
    await writer.idle();
    writer.write([ours(true)]);
    await writer.idle();
    assert.equal(fake.writes.length, 1);
  });

  it('gives up after repeated conflicts without throwing (the next translation tries again)', async () => {
    const fake = fakeApi({ metadata: { name: 'web', namespace: 'apps', resourceVersion: '1' }, status: {} });
    fake.conflictNext(100);
    const writer = createStatusWriter({ custom: fake.api, logger, current: () => fake.current() });
    writer.write([ours(true)]);
    await writer.idle();
    assert.equal(fake.writes.length, 0);
  });

  it('an object whose status it cannot read is skipped; the writer goes on with the others', async () => {
    const good = fakeApi({ metadata: { name: 'web', namespace: 'apps', resourceVersion: '1' }, status: {} });
    const garbage = {
      metadata: { name: 'odd', namespace: 'apps', resourceVersion: '1' },
      status: { parents: 'not a list' },
    };
    const writer = createStatusWriter({
      custom: good.api,
      logger,
      current: (status) => (status.name === 'odd' ? garbage : good.current()),
    });
    writer.write([{ ...ours(true), name: 'odd' }, ours(true)]);
    await writer.idle();
    assert.equal(good.writes.length, 1);
    writer.write([ours(false)]);
    await writer.idle();
    assert.equal(good.writes.length, 2, 'still writing after the bad object');
  });
});
