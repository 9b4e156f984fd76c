import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request, startTollgates, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/** Every status of the token API (docs/tokens.md), from the real process's config_address listener. */
const MASTERKEY = 'token-api-masterkey-2c';
const JSON_TYPE = { 'content-type': 'application/json' };

describe('token API statuses (POST /jwt on config_address)', () => {
  let upstream: Upstream;
  let tollgate: Tollgate;
  let disabled: Tollgate;

  before(async () => {
    upstream = await startUpstream();
    const upstreams = {
      upstreams: {
        DEFAULT: { paths: { '/': { servers: [upstream.address], authorization: { type: 'jwt' } } } },
      },
    };
    [tollgate, disabled] = await startTollgates(
      { main: { masterkey: MASTERKEY, max_token_minutes: 120 }, upstreams },
      { upstreams },
    );
  });
  after(async () => {
    await Promise.all([tollgate?.stop(), disabled?.stop()]);
    await upstream?.close();
  });

  const post = (body: unknown, headers: Record<string, string> = JSON_TYPE, target = tollgate) =>
    request(`${target.apiUrl}/jwt`, {
      method: 'POST',
      headers,
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const error = (res: { json<T>(): T }) => res.json<{ error: string; message: string }>();

  it('200 with token as the first member, owner and an ISO-8601 expires_at', async () => {
    const before = Date.now();
    const res = await post({ master_key: MASTERKEY, owner: 'alice', valid: 90 });
    assert.equal(res.status, 200);
    // The seed's clients take the first member's value: check the raw text, not a parsed object.
    assert.match(
      res.body,
      /^\{"token":"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+","owner":"alice","expires_at":"/,
    );
    const expiresAt = Date.parse(res.json<{ expires_at: string }>().expires_at);
    assert.ok(Math.abs(expiresAt - (before + 90 * 60_000)) < 5_000);
  });

  it('exp is accepted in place of valid', async () => {
    assert.equal((await post({ master_key: MASTERKEY, owner: 'aralez', exp: 1 })).status, 200);
  });

  it('400 for malformed JSON, missing or mistyped fields, and valid outside 1..max_token_minutes', async () => {
    for (const [body, field] of [
      ['{not json', 'JSON'],
      [{ owner: 'a', valid: 1 }, 'master_key'],
      [{ master_key: MASTERKEY, valid: 1 }, 'owner'],
      [{ master_key: MASTERKEY, owner: 42, valid: 1 }, 'owner'],
      [{ master_key: MASTERKEY, owner: 'a' }, 'valid'],
      [{ master_key: MASTERKEY, owner: 'a', valid: 'ten' }, 'valid'],
      [{ master_key: MASTERKEY, owner: 'a', valid: 0 }, 'valid'],
      [{ master_key: MASTERKEY, owner: 'a', valid: 121 }, '120'],
    ] as const) {
      const res = await post(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(error(res).error, 'bad_request');
      assert.ok(error(res).message.includes(field), `${error(res).message} should name ${field}`);
    }
  });

  it('415 when the content type is not JSON', async () => {
    const res = await post(
      { master_key: MASTERKEY, owner: 'a', valid: 1 },
      { 'content-type': 'application/x-www-form-urlencoded' },
    );
    assert.equal(res.status, 415);
    assert.equal(error(res).error, 'unsupported_media_type');
  });

  it('413 for a body over 16 KiB', async () => {
    const res = await post({ master_key: MASTERKEY, owner: 'a', valid: 1, padding: 'x'.repeat(16 * 1024) });
    assert.equal(res.status, 413);
    assert.equal(error(res).error, 'payload_too_large');
  });

  it('404 for other paths and 405 with Allow for other methods; GET /healthz 200', async () => {
    const missing = await request(`${tollgate.apiUrl}/nope`);
    assert.equal(missing.status, 404);
    assert.equal(error(missing).error, 'not_found');
    const wrongMethod = await request(`${tollgate.apiUrl}/jwt`, { method: 'PUT' });
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.allow, 'POST');
    assert.equal((await request(`${tollgate.apiUrl}/healthz`)).status, 200);
  });

  it('503 saying issuance is disabled when no masterkey is configured; jwt routes then refuse', async () => {
    const res = await post({ master_key: 'anything', owner: 'a', valid: 1 }, JSON_TYPE, disabled);
    assert.equal(res.status, 503);
    assert.equal(error(res).error, 'token_issuance_disabled');
    assert.match(error(res).message, /disabled/);
    const proxied = await request(disabled.proxyUrl, {
      path: '/',
      headers: { host: 'x', authorization: 'Bearer a.b.c' },
    });
    assert.equal(proxied.status, 401);
  });

  it('403 for a wrong master key, then 429 with Retry-After once one IP keeps guessing', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++)
      statuses.push((await post({ master_key: `guess-${i}`, owner: 'a', valid: 1 })).status);
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(403));
    assert.deepEqual(statuses.slice(10), [429, 429]);
    const blocked = await post({ master_key: MASTERKEY, owner: 'a', valid: 1 });
    assert.equal(blocked.status, 429, 'the right key does not help while blocked');
    assert.equal(error(blocked).error, 'rate_limited');
    assert.ok(Number(blocked.headers['retry-after']) > 0);
  });

  it('counts issued tokens and refusals by reason; logs neither keys nor tokens', async () => {
    const metrics = await tollgate.metrics();
    assert.match(metrics, /^tollgate_tokens_issued_total 2$/m);
    for (const reason of [
      'bad_request',
      'unsupported_media_type',
      'payload_too_large',
      'forbidden',
      'rate_limited',
    ]) {
      assert.match(
        metrics,
        new RegExp(`^tollgate_token_requests_refused_total\\{reason="${reason}"\\} [1-9]`, 'm'),
        reason,
      );
    }
    assert.match(
      await disabled.metrics(),
      /^tollgate_token_requests_refused_total\{reason="token_issuance_disabled"\} 1$/m,
    );
    const out = tollgate.stdout() + tollgate.stderr();
    assert.ok(!out.includes(MASTERKEY));
    assert.ok(!/guess-\d/.test(out));
    const issued = tollgate.logs().filter((line) => line.event === 'token_issued');
    assert.equal(issued.length, 2);
    assert.ok(issued.every((line) => !('token' in line) || line.token === '[redacted]'));
  });
});
