import assert from 'node:assert/strict';
import { pbkdf2 } from 'node:crypto';
import type { LookupAddress } from 'node:dns';
import { describe, it } from 'node:test';
import { createDnsCache, type LookupFunction } from '../../src/upstream/dns-cache.ts';

function lookupOnce(lookup: LookupFunction, name: string, options: Parameters<LookupFunction>[1] = {}) {
  return new Promise<{ error: Error | null; address: string | LookupAddress[]; family?: number | undefined }>(
    (resolve) => lookup(name, options, (error, address, family) => resolve({ error, address, family })),
  );
}

describe('cached DNS for upstream host names', () => {
  const answers: LookupAddress[] = [
    { address: '10.0.0.1', family: 4 },
    { address: 'fd00::1', family: 6 },
  ];

  it('one lookup per name while fresh, however many connects (also concurrent ones)', async () => {
    let calls = 0;
    let now = 0;
    const cache = createDnsCache({
      now: () => now,
      resolve: (_name, callback) => {
        calls++;
        setImmediate(() => callback(null, answers));
      },
    });
    const [a, b] = await Promise.all([lookupOnce(cache.lookup, 'api'), lookupOnce(cache.lookup, 'api')]);
    assert.equal(calls, 1);
    assert.equal(a.address, '10.0.0.1');
    assert.equal(b.family, 4);
    now = 29_000;
    assert.deepEqual((await lookupOnce(cache.lookup, 'api', { all: true })).address, answers);
    assert.deepEqual((await lookupOnce(cache.lookup, 'api', { family: 6 })).address, 'fd00::1');
    assert.equal(calls, 1);
  });

  it('a stale answer is served while one background lookup refreshes it; too old, it is not served', async () => {
    let calls = 0;
    let now = 0;
    let next: LookupAddress[] = answers;
    const cache = createDnsCache({
      now: () => now,
      freshMs: 1000,
      maxStaleMs: 5000,
      resolve: (_name, callback) => {
        calls++;
        const reply = next;
        setImmediate(() => callback(null, reply));
      },
    });
    await lookupOnce(cache.lookup, 'api');
    next = [{ address: '10.0.0.2', family: 4 }];
    now = 2000;
    assert.equal((await lookupOnce(cache.lookup, 'api')).address, '10.0.0.1', 'stale, served at once');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(calls, 2);
    assert.equal((await lookupOnce(cache.lookup, 'api')).address, '10.0.0.2', 'refreshed');
    now = 2000 + 6000;
    next = [{ address: '10.0.0.3', family: 4 }];
    assert.equal((await lookupOnce(cache.lookup, 'api')).address, '10.0.0.3', 'too old: looked up again');
  });

  it('failures are not cached', async () => {
    let calls = 0;
    const cache = createDnsCache({
      resolve: (_name, callback) => {
        calls++;
        callback(Object.assign(new Error('nope'), { code: 'ENOTFOUND' }), []);
      },
    });
    assert.equal(((await lookupOnce(cache.lookup, 'gone')).error as NodeJS.ErrnoException).code, 'ENOTFOUND');
    await lookupOnce(cache.lookup, 'gone');
    assert.equal(calls, 2);
    assert.equal(cache.size, 0);
  });

  it('a cached name answers while password hashing keeps every thread-pool thread busy', async () => {
    const cache = createDnsCache();
    await lookupOnce(cache.lookup, 'localhost'); // the real resolver, once
    // Four slow key derivations occupy libuv's four threads, as a flood of scrypt checks would.
    const order: string[] = [];
    const hashes = Array.from(
      { length: 4 },
      () => new Promise<void>((resolve) => pbkdf2('pw', 'salt', 300_000, 32, 'sha512', () => resolve())),
    );
    const cached = lookupOnce(cache.lookup, 'localhost').then((result) => {
      order.push('lookup');
      return result;
    });
    // A lookup that needed a thread would come after the first hash frees one.
    void Promise.race(hashes).then(() => order.push('a hash'));
    const result = await cached;
    assert.equal(result.error, null);
    assert.deepEqual(order, ['lookup'], 'the cached answer did not wait for the thread pool');
    await Promise.all(hashes);
  });
});
