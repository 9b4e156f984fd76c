import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tokenApiForTests } from '../helpers/token-api.ts';
import { request } from '../helpers/tollgate.ts';

/**
 * The master-key guessing limit per client IP is not enough on its own: 40 loopback sources with a
 * handful of guesses each used to make hundreds of guesses without a 429. A global ceiling bounds
 * the guesses of every source together.
 */

const MASTERKEY = 'ceiling-test-masterkey';
const PER_IP = 3;
const GLOBAL = 10;
const api = tokenApiForTests({
  masterkey: () => MASTERKEY,
  failureLimit: { attempts: PER_IP, windowSeconds: 60 },
  globalFailureLimit: { attempts: GLOBAL, windowSeconds: 60 },
});

const post = (body: Record<string, unknown>, localAddress: string) =>
  request(`${api.url}/jwt`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    localAddress,
  });

test('many source addresses together hit the global ceiling; then even the right key waits', async () => {
  const statuses: number[] = [];
  // 40 sources × 2 guesses each: under the per-IP limit every time.
  for (let source = 2; source < 42; source++) {
    for (let guess = 0; guess < 2; guess++) {
      const res = await post(
        { master_key: `guess-${source}-${guess}`, owner: 'x', valid: 1 },
        `127.0.0.${source}`,
      );
      statuses.push(res.status);
    }
  }
  const compared = statuses.filter((s) => s === 403).length;
  assert.equal(compared, GLOBAL, 'exactly the global ceiling of wrong keys was compared');
  assert.equal(statuses.filter((s) => s === 429).length, statuses.length - GLOBAL);
  const right = await post({ master_key: MASTERKEY, owner: 'x', valid: 1 }, '127.0.0.99');
  assert.equal(right.status, 429, 'a right key is not compared either while the ceiling holds');
  assert.match(String(right.headers['retry-after']), /^\d+$/);
  assert.match(right.body, /too many wrong master keys/);
});
