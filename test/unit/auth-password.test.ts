import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hashPassword, isPasswordHash, parsePasswordHash, verifyPassword } from '../../src/auth/password.ts';

// The lowest accepted cost keeps these tests fast; the format and checks are the same at any cost.
const LOW_COST = 10;

test('a hash verifies its own password and no other', async () => {
  const hash = await hashPassword('correct horse', LOW_COST);
  assert.match(hash, /^scrypt\$ln=10,r=8,p=1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  assert.equal(await verifyPassword('correct horse', hash), true);
  assert.equal(await verifyPassword('correct horsE', hash), false);
  assert.equal(await verifyPassword('', hash), false);
});

test('two hashes of one password differ (random salt) and both verify', async () => {
  const [a, b] = await Promise.all([hashPassword('pw', LOW_COST), hashPassword('pw', LOW_COST)]);
  assert.notEqual(a, b);
  assert.equal(await verifyPassword('pw', a), true);
  assert.equal(await verifyPassword('pw', b), true);
});

test('non-ASCII passwords are hashed as UTF-8', async () => {
  const hash = await hashPassword('pässwörd ✓', LOW_COST);
  assert.equal(await verifyPassword('pässwörd ✓', hash), true);
  assert.equal(await verifyPassword('passwort ✓', hash), false);
});

test('the default cost is log2 N = 15', async () => {
  assert.match(await hashPassword('x'), /^scrypt\$ln=15,r=8,p=1\$/);
});

test('malformed or out-of-range hashes are refused, never verified', async () => {
  const good = await hashPassword('pw', LOW_COST);
  const bad = [
    '',
    'pw',
    'scrypt$',
    good.replace('scrypt$', 'bcrypt$'),
    good.replace('ln=10', 'ln=30'),
    good.replace('ln=10', 'ln=9'),
    good.replace('r=8', 'r=0'),
    good.replace('p=1', 'p=99'),
    `${good.split('$').slice(0, 3).join('$')}$short`,
    `${good}$extra`,
    good.replace(/\$[^$]+$/, '$not+base64url/=='),
  ];
  for (const value of bad) {
    assert.equal(parsePasswordHash(value), null, value);
    assert.equal(isPasswordHash(value), false, value);
    assert.equal(await verifyPassword('pw', value), false, value);
  }
  assert.equal(isPasswordHash(good), true);
});

test('hashPassword refuses a cost outside the accepted range', async () => {
  await assert.rejects(hashPassword('pw', 9), RangeError);
  await assert.rejects(hashPassword('pw', 21), RangeError);
  await assert.rejects(hashPassword('pw', 12.5), RangeError);
});
