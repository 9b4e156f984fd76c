import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildPolicy } from '../../src/sources/kubernetes/gateway/policy-keys.ts';
import { readAnnotations } from '../../src/sources/kubernetes/ingress/annotations.ts';
import { policiesOf } from '../../src/sources/kubernetes/ingress/policy-annotations.ts';

/**
 * The response cache (docs/traffic.md#response-cache) from the Kubernetes sources: the Ingress
 * annotations tollgate.io/cache-* and the TollgatePolicy key `cache` fill the same PathPolicies
 * `cache` as upstreams.yaml, with the same checks.
 */

const ingressPolicies = (annotations: Record<string, string>) => {
  const read = readAnnotations(annotations);
  if (read.problems.length > 0) return { problems: read.problems };
  return policiesOf(read.settings, '/app');
};

describe('response cache from Kubernetes objects', () => {
  it('Ingress: tollgate.io/cache-max-bytes and its two companions', () => {
    assert.deepEqual(ingressPolicies({ 'tollgate.io/cache-max-bytes': '64m' }), {
      ok: true,
      routeKey: '/app',
      policies: { cache: { maxBytes: 64 * 1024 ** 2, maxObjectBytes: 1024 ** 2, defaultTtlSeconds: 0 } },
    });
    const full = ingressPolicies({
      'tollgate.io/cache-max-bytes': '1m',
      'tollgate.io/cache-max-object-bytes': '16k',
      'tollgate.io/cache-default-ttl-seconds': '30',
    });
    assert.deepEqual(full, {
      ok: true,
      routeKey: '/app',
      policies: { cache: { maxBytes: 1024 ** 2, maxObjectBytes: 16 * 1024, defaultTtlSeconds: 30 } },
    });
  });

  it('Ingress: a value that cannot be honoured is refused, naming the annotation', () => {
    const problems = (annotations: Record<string, string>) => {
      const result = ingressPolicies(annotations);
      return 'problems' in result ? result.problems.join('; ') : '';
    };
    assert.match(
      problems({ 'tollgate.io/cache-max-bytes': 'lots' }),
      /cache-max-bytes.*'lots' is not a size/,
    );
    assert.match(
      problems({ 'tollgate.io/cache-max-bytes': '1k', 'tollgate.io/cache-max-object-bytes': '2k' }),
      /tollgate\.io\/cache-\*: max_object_bytes \(2048\) is more than max_bytes \(1024\)/,
    );
    assert.match(
      problems({ 'tollgate.io/cache-default-ttl-seconds': '30' }),
      /cache-max-bytes: required by the other cache-\* annotations/,
    );
    assert.match(problems({ 'tollgate.io/cache-default-ttl-seconds': 'soon' }), /cache-default-ttl-seconds/);
  });

  it('TollgatePolicy: the key `cache`, read as upstreams.yaml reads it', () => {
    const context = { secrets: new Map(), grants: [] };
    const built = buildPolicy(
      { spec: { targetRefs: [], cache: { max_bytes: '8m', default_ttl_seconds: 5 } } },
      context,
    );
    assert.equal(built.broken, null);
    assert.deepEqual(built.patch.policies, {
      cache: { maxBytes: 8 * 1024 ** 2, maxObjectBytes: 1024 ** 2, defaultTtlSeconds: 5 },
    });
    const bad = buildPolicy({ spec: { targetRefs: [], cache: { max_object_bytes: '1k' } } }, context);
    assert.match(bad.broken ?? '', /cache: missing 'max_bytes'/);
  });
});
