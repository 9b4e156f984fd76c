import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Ingress } from '@kubernetes/client-node';
import { byAge as gatewayByAge } from '../../src/sources/kubernetes/gateway/objects.ts';
import { byAge as ingressByAge } from '../../src/sources/kubernetes/ingress/claims.ts';
import { byCreation } from '../../src/sources/kubernetes/ownership.ts';

/**
 * Oldest first by creationTimestamp, then namespace/name (docs/gateway-api.md#listener-conflicts,
 * docs/ingress.md#host-ownership): objects without a creationTimestamp, or with equal ones, fall to
 * the tie-break. Subtracting two unknown times (Infinity - Infinity) gave NaN, and the tie-break
 * never ran: the input order decided.
 */
const object = (namespace: string, name: string, creationTimestamp?: string) => ({
  metadata: { namespace, name, ...(creationTimestamp === undefined ? {} : { creationTimestamp }) },
});
const names = (objects: ReadonlyArray<{ metadata: { namespace: string; name: string } }>) =>
  objects.map((item) => `${item.metadata.namespace}/${item.metadata.name}`);

describe('oldest first, then namespace/name', () => {
  const shuffled = [
    object('b', 'x'),
    object('a', 'y'),
    object('z', 'new', '2026-02-01T00:00:00Z'),
    object('a', 'x'),
    object('m', 'old', '2026-01-01T00:00:00Z'),
    object('c', 'same', '2026-01-01T00:00:00Z'),
  ];
  const expected = ['c/same', 'm/old', 'z/new', 'a/x', 'a/y', 'b/x'];

  it('Gateway API objects: missing or equal timestamps fall to namespace/name, unknown last', () => {
    assert.deepEqual(names([...shuffled].sort(gatewayByAge)), expected);
    assert.deepEqual(names([...shuffled].reverse().sort(gatewayByAge)), expected);
  });

  it('Ingresses: the same order', () => {
    const ingresses = shuffled as unknown as V1Ingress[];
    assert.deepEqual(names([...ingresses].sort(ingressByAge) as unknown as typeof shuffled), expected);
    assert.deepEqual(
      names([...ingresses].reverse().sort(ingressByAge) as unknown as typeof shuffled),
      expected,
    );
  });

  it('host claims: oldest first, unknown times last, ties in the order given', () => {
    const claim = (ingress: string, created: number) => ({ namespace: 'n', ingress, hosts: [], created });
    const sorted = byCreation([
      claim('unknown-1', Number.POSITIVE_INFINITY),
      claim('late', 20),
      claim('unknown-2', Number.POSITIVE_INFINITY),
      claim('early', 10),
      claim('early-too', 10),
    ]);
    assert.deepEqual(
      sorted.map((item) => item.ingress),
      ['early', 'early-too', 'late', 'unknown-1', 'unknown-2'],
    );
  });
});
