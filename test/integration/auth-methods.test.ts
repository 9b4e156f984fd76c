import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { hashPassword } from '../../src/auth/password.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'integration-masterkey-7f3a';
const HOST = 'app.example.com';
// Every secret of this file: none of them may ever show up in the proxy's logs or reach an upstream.
const SECRETS = {
  alicePassword: 'wonderland-pw-91',
  bobPassword: 'hashed-pw-52',
  adminPassword: 'admin-pw-33',
  ciKey: 'ci-key-0d9e1c',
  grafanaKey: 'grafana-key-77ab',
};

interface Echo {
  server: string;
  url: string;
  headers: Record<string, string | undefined>;
}

describe('authentication methods through the proxy process (per-path policies)', () => {
  let open: Upstream;
  let protectedUpstream: Upstream;
  let tollgate: Tollgate;
  const issuedTokens: string[] = [];

  before(async () => {
    open = await startUpstream({ name: 'open' });
    protectedUpstream = await startUpstream({ name: 'protected' });
    const servers = [protectedUpstream.address];
    tollgate = await startTollgate({
      main: { masterkey: MASTERKEY },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers: [open.address] },
              '/basic': {
                servers,
                authorization: {
                  type: 'basic',
                  users: [
                    { username: 'alice', password: SECRETS.alicePassword },
                    { username: 'bob', password_hash: await hashPassword(SECRETS.bobPassword, 10) },
                  ],
                },
              },
              '/admin': {
                servers,
                authorization: { type: 'basic', creds: `admin:${SECRETS.adminPassword}` },
              },
              '/key': {
                servers,
                authorization: {
                  type: 'apikey',
                  keys: [
                    { name: 'ci', key: SECRETS.ciKey },
                    { name: 'grafana', key: SECRETS.grafanaKey },
                  ],
                },
              },
              '/legacy-key': { servers, authorization: { type: 'api', data: SECRETS.ciKey } },
              '/jwt': { servers, authorization: { type: 'jwt' } },
            },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await Promise.all([open?.close(), protectedUpstream?.close()]);
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    request(tollgate.proxyUrl, { path, headers: { host: HOST, ...headers } });
  const basic = (user: string, password: string) => ({
    authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
  });
  const echo = (res: SimpleResponse) => res.json<Echo>();
  const assertRefused = (res: SimpleResponse, reason: string, challenge: RegExp, label: string) => {
    assert.equal(res.status, 401, label);
    assert.equal(res.json<{ error: string }>().error, reason, label);
    assert.match(String(res.headers['www-authenticate']), challenge, label);
  };

  async function token(owner: string, valid = 5): Promise<string> {
    const res = await request(`${tollgate.apiUrl}/jwt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ master_key: MASTERKEY, owner, valid }),
    });
    assert.equal(res.status, 200, res.body);
    const issued = res.json<{ token: string }>().token;
    issuedTokens.push(issued);
    return issued;
  }

  it('basic: good credentials pass; the upstream sees the subject, not the Authorization header', async () => {
    for (const [user, password] of [
      ['alice', SECRETS.alicePassword],
      ['bob', SECRETS.bobPassword],
      ['bob', SECRETS.bobPassword], // second time: served from the hash-check cache
    ] as const) {
      const res = await get('/basic/x', { ...basic(user, password), 'x-tollgate-subject': 'root' });
      assert.equal(res.status, 200, user);
      const seen = echo(res);
      assert.equal(seen.server, 'protected');
      assert.equal(seen.headers['x-tollgate-subject'], user, 'a client-sent subject is replaced');
      assert.equal(seen.headers.authorization, undefined);
    }
  });

  it('basic: missing and wrong credentials are refused with the Basic challenge', async () => {
    const challenge = /^Basic realm="tollgate", charset="UTF-8"$/;
    assertRefused(await get('/basic'), 'missing_credentials', challenge, 'none');
    assertRefused(
      await get('/basic', basic('alice', 'nope')),
      'invalid_credentials',
      challenge,
      'wrong password',
    );
    assertRefused(
      await get('/basic', basic('bob', 'nope')),
      'invalid_credentials',
      challenge,
      'wrong hashed',
    );
    assertRefused(
      await get('/basic', basic('eve', SECRETS.alicePassword)),
      'invalid_credentials',
      challenge,
      'no user',
    );
    assertRefused(
      await get('/basic', basic('admin', SECRETS.adminPassword)),
      'invalid_credentials',
      challenge,
      'other path',
    );
    assert.equal(protectedUpstream.requests.filter((r) => r.url === '/basic').length, 0);
  });

  it('a path policy protects its subtree only, not sibling prefixes such as /adminx', async () => {
    assert.equal((await get('/admin')).status, 401);
    assert.equal((await get('/admin/users')).status, 401);
    assert.equal((await get('/admin/../admin/x')).status, 401);
    assert.equal((await get('/admin/x', basic('admin', SECRETS.adminPassword))).status, 200);
    for (const path of ['/adminx', '/admin-panel', '/', '/other']) {
      const res = await get(path);
      assert.equal(res.status, 200, path);
      assert.equal(echo(res).server, 'open', path);
    }
  });

  it('an open route forwards Authorization and x-api-key untouched but never a client X-Tollgate-Subject', async () => {
    const res = await get('/open', {
      authorization: 'Bearer upstream-own',
      'x-api-key': 'k',
      'x-tollgate-subject': 'root',
    });
    const seen = echo(res);
    assert.equal(seen.headers.authorization, 'Bearer upstream-own');
    assert.equal(seen.headers['x-api-key'], 'k');
    assert.equal(seen.headers['x-tollgate-subject'], undefined);
  });

  it('apikey: named keys pass with the key name as subject; the key never reaches the upstream', async () => {
    for (const [key, name] of [
      [SECRETS.ciKey, 'ci'],
      [SECRETS.grafanaKey, 'grafana'],
    ]) {
      const res = await get('/key/metrics', {
        'x-api-key': key as string,
        authorization: 'Basic dXA6c3RyZWFt',
      });
      assert.equal(res.status, 200);
      const seen = echo(res);
      assert.equal(seen.headers['x-tollgate-subject'], name);
      assert.equal(seen.headers['x-api-key'], undefined);
      assert.equal(
        seen.headers.authorization,
        'Basic dXA6c3RyZWFt',
        'not the proxy’s credential on this route',
      );
    }
    const legacy = await get('/legacy-key', { 'x-api-key': SECRETS.ciKey });
    assert.equal(legacy.status, 200, '`type: api` with `data:` is the same method');
    assert.equal(echo(legacy).headers['x-tollgate-subject'], 'apikey');
  });

  it('apikey: missing and wrong keys are refused', async () => {
    const challenge = /^ApiKey realm="tollgate"/;
    assertRefused(await get('/key'), 'missing_credentials', challenge, 'none');
    assertRefused(
      await get('/key', { 'x-api-key': `${SECRETS.ciKey}x` }),
      'invalid_credentials',
      challenge,
      'wrong',
    );
    assertRefused(
      await get('/key', basic('alice', SECRETS.alicePassword)),
      'missing_credentials',
      challenge,
      'basic',
    );
  });

  it('jwt: a token from the API works as Bearer and as the tollgatetoken parameter, stripped before forwarding', async () => {
    const jwt = await token('carol');
    const bearer = await get('/jwt/report?a=1', { authorization: `Bearer ${jwt}` });
    assert.equal(bearer.status, 200);
    assert.equal(echo(bearer).headers['x-tollgate-subject'], 'carol');
    assert.equal(echo(bearer).headers.authorization, undefined);
    assert.equal(echo(bearer).url, '/jwt/report?a=1');

    const link = await get(`/jwt/report?a=1&tollgatetoken=${jwt}&b=%2Fx`);
    assert.equal(link.status, 200);
    assert.equal(echo(link).url, '/jwt/report?a=1&b=%2Fx');
    assert.equal(echo(link).headers['x-tollgate-subject'], 'carol');
  });

  it('jwt: missing, wrong, hostile and oversized tokens are refused; the process survives', async () => {
    const jwt = await token('dave');
    const [header, payload, signature] = jwt.split('.') as [string, string, string];
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${payload}.`;
    assertRefused(await get('/jwt'), 'missing_credentials', /^Bearer realm="tollgate"$/, 'none');
    const invalid = /^Bearer realm="tollgate", error="invalid_token"$/;
    assertRefused(
      await get('/jwt', { authorization: `Bearer ${header}.${payload}.${signature.slice(0, -3)}` }),
      'token_invalid',
      invalid,
      'truncated',
    );
    assertRefused(
      await get('/jwt', { authorization: `Bearer ${none}` }),
      'token_invalid',
      invalid,
      'alg none',
    );
    assertRefused(await get(`/jwt?tollgatetoken=${none}`), 'token_invalid', invalid, 'alg none in the query');
    assertRefused(
      await get('/jwt', { authorization: `Bearer ${jwt}${'A'.repeat(8000)}` }),
      'token_invalid',
      invalid,
      'long',
    );

    // Beyond Node's header limit: answered 431 by the HTTP layer (or 401), never a crash.
    const huge = await get('/jwt', { authorization: `Bearer ${'A'.repeat(40_000)}` }).catch(
      (error: Error) => error,
    );
    if (!(huge instanceof Error)) assert.ok([401, 431].includes(huge.status), String(huge.status));
    const hugeQuery = await get(`/jwt?tollgatetoken=${'A'.repeat(40_000)}`).catch((error: Error) => error);
    if (!(hugeQuery instanceof Error))
      assert.ok([401, 414, 431].includes(hugeQuery.status), String(hugeQuery.status));
    assert.equal((await get('/jwt', { authorization: `Bearer ${jwt}` })).status, 200, 'still serving');
    assert.equal(protectedUpstream.requests.filter((r) => r.url === '/jwt').length, 1);
  });

  it('counts every refusal in tollgate_auth_failures_total{route,method,reason}', async () => {
    const metrics = await tollgate.metrics();
    const count = (labels: string) =>
      Number(new RegExp(`^tollgate_auth_failures_total\\{${labels}\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
    assert.ok(count(`route="${HOST}/basic",method="basic",reason="missing_credentials"`) >= 1, metrics);
    assert.ok(count(`route="${HOST}/basic",method="basic",reason="invalid_credentials"`) >= 4);
    assert.ok(count(`route="${HOST}/key",method="apikey",reason="invalid_credentials"`) >= 1);
    assert.ok(count(`route="${HOST}/jwt",method="jwt",reason="token_invalid"`) >= 4);
  });

  it('no password, key or token appears in the logs; refusals are logged with their reason', async () => {
    const out = tollgate.stdout() + tollgate.stderr();
    for (const secret of [
      ...Object.values(SECRETS),
      MASTERKEY,
      ...issuedTokens.map((t) => t.split('.')[2] ?? t),
    ]) {
      assert.ok(!out.includes(secret), `a secret leaked into the logs: ${secret.slice(0, 6)}…`);
    }
    for (const encoded of ['d29uZGVybGFuZC', 'YWxpY2U6'])
      assert.ok(!out.includes(encoded), 'base64 credentials leaked');
    const refusals = tollgate.logs().filter((line) => line.event === 'auth_refused');
    assert.ok(refusals.length >= 8, String(refusals.length));
    assert.ok(refusals.every((line) => typeof line.reason === 'string' && typeof line.route === 'string'));
    const jwtAccess = tollgate
      .logs()
      .filter((line) => line.msg === 'access' && String(line.path).startsWith('/jwt'));
    assert.ok(jwtAccess.length > 0);
    assert.ok(
      jwtAccess.every((line) => !String(line.path).includes('tollgatetoken')),
      'token parameter in access log',
    );
  });
});
