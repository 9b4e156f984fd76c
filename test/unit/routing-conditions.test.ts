import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RouteConditions } from '../../src/routing/conditions.ts';
import { buildMatcher } from '../../src/routing/match.ts';
import type { Route } from '../../src/routing/types.ts';

/**
 * The matcher's Gateway API extensions (docs/gateway-api.md#routes): routes sharing a host and path
 * told apart by conditions, tried in the order given after the path lookup, falling back to shorter
 * prefixes when none holds; and wildcard host keys.
 */
function route(
  id: string,
  hostKey: string,
  prefix: string,
  conditions: Partial<RouteConditions> | null = null,
  exact = false,
): Route {
  return {
    id,
    hostKey,
    prefix,
    exact,
    conditions: conditions === null ? null : { method: null, headers: [], query: [], ...conditions },
  } as Route;
}

describe('route matcher: conditions and wildcard hosts', () => {
  const match = buildMatcher([
    route('v2-post', 'a.test', '/v2', { method: 'POST' }),
    route('v2-header', 'a.test', '/v2', { headers: [{ name: 'version', value: 'two' }] }),
    route('v2-query', 'a.test', '/v2', { query: [{ name: 'animal', value: 'whale' }] }),
    route('v2', 'a.test', '/v2'),
    route('v2-unreachable', 'a.test', '/v2', { method: 'PUT' }),
    route('root-header', 'a.test', '/', { headers: [{ name: 'version', value: 'one' }] }),
    route('exact-get', 'a.test', '/e', { method: 'GET' }, true),
    route('prefix-e', 'a.test', '/e'),
    route('wild', '*.example.com', '/'),
    route('deeper', '*.b.example.com', '/'),
    route('exact-host', 'x.example.com', '/'),
  ]);
  const id = (host: string, path: string, method = 'GET', headers: Record<string, string> = {}, query = '') =>
    match(host, path, { method, headers }, query)?.id ?? null;

  it('takes the first route of a path whose conditions hold, in the order given', () => {
    assert.equal(id('a.test', '/v2/x', 'POST', { version: 'two' }), 'v2-post');
    assert.equal(id('a.test', '/v2/x', 'GET', { version: 'two' }), 'v2-header');
    assert.equal(id('a.test', '/v2', 'GET', {}, 'animal=whale&x=1'), 'v2-query');
    assert.equal(id('a.test', '/v2', 'GET', {}, 'animal=dolphin'), 'v2');
    // Behind an unconditional route nothing is reached.
    assert.equal(id('a.test', '/v2', 'PUT'), 'v2');
  });

  it('falls back to a shorter prefix when no route of the longer one holds; none: null', () => {
    const fallback = buildMatcher([
      route('v3-header', 'a.test', '/v3', { headers: [{ name: 'h', value: '1' }] }),
      route('root', 'a.test', '/'),
    ]);
    assert.equal(fallback('a.test', '/v3/x', { headers: { h: '2' } }, '')?.id, 'root');
    assert.equal(fallback('a.test', '/v3/x', { headers: { h: '1' } }, '')?.id, 'v3-header');
    assert.equal(id('a.test', '/other', 'GET', { version: 'one' }), 'root-header');
    assert.equal(id('a.test', '/other', 'GET', {}), null);
    assert.equal(match('a.test', '/v2', undefined)?.id, 'v2', 'no request given: conditions never hold');
  });

  it('an exact path with conditions falls back to the prefixes when they do not hold', () => {
    assert.equal(id('a.test', '/e', 'GET'), 'exact-get');
    assert.equal(id('a.test', '/e', 'DELETE'), 'prefix-e');
  });

  it('a wildcard host covers one or more labels, never the bare domain; an exact host and the longest suffix win', () => {
    assert.equal(id('y.example.com', '/'), 'wild');
    assert.equal(id('y.z.example.com', '/'), 'wild');
    assert.equal(id('y.b.example.com', '/'), 'deeper');
    assert.equal(id('x.example.com', '/'), 'exact-host');
    assert.equal(id('example.com', '/'), null);
  });
});
