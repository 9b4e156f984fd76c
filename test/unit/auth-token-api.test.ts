import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeJwt } from 'jose';
import { createTokenVerifier } from '../../src/auth/tokens.ts';
import { tokenRequestsRefusedTotal, tokensIssuedTotal } from '../../src/observe/metrics.ts';
import { tokenApiForTests } from '../helpers/token-api.ts';
import { request } from '../helpers/tollgate.ts';

const MASTERKEY = 'api-test-masterkey';
const T0 = 1_800_000_000;
let masterkey: string | null = MASTERKEY;
const api = tokenApiForTests({
  masterkey: () => masterkey,
  now: () => T0,
  failureLimit: { attempts: 3, windowSeconds: 60 },
});

const JSON_TYPE = { 'content-type': 'application/json' };
const post = (body: unknown, headers: Record<string, string> = JSON_TYPE, localAddress?: string) =>
  request(`${api.url}/jwt`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(localAddress ? { localAddress } : {}),
  });

async function refused(reason: string): Promise<number> {
  return (await tokenRequestsRefusedTotal.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

test('200: token first, owner, expires_at; the token verifies with the masterkey', async () => {
  const issuedBefore = (await tokensIssuedTotal.get()).values[0]?.value ?? 0;
  const res = await post({ master_key: MASTERKEY, owner: 'alice', valid: 30 });
  assert.equal(res.status, 200);
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.match(String(res.headers['content-type']), /^application\/json/);
  const body = res.json<{ token: string; owner: string; expires_at: string; jti: string }>();
  assert.deepEqual(Object.keys(body), ['token', 'owner', 'expires_at', 'jti']);
  assert.equal(body.jti, decodeJwt(body.token).jti, 'the jti to revoke is the one inside the token');
  assert.equal(body.owner, 'alice');
  assert.equal(body.expires_at, new Date((T0 + 1800) * 1000).toISOString());
  assert.equal(decodeJwt(body.token).exp, T0 + 1800);
  assert.deepEqual(await createTokenVerifier(MASTERKEY, { now: () => T0 }).check(body.token), {
    ok: true,
    owner: 'alice',
    expiresAt: T0 + 1800,
    jti: body.jti,
    scope: null,
  });
  assert.equal((await tokensIssuedTotal.get()).values[0]?.value, issuedBefore + 1);
  assert.doesNotMatch(api.lines.join(''), new RegExp(`${MASTERKEY}|${body.token.split('.')[2]}`));
});

test('exp is accepted in place of valid; charset parameters on the content type are fine', async () => {
  const res = await post(
    { master_key: MASTERKEY, owner: 'aralez', exp: 1 },
    { 'content-type': 'Application/JSON; charset=utf-8' },
  );
  assert.equal(res.status, 200);
  assert.equal(decodeJwt(res.json<{ token: string }>().token).exp, T0 + 60);
});

test('400 names the field at fault', async () => {
  const cases: Array<[unknown, RegExp]> = [
    ['{"master_key":', /not valid JSON/],
    ['[]', /JSON object/],
    ['"x"', /JSON object/],
    [{ owner: 'a', valid: 1 }, /master_key/],
    [{ master_key: 7, owner: 'a', valid: 1 }, /master_key/],
    [{ master_key: MASTERKEY, valid: 1 }, /owner/],
    [{ master_key: MASTERKEY, owner: '', valid: 1 }, /owner/],
    [{ master_key: MASTERKEY, owner: 'a\nb', valid: 1 }, /owner/],
    [{ master_key: MASTERKEY, owner: 'x'.repeat(257), valid: 1 }, /owner/],
    [{ master_key: MASTERKEY, owner: 'a' }, /valid/],
    [{ master_key: MASTERKEY, owner: 'a', valid: '5' }, /valid/],
    [{ master_key: MASTERKEY, owner: 'a', valid: 0 }, /valid .* 1 to 60/],
    [{ master_key: MASTERKEY, owner: 'a', valid: 61 }, /valid/],
    [{ master_key: MASTERKEY, owner: 'a', valid: 1.5 }, /valid/],
    [{ master_key: MASTERKEY, owner: 'a', exp: -1 }, /exp/],
    [{ master_key: MASTERKEY, owner: 'a', valid: 1, exp: 2 }, /valid and exp/],
  ];
  const before = await refused('bad_request');
  for (const [body, message] of cases) {
    const res = await post(body);
    assert.equal(res.status, 400, JSON.stringify(body));
    const answer = res.json<{ error: string; message: string }>();
    assert.equal(answer.error, 'bad_request');
    assert.match(answer.message, message, JSON.stringify(body));
  }
  assert.equal(await refused('bad_request'), before + cases.length);
});

test('415 when the body is not declared JSON', async () => {
  for (const headers of [
    {},
    { 'content-type': 'text/plain' },
    { 'content-type': 'application/jsonx' },
  ] as Array<Record<string, string>>) {
    const res = await post({ master_key: MASTERKEY, owner: 'a', valid: 1 }, headers);
    assert.equal(res.status, 415);
    assert.equal(res.json().error, 'unsupported_media_type');
  }
});

test('413 for a body over 16 KiB, declared or streamed', async () => {
  const big = JSON.stringify({ master_key: MASTERKEY, owner: 'a', valid: 1, pad: 'x'.repeat(17 * 1024) });
  const declared = await post(big);
  assert.equal(declared.status, 413);
  assert.equal(declared.json().error, 'payload_too_large');
  const chunked = await post(big, { ...JSON_TYPE, 'transfer-encoding': 'chunked' });
  assert.equal(chunked.status, 413);
});

test('404 for other paths, 405 with Allow for other methods, healthz 200', async () => {
  const unknown = await request(`${api.url}/token`);
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json().error, 'not_found');
  const getJwt = await request(`${api.url}/jwt`);
  assert.equal(getJwt.status, 405);
  assert.equal(getJwt.headers.allow, 'POST');
  assert.equal(getJwt.json().error, 'method_not_allowed');
  const health = await request(`${api.url}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(health.json(), { status: 'ok' });
  const postHealth = await request(`${api.url}/healthz`, { method: 'POST' });
  assert.equal(postHealth.status, 405);
  assert.equal(postHealth.headers.allow, 'GET, HEAD');
});

test('403 for a wrong master key; repeated failures from one IP answered 429 with Retry-After', async () => {
  // Its own loopback source address, so the other tests' client IP is not blocked.
  const from = '127.0.0.2';
  for (let i = 0; i < 3; i++) {
    const res = await post({ master_key: `wrong-${i}`, owner: 'a', valid: 1 }, JSON_TYPE, from);
    assert.equal(res.status, 403);
    assert.equal(res.json().error, 'forbidden');
  }
  // Even the right key is refused while blocked: otherwise guessing could go on.
  const blocked = await post({ master_key: MASTERKEY, owner: 'a', valid: 1 }, JSON_TYPE, from);
  assert.equal(blocked.status, 429);
  assert.equal(blocked.json().error, 'rate_limited');
  const retryAfter = Number(blocked.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
  // Another client is not affected.
  assert.equal((await post({ master_key: MASTERKEY, owner: 'a', valid: 1 })).status, 200);
  assert.doesNotMatch(api.lines.join(''), /wrong-\d/);
});

test('503 when no masterkey is configured', async () => {
  masterkey = null;
  try {
    const res = await post({ master_key: 'anything', owner: 'a', valid: 1 });
    assert.equal(res.status, 503);
    assert.equal(res.json().error, 'token_issuance_disabled');
  } finally {
    masterkey = MASTERKEY;
  }
});
