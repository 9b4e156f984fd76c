import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SHARED, storageFor } from '../../src/cache/rules.ts';
import type { CachedResponse } from '../../src/cache/store.ts';
import { ResponseStore } from '../../src/cache/store.ts';

/** What the response cache stores, and for whom (docs/traffic.md#response-cache): the pure rules. */

const config = { maxBytes: 1024 * 1024, maxObjectBytes: 1024, defaultTtlSeconds: 0 };
const request = { url: '/x', method: 'GET', headers: { host: 'a.test' } };
const anonymous = { authenticated: false, subject: null };
const alice = { authenticated: true, subject: 'alice' };
const nobody = { authenticated: true, subject: null };

const decide = (asker: typeof alice | typeof anonymous, headers: Record<string, string>, status = 200) =>
  storageFor(asker, request, status, headers, config);

describe('response cache rules', () => {
  it('an open route stores what RFC 9111 lets a shared cache store, with explicit freshness only', () => {
    assert.deepEqual(pick(decide(anonymous, { 'cache-control': 'max-age=60' })), {
      store: true,
      partition: SHARED,
    });
    assert.equal(decide(anonymous, { 'last-modified': 'Sat, 01 Jan 2000 00:00:00 GMT' }).store, false);
    assert.equal(
      storageFor(anonymous, request, 200, {}, { ...config, defaultTtlSeconds: 30 }).store,
      true,
      'a default TTL stands in for the missing freshness',
    );
    assert.equal(decide(anonymous, { 'cache-control': 'max-age=60' }, 206).store, false);
    assert.equal(decide(anonymous, { 'cache-control': 'max-age=60' }, 500).store, false);
  });

  it('never: Set-Cookie, private, no-store, Vary * or Authorization, a body over max_object_bytes', () => {
    const never: Array<Record<string, string>> = [
      { 'cache-control': 'public, max-age=60', 'set-cookie': 'a=1' },
      { 'cache-control': 'private, max-age=60' },
      { 'cache-control': 'no-store, max-age=60' },
      { 'cache-control': 'max-age=60', vary: 'Accept, *' },
      { 'cache-control': 'public, max-age=60', vary: 'authorization' },
      { 'cache-control': 'max-age=60', 'content-length': '1025' },
    ];
    for (const headers of never)
      for (const asker of [anonymous, alice])
        assert.equal(decide(asker, headers).store, false, JSON.stringify(headers));
  });

  it('an authenticated request: shared only when public or s-maxage, else its subject’s own, else nothing', () => {
    assert.deepEqual(pick(decide(alice, { 'cache-control': 'public, max-age=60' })), {
      store: true,
      partition: SHARED,
    });
    assert.deepEqual(pick(decide(alice, { 'cache-control': 's-maxage=60' })), {
      store: true,
      partition: SHARED,
    });
    assert.deepEqual(pick(decide(alice, { 'cache-control': 'max-age=60' })), {
      store: true,
      partition: 's:alice',
    });
    assert.equal(decide(nobody, { 'cache-control': 'max-age=60' }).store, false);
    assert.equal(decide(nobody, { 'cache-control': 'public, max-age=60' }).store, true);
  });
});

describe('response store', () => {
  const entry = (key: string, bytes: number): CachedResponse => {
    const decision = decide(anonymous, { 'cache-control': 'max-age=60' });
    assert.ok(decision.store);
    return {
      key,
      urlKey: key,
      path: `/${key}`,
      partition: SHARED,
      vary: [],
      varyKey: '',
      policy: decision.policy,
      cacheControl: 'max-age=60',
      status: 200,
      body: Buffer.alloc(bytes),
      size: bytes,
    };
  };
  const route = (id: string) => ({ id, hostKey: 'a.test' });

  it('holds each route within its max_bytes and all routes within the global budget', () => {
    const store = new ResponseStore(3000);
    const small = { ...config, maxBytes: 2000 };
    for (let i = 0; i < 10; i++) store.put(route('a'), small, entry(`a${i}`, 500));
    assert.equal(store.bytes, 2000);
    assert.equal(store.entriesFor('a', 'a0').length, 0, 'the oldest went first');
    assert.equal(store.entriesFor('a', 'a9').length, 1);
    for (let i = 0; i < 10; i++) store.put(route('b'), small, entry(`b${i}`, 500));
    assert.equal(store.bytes, 3000, 'the global budget evicts across routes');
    assert.equal(store.put(route('a'), small, entry('huge', 2500)), false, 'larger than the route budget');
    assert.equal(store.purge('a.test', '/'), 6);
    assert.equal(store.bytes, 0);
  });
});

function pick(decision: ReturnType<typeof decide>) {
  return decision.store ? { store: true, partition: decision.partition } : decision;
}
