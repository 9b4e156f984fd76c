import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import {
  CLOCK_SKEW_SECONDS,
  createTokenVerifier,
  deriveSigningKey,
  issueToken,
  type TokenCheck,
} from '../../src/auth/tokens.ts';

const MASTERKEY = 'unit-test-masterkey';
const T0 = 1_800_000_000;

/** A settable clock: tests move time instead of sleeping. */
function clock(start = T0) {
  let now = start;
  const read = () => now;
  read.set = (value: number) => {
    now = value;
  };
  return read;
}

const b64 = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

async function check(token: string, now = clock(), masterkey = MASTERKEY): Promise<TokenCheck> {
  return createTokenVerifier(masterkey, { now }).check(token);
}

async function goodToken(options: { owner?: string; validMinutes?: number; at?: number } = {}) {
  return issueToken(deriveSigningKey(MASTERKEY), {
    owner: options.owner ?? 'alice',
    validMinutes: options.validMinutes ?? 1,
    now: () => options.at ?? T0,
  });
}

/** The claims an honest token carries, for hand-built hostile ones. */
const claims = (overrides: Record<string, unknown> = {}) => ({
  iss: 'tollgate',
  sub: 'mallory',
  owner: 'mallory',
  iat: T0,
  nbf: T0,
  exp: T0 + 600,
  jti: 'x',
  ...overrides,
});

test('an issued token carries the documented claims and is HS256 with typ JWT', async () => {
  const issued = await goodToken({ owner: 'alice', validMinutes: 5 });
  assert.deepEqual(decodeProtectedHeader(issued.token), { alg: 'HS256', typ: 'JWT' });
  const payload = decodeJwt(issued.token);
  assert.equal(payload.iss, 'tollgate');
  assert.equal(payload.sub, 'alice');
  assert.equal(payload.owner, 'alice');
  assert.equal(payload.iat, T0);
  assert.equal(payload.nbf, T0);
  assert.equal(payload.exp, T0 + 300);
  assert.match(String(payload.jti), /^[0-9a-f-]{36}$/);
  assert.equal(issued.expiresAt, T0 + 300);
  assert.notEqual((await goodToken()).jti, (await goodToken()).jti);
});

test('a token verifies with the same masterkey, even in another verifier (another replica)', async () => {
  const { token, jti } = await goodToken();
  assert.deepEqual(await check(token), { ok: true, owner: 'alice', expiresAt: T0 + 60, jti, scope: null });
  assert.deepEqual(await check(token, clock(), 'another-masterkey'), { ok: false, reason: 'token_invalid' });
});

test('the signing key is derived from the masterkey, not the masterkey itself', () => {
  const derived = deriveSigningKey(MASTERKEY).export();
  assert.equal(derived.length, 32);
  assert.notDeepEqual(derived, Buffer.from(MASTERKEY));
  assert.deepEqual(derived, deriveSigningKey(MASTERKEY).export());
});

test('expiry: accepted within the skew allowance, refused after, as token_expired', async () => {
  const { token } = await goodToken({ validMinutes: 1 });
  const exp = T0 + 60;
  assert.equal((await check(token, clock(exp + CLOCK_SKEW_SECONDS - 1))).ok, true);
  assert.deepEqual(await check(token, clock(exp + CLOCK_SKEW_SECONDS + 1)), {
    ok: false,
    reason: 'token_expired',
  });
});

test('not yet valid (nbf in the future beyond the skew) is refused as token_invalid', async () => {
  const { token } = await goodToken({ at: T0 });
  assert.equal((await check(token, clock(T0 - CLOCK_SKEW_SECONDS + 1))).ok, true);
  assert.deepEqual(await check(token, clock(T0 - 120)), { ok: false, reason: 'token_invalid' });
});

test('a cached token answers synchronously and still expires on time', async () => {
  const now = clock();
  const verifier = createTokenVerifier(MASTERKEY, { now });
  const { token } = await goodToken();
  const first = verifier.check(token);
  assert.ok(first instanceof Promise, 'first check goes through jose');
  assert.equal((await first).ok, true);
  const second = verifier.check(token);
  assert.ok(!(second instanceof Promise), 'reused token is a synchronous cache hit');
  assert.equal(second.ok, true);
  now.set(T0 + 60 + CLOCK_SKEW_SECONDS + 1);
  assert.deepEqual(verifier.check(token), { ok: false, reason: 'token_expired' });
  assert.equal(verifier.cacheSize(), 0);
});

test('the cache is bounded: the oldest entry goes first', async () => {
  const verifier = createTokenVerifier(MASTERKEY, { now: clock(), cacheEntries: 2 });
  const tokens = await Promise.all([
    goodToken({ owner: 'a' }),
    goodToken({ owner: 'b' }),
    goodToken({ owner: 'c' }),
  ]);
  for (const { token } of tokens) await verifier.check(token);
  assert.equal(verifier.cacheSize(), 2);
  assert.ok(verifier.check(tokens[0]?.token ?? '') instanceof Promise, 'evicted token is verified again');
  assert.ok(!(verifier.check(tokens[2]?.token ?? '') instanceof Promise));
});

test('refusals are not cached', async () => {
  const verifier = createTokenVerifier(MASTERKEY, { now: clock() });
  const { token } = await goodToken();
  await verifier.check(`${token}x`);
  assert.equal(verifier.cacheSize(), 0);
});

test('hostile: alg none (with or without a signature) is refused', async () => {
  for (const signature of ['', 'AAAA']) {
    const token = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims())}.${signature}`;
    assert.deepEqual(await check(token), { ok: false, reason: 'token_invalid' }, signature);
  }
});

test('hostile: HS512 and HS384 tokens signed with the right derived key are refused', async () => {
  for (const alg of ['HS384', 'HS512']) {
    const token = await new SignJWT(claims())
      .setProtectedHeader({ alg, typ: 'JWT' })
      .sign(deriveSigningKey(MASTERKEY));
    assert.deepEqual(await check(token), { ok: false, reason: 'token_invalid' }, alg);
  }
});

test('hostile: RS256 tokens are refused, whether RSA-signed or HMAC-signed (key confusion)', async () => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const rsa = await new SignJWT(claims()).setProtectedHeader({ alg: 'RS256', typ: 'JWT' }).sign(privateKey);
  assert.deepEqual(await check(rsa), { ok: false, reason: 'token_invalid' });

  const input = `${b64({ alg: 'RS256', typ: 'JWT' })}.${b64(claims())}`;
  const hmac = createHmac('sha256', deriveSigningKey(MASTERKEY).export()).update(input).digest('base64url');
  assert.deepEqual(await check(`${input}.${hmac}`), { ok: false, reason: 'token_invalid' });
});

test('hostile: a token signed with the raw masterkey is refused', async () => {
  const token = await new SignJWT(claims())
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .sign(Buffer.from(MASTERKEY));
  assert.deepEqual(await check(token), { ok: false, reason: 'token_invalid' });
});

test('hostile: truncated tokens are refused', async () => {
  const { token } = await goodToken();
  const [header, payload] = token.split('.');
  for (const broken of [
    token.slice(0, -1),
    token.slice(0, -10),
    `${header}.${payload}.`,
    `${header}.${payload}`,
    `${header}`,
    token.slice(1),
    '',
    '..',
  ]) {
    assert.deepEqual(await check(broken), { ok: false, reason: 'token_invalid' }, broken);
  }
});

test('hostile: re-encoded tokens (changed claims, padded base64, other JSON spelling) are refused', async () => {
  const { token } = await goodToken({ owner: 'alice' });
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const decoded = decodeJwt(token);
  const variants = [
    `${header}.${b64({ ...decoded, owner: 'admin', sub: 'admin' })}.${signature}`,
    `${header}.${b64({ ...decoded, exp: (decoded.exp ?? 0) + 86_400 })}.${signature}`,
    `${header}.${b64(`${JSON.stringify(decoded)} `)}.${signature}`,
    `${b64({ typ: 'JWT', alg: 'HS256' })}.${payload}.${signature}`,
    `${header}.${payload}=.${signature}`,
    `${header}.${payload.replace(/.$/, (c) => (c === 'Q' ? 'R' : 'Q'))}.${signature}`,
    `${header}.${payload}.${signature.slice(0, -2)}${signature.endsWith('AA') ? 'BA' : 'AA'}`,
  ];
  for (const variant of variants) {
    assert.notEqual(variant, token);
    assert.deepEqual(await check(variant), { ok: false, reason: 'token_invalid' }, variant);
  }
});

test('hostile: claims Tollgate does not issue are refused even when correctly signed', async () => {
  const key = deriveSigningKey(MASTERKEY);
  const sign = (
    body: Record<string, unknown>,
    header: Record<string, unknown> = { alg: 'HS256', typ: 'JWT' },
  ) => new SignJWT(body).setProtectedHeader(header as { alg: string }).sign(key);
  const cases: Array<[string, Promise<string>]> = [
    ['other issuer', sign(claims({ iss: 'someone-else' }))],
    ['no exp', sign(claims({ exp: undefined }))],
    ['no nbf', sign(claims({ nbf: undefined }))],
    ['no owner', sign(claims({ owner: undefined }))],
    ['owner with a newline', sign(claims({ owner: 'a\r\nX-Injected: 1' }))],
    ['non-numeric exp', sign(claims({ exp: 'never' }))],
    ['no typ header', sign(claims(), { alg: 'HS256' })],
  ];
  for (const [name, token] of cases) {
    assert.deepEqual(await check(await token), { ok: false, reason: 'token_invalid' }, name);
  }
});

test('hostile: a huge or non-JWS string is refused without parsing', async () => {
  const { token } = await goodToken();
  const verifier = createTokenVerifier(MASTERKEY, { now: clock() });
  const huge = `${token}${'A'.repeat(100_000)}`;
  const answer = verifier.check(huge);
  assert.ok(!(answer instanceof Promise), 'refused synchronously, before jose');
  assert.deepEqual(answer, { ok: false, reason: 'token_invalid' });
  for (const junk of ['not a token', 'a.b.c d', '\u0000.\u0000.\u0000', 'ä.ö.ü']) {
    assert.deepEqual(await verifier.check(junk), { ok: false, reason: 'token_invalid' }, junk);
  }
});
