import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { attachedThrough, type RouteConditions } from '../../src/routing/conditions.ts';
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
  toHttps = false,
): Route {
  return {
    id,
    hostKey,
    prefix,
    exact,
    toHttps,
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

  it('a route attached through one kind of listener holds only for requests of that kind; through both, for every request', () => {
    // The Gateway API guide: a RequestRedirect on the http listener, the service on the https one.
    const scheme = buildMatcher([
      route('redirect', 'r.test', '/', { secure: false }),
      route('served', 'r.test', '/', { secure: true }, false, true),
      route('both', 'b.test', '/'),
      route('tls-api', 'b.test', '/api', { secure: true }, false, true),
    ]);
    const get = { method: 'GET', headers: {} };
    assert.equal(scheme('r.test', '/x', get, '', false)?.id, 'redirect');
    assert.equal(
      scheme('r.test', '/x', get, '', true)?.id,
      'served',
      'never the plain listener redirect over TLS',
    );
    assert.equal(scheme('b.test', '/x', get, '', false)?.id, 'both');
    assert.equal(scheme('b.test', '/x', get, '', true)?.id, 'both');
    assert.equal(scheme('b.test', '/api/x', get, '', true)?.id, 'tls-api');
    // A plain request for a path only HTTPS listeners serve gets it, to be redirected (to_https).
    assert.equal(scheme('b.test', '/api/x', get, '', false)?.id, 'tls-api');
    const httpOnly = buildMatcher([route('plain', 'p.test', '/', { secure: false })]);
    assert.equal(
      httpOnly('p.test', '/', get, '', true),
      null,
      'an HTTP-listener-only route is not served over TLS',
    );
    assert.equal(httpOnly('p.test', '/', get, '', false)?.id, 'plain');
  });

  it('attachedThrough narrows the conditions to the kinds of listener only when they are not both', () => {
    const header = { method: null, headers: [{ name: 'h', value: '1' }], query: [] };
    assert.equal(attachedThrough(null, ['HTTP', 'HTTPS']), null);
    assert.equal(attachedThrough(header, ['HTTPS', 'HTTP', 'HTTPS']), header);
    assert.deepEqual(attachedThrough(null, ['HTTP']), {
      method: null,
      headers: [],
      query: [],
      secure: false,
    });
    assert.deepEqual(attachedThrough(header, ['HTTPS', 'HTTPS']), { ...header, secure: true });
  });
});
