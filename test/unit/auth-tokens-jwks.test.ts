import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { errors, jwtVerify } from 'jose';
import { createRemoteKeySet } from '../../src/auth/jwks.ts';
import { createLogger } from '../../src/log.ts';
import {
  type IssuerKey,
  issuerKey,
  type JwksServer,
  signAs,
  startJwksServer,
} from '../helpers/jwks-server.ts';

/**
 * When the remote key set fetches, with the clock in the test's hands: first use, the unknown-kid
 * refresh and its cooldown, the periodic background refresh, and keys kept through an outage.
 */

const ISSUER = 'https://idp.unit.example';
let jwks: JwksServer;
let first: IssuerKey;
let second: IssuerKey;
const lines: string[] = [];
const logger = createLogger('info', { write: (line: string) => lines.push(line) });

before(async () => {
  jwks = await startJwksServer();
  [first, second] = await Promise.all([issuerKey('k1', 'ES256'), issuerKey('k2', 'ES256')]);
});
after(() => jwks.close());

const verify = (keys: ReturnType<typeof createRemoteKeySet>, token: string) =>
  jwtVerify(token, keys, { issuer: ISSUER, audience: 'a', algorithms: ['ES256'] });
const token = (key: IssuerKey) => signAs(key, {}, { issuer: ISSUER, audience: 'a' });

test('unknown kid: one refresh at once, then none for 30 s, then one again', async () => {
  let now = 1_000_000;
  jwks.setKeys('/a', [first]);
  const keys = createRemoteKeySet(`${jwks.origin}/a`, { issuer: ISSUER, logger, nowMs: () => now });
  await verify(keys, await token(first));
  assert.equal(jwks.fetches('/a'), 1, 'fetched on first use');

  jwks.setKeys('/a', [first, second]);
  await verify(keys, await token(second));
  assert.equal(jwks.fetches('/a'), 2, 'an unknown kid refreshes at once');

  const stranger = await issuerKey('k9', 'ES256');
  await assert.rejects(verify(keys, await token(stranger)), errors.JWKSNoMatchingKey);
  assert.equal(jwks.fetches('/a'), 2, 'the rotation refresh just ran: no fetch');
  now += 29_999;
  await assert.rejects(verify(keys, await token(stranger)), errors.JWKSNoMatchingKey);
  assert.equal(jwks.fetches('/a'), 2, 'still within the cooldown');
  now += 1;
  await assert.rejects(verify(keys, await token(stranger)), errors.JWKSNoMatchingKey);
  assert.equal(jwks.fetches('/a'), 3, 'the cooldown is over: one refresh');
  await assert.rejects(verify(keys, await token(stranger)), errors.JWKSNoMatchingKey);
  assert.equal(jwks.fetches('/a'), 3);
});

test('periodic refresh in the background; an outage keeps the keys already held', async () => {
  let now = 5_000_000;
  jwks.setKeys('/b', [first]);
  const keys = createRemoteKeySet(`${jwks.origin}/b`, {
    issuer: ISSUER,
    logger,
    refreshMs: 60_000,
    nowMs: () => now,
  });
  await verify(keys, await token(first));
  assert.equal(jwks.fetches('/b'), 1);
  now += 59_000;
  await verify(keys, await token(first));
  assert.equal(jwks.fetches('/b'), 1, 'fresh enough');
  now += 1_000;
  jwks.setDown(true);
  try {
    // Due for a refresh, which fails in the background: the request is answered from the held keys.
    await verify(keys, await token(first));
    await waitUntil(() => lines.some((line) => line.includes('jwks_refresh_failed')));
    assert.equal(jwks.fetches('/b'), 2);
    await verify(keys, await token(first));
  } finally {
    jwks.setDown(false);
  }
});

test('no keys yet and the issuer down: refused at once, and retried at most once per cooldown', async () => {
  let now = 9_000_000;
  jwks.setKeys('/c', [first]);
  jwks.setDown(true);
  try {
    const keys = createRemoteKeySet(`${jwks.origin}/c`, { issuer: ISSUER, logger, nowMs: () => now });
    await assert.rejects(verify(keys, await token(first)));
    await assert.rejects(verify(keys, await token(first)), errors.JWKSNoMatchingKey);
    assert.equal(jwks.fetches('/c'), 1);
    jwks.setDown(false);
    now += 30_000;
    await verify(keys, await token(first));
    assert.equal(jwks.fetches('/c'), 2);
  } finally {
    jwks.setDown(false);
  }
});

async function waitUntil(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(check(), 'condition not met');
}
