import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Route, RoutingTable, UpstreamServer } from '../../src/routing/types.ts';
import {
  knownServerIds,
  pinnedServer,
  readStickyIds,
  STICKY_COOKIE,
  stickySetCookie,
  stickyValue,
} from '../../src/upstream/sticky.ts';
import { fakeServer } from '../helpers/fake-routes.ts';

const server = (id: string): UpstreamServer => ({ ...fakeServer(`${id}:80`), id });
const route = (servers: UpstreamServer[]): Route =>
  Object.freeze({
    id: 'h/',
    hostKey: 'h',
    prefix: '/',
    exact: false,
    unavailable: null,
    servers,
    service: null,
    auth: null,
    toHttps: false,
    rateLimit: null,
    sticky: { maxAgeSeconds: null },
    healthCheck: null,
    redirectTo: null,
    authFailureLimit: null,
    requestHeaders: null,
    responseHeaders: null,
  });

describe('reading the sticky cookie', () => {
  test('absent or empty headers carry nothing', () => {
    assert.deepEqual(readStickyIds(undefined), []);
    assert.deepEqual(readStickyIds(''), []);
    assert.deepEqual(readStickyIds('session=abc; theme=dark'), []);
  });

  test('finds it first, middle or last, with or without spaces', () => {
    assert.deepEqual(readStickyIds(`${STICKY_COOKIE}=s1`), ['s1']);
    assert.deepEqual(readStickyIds(`a=1; ${STICKY_COOKIE}=s1; b=2`), ['s1']);
    assert.deepEqual(readStickyIds(`a=1;${STICKY_COOKIE}=s1`), ['s1']);
    assert.deepEqual(readStickyIds(`a=1; ${STICKY_COOKIE}= s1 `), ['s1']);
    assert.deepEqual(readStickyIds(`${STICKY_COOKIE}="s1"`), ['s1']);
  });

  test('a cookie whose name merely ends with tollgate_sticky is not ours', () => {
    assert.deepEqual(readStickyIds(`my_${STICKY_COOKIE}=evil; x=1`), []);
    assert.deepEqual(readStickyIds(`my_${STICKY_COOKIE}=evil; ${STICKY_COOKIE}=s2`), ['s2']);
  });

  test('a list value and repeated cookies give every id in order', () => {
    assert.deepEqual(readStickyIds(`${STICKY_COOKIE}=s1.s2; ${STICKY_COOKIE}=s3`), ['s1', 's2', 's3']);
    assert.deepEqual(readStickyIds(`${STICKY_COOKIE}=..s1.`), ['s1']);
  });
});

describe('pinning and rewriting', () => {
  const [a, b, c, d] = [server('a'), server('b'), server('c'), server('d')];
  const ab = route([a as UpstreamServer, b as UpstreamServer]);

  test('the first id that belongs to the route wins', () => {
    assert.equal(pinnedServer(ab, ['c', 'b', 'a']), b);
    assert.equal(pinnedServer(ab, ['zz', 'c']), null);
    assert.equal(pinnedServer(ab, []), null);
  });

  test('a new value keeps the ids of other routes and drops this route’s and unknown ones', () => {
    const known = new Set(['a', 'b', 'c', 'd']);
    assert.equal(stickyValue(a as UpstreamServer, [], ab, known), 'a');
    assert.equal(stickyValue(a as UpstreamServer, ['b', 'c', 'gone', 'd'], ab, known), 'a.c.d');
    assert.equal(stickyValue(a as UpstreamServer, ['a', 'c', 'c'], ab, known), 'a.c');
  });

  test('known ids are computed once per table', () => {
    const table: RoutingTable = Object.freeze({
      hash: 'x',
      sourceHash: 'x',
      routes: [ab],
      servers: [a, b, c, d] as UpstreamServer[],
      match: () => null,
    });
    const ids = knownServerIds(table);
    assert.deepEqual([...ids], ['a', 'b', 'c', 'd']);
    assert.equal(knownServerIds(table), ids);
  });
});

describe('the Set-Cookie value', () => {
  test('session cookie over plain HTTP', () => {
    assert.equal(
      stickySetCookie('abc', { maxAgeSeconds: null }, false),
      'tollgate_sticky=abc; Path=/; HttpOnly; SameSite=Lax',
    );
  });

  test('Max-Age when configured, Secure over TLS', () => {
    assert.equal(
      stickySetCookie('abc', { maxAgeSeconds: 3600 }, true),
      'tollgate_sticky=abc; Path=/; HttpOnly; SameSite=Lax; Max-Age=3600; Secure',
    );
  });
});
