import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildMatcher, type RouteMatcher, scanMatcher } from '../../src/routing/match.ts';
import { DEFAULT_HOST } from '../../src/routing/normalise.ts';
import type { Route } from '../../src/routing/types.ts';

// The matcher only reads hostKey and prefix; the rest of a Route is irrelevant here.
function route(hostKey: string, prefix: string, exact = false): Route {
  return { id: hostKey + prefix + (exact ? '$' : ''), hostKey, prefix, exact } as Route;
}

function idOf(matcher: RouteMatcher, host: string, path: string): string | null {
  return matcher(host, path)?.id ?? null;
}

describe('route matcher', () => {
  const table = [
    route('api.example.com', '/'),
    route('api.example.com', '/v1'),
    route('api.example.com', '/v1/admin'),
    route('api.example.com', '/v1/admin/x.y'),
    route('static.example.com', '/assets'),
    route(DEFAULT_HOST, '/'),
    route(DEFAULT_HOST, '/health'),
  ];
  const match = buildMatcher(table);

  it('picks the longest prefix on a segment boundary', () => {
    assert.equal(idOf(match, 'api.example.com', '/v1/admin/users'), 'api.example.com/v1/admin');
    assert.equal(idOf(match, 'api.example.com', '/v1/admin'), 'api.example.com/v1/admin');
    assert.equal(idOf(match, 'api.example.com', '/v1/admin/'), 'api.example.com/v1/admin');
    assert.equal(idOf(match, 'api.example.com', '/v1/administrator'), 'api.example.com/v1');
    assert.equal(idOf(match, 'api.example.com', '/v1/admin/x.y/z'), 'api.example.com/v1/admin/x.y');
    assert.equal(idOf(match, 'api.example.com', '/v10'), 'api.example.com/');
    assert.equal(idOf(match, 'api.example.com', '/'), 'api.example.com/');
  });

  it('gives a configured host without a matching prefix no route, never the DEFAULT ones', () => {
    assert.equal(idOf(match, 'static.example.com', '/assets/app.js'), 'static.example.com/assets');
    assert.equal(idOf(match, 'static.example.com', '/'), null);
    assert.equal(idOf(match, 'static.example.com', '/health'), null);
    assert.equal(idOf(match, 'static.example.com', '/assetsx'), null);
  });

  it('sends hosts that are not configured to DEFAULT, and nowhere without DEFAULT', () => {
    assert.equal(idOf(match, 'other.example.com', '/health/live'), 'DEFAULT/health');
    assert.equal(idOf(match, 'other.example.com', '/x'), 'DEFAULT/');
    const noDefault = buildMatcher([route('a.example', '/')]);
    assert.equal(idOf(noDefault, 'b.example', '/'), null);
  });

  it('an Exact path matches only itself, and before any prefix', () => {
    const exact = buildMatcher([
      route('x.example', '/'),
      route('x.example', '/a', true),
      route('x.example', '/a/', true),
      route('x.example', '/a'),
      route('only.example', '/e', true),
    ]);
    assert.equal(idOf(exact, 'x.example', '/a'), 'x.example/a$');
    assert.equal(idOf(exact, 'x.example', '/a/'), 'x.example/a/$');
    assert.equal(idOf(exact, 'x.example', '/a/b'), 'x.example/a');
    assert.equal(idOf(exact, 'x.example', '/ab'), 'x.example/');
    assert.equal(idOf(exact, 'only.example', '/e'), 'only.example/e$');
    assert.equal(idOf(exact, 'only.example', '/e/f'), null, 'a host of exact paths still owns its namespace');
  });

  it('compares host keys exactly (callers pass the canonical form)', () => {
    assert.equal(idOf(match, 'API.example.com', '/v1'), 'DEFAULT/');
  });

  it('finds any of 20,000 prefixes and stays exact around them', () => {
    const many = Array.from({ length: 20_000 }, (_, index) => route('bench.local', `/svc-${index}/api`));
    const big = buildMatcher(many);
    assert.equal(idOf(big, 'bench.local', '/svc-10000/api/items'), 'bench.local/svc-10000/api');
    assert.equal(idOf(big, 'bench.local', '/svc-19999/api'), 'bench.local/svc-19999/api');
    assert.equal(idOf(big, 'bench.local', '/svc-10000/apix'), null);
    assert.equal(idOf(big, 'bench.local', '/svc-10000'), null);
    assert.equal(idOf(big, 'bench.local', '/svc-20000/api'), null);
  });

  it('agrees with the longest-first scan on random tables and paths', () => {
    // A seeded generator (mulberry32), so a failure names a reproducible case.
    let seed = 0x5eed;
    const random = (): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    // Few, overlapping segment names, so prefixes of one another (`a`, `ab`, `a.b`) are common.
    const segments = ['a', 'ab', 'b', 'a.b', 'v1', 'v10', '%20', 'x-y', ''];
    const hosts = ['one.example', 'two.example', '[::1]', '10.0.0.1', DEFAULT_HOST];
    const randomPath = (depth: number): string => {
      let path = '';
      for (let level = 0; level < depth; level += 1) path += `/${pick(segments)}`;
      return path === '' ? '/' : path;
    };
    let compared = 0;
    for (let tableIndex = 0; tableIndex < 300; tableIndex += 1) {
      const routes: Route[] = [];
      const seen = new Set<string>();
      const size = 1 + Math.floor(random() * 25);
      for (let index = 0; index < size; index += 1) {
        const hostKey = pick(hosts);
        const raw = randomPath(Math.floor(random() * 4));
        // Prefixes are normalised without a trailing slash (except the root); duplicates are refused.
        const exact = random() < 0.2;
        const prefix = !exact && raw.length > 1 && raw.endsWith('/') ? raw.slice(0, -1) : raw;
        const id = hostKey + prefix + (exact ? '$' : '');
        if (seen.has(id)) continue;
        seen.add(id);
        routes.push(route(hostKey, prefix, exact));
      }
      const fast = buildMatcher(routes);
      const scan = scanMatcher(routes);
      for (let request = 0; request < 60; request += 1) {
        const host = random() < 0.8 ? pick(hosts) : 'unknown.example';
        let path = randomPath(Math.floor(random() * 6));
        if (random() < 0.2) path += '/';
        if (random() < 0.1) path += pick(segments);
        assert.equal(
          idOf(fast, host, path),
          idOf(scan, host, path),
          `table ${JSON.stringify(routes.map((entry) => entry.id))}, request ${host} ${path}`,
        );
        compared += 1;
      }
    }
    assert.equal(compared, 300 * 60);
  });
});
