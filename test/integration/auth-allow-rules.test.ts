import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { OAUTH2_PROXY_COOKIE, startOauth2Proxy } from '../helpers/auth-services.ts';
import { type IssuerKey, issuerKey, signAs, startJwksServer } from '../helpers/jwks-server.ts';
import { testScope } from '../helpers/scope.ts';
import { counterValue } from '../helpers/token-api.ts';
import { request, type Tollgate } from '../helpers/tollgate.ts';

const ISSUER = 'https://idp.allow.test';
const AUDIENCE = 'tollgate';
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/**
 * `allow` on the methods that existed before OpenID (docs/authentication.md#who-may-pass): an
 * authenticated request its rules do not name gets 403 `forbidden`, never 401, and is counted.
 */
describe('allow rules on basic, apikey, forward and jwt routes through the proxy process', () => {
  const scope = testScope();
  let tollgate: Tollgate;
  let key: IssuerKey;

  before(async () => {
    key = await issuerKey('allow-1', 'ES256');
    const jwks = scope.keep(await startJwksServer());
    jwks.setKeys('/keys', [key]);
    const upstream = await scope.upstream({ name: 'app' });
    const oauth2Proxy = scope.keep(await startOauth2Proxy());
    const forward = (allow: string[]) => ({
      type: 'forward',
      url: `${oauth2Proxy.origin}/oauth2/auth`,
      subject_header: 'X-Auth-Request-User',
      allow: { subjects: allow },
    });
    const servers = [upstream.address];
    const external = { issuer: ISSUER, audience: AUDIENCE, jwks_uri: `${jwks.origin}/keys` };
    tollgate = await scope.tollgate({
      upstreams: {
        upstreams: {
          'allow.test': {
            paths: {
              '/basic': {
                servers,
                authorization: {
                  type: 'basic',
                  users: [
                    { username: 'alice', password: 'alice-pass' },
                    { username: 'bob', password: 'bob-pass' },
                  ],
                  allow: { subjects: ['alice'] },
                },
              },
              '/keys': {
                servers,
                authorization: {
                  type: 'apikey',
                  keys: [
                    { name: 'ci', key: 'key-of-ci-0123' },
                    { name: 'intern', key: 'key-of-intern-0123' },
                  ],
                  allow: { subjects: ['ci'] },
                },
              },
              // oauth2-proxy vouches for alice.
              '/forward-alice': { servers, authorization: forward(['alice']) },
              '/forward-bob': { servers, authorization: forward(['bob']) },
              '/jwt': {
                servers,
                authorization: {
                  type: 'jwt',
                  ...external,
                  allow: {
                    email_domains: ['example.com'],
                    groups: ['ops', 'sre'],
                    claims: { tier: ['gold'] },
                  },
                },
              },
            },
          },
        },
      },
    });
  });

  const get = (path: string, authorization: Record<string, string>) =>
    request(tollgate.proxyUrl, { path, headers: { host: 'allow.test', ...authorization } });
  const forbidden = async (route: string, method: string) =>
    counterValue(
      await tollgate.metrics(),
      'tollgate_auth_failures_total',
      `route="allow.test${route}",method="${method}",reason="forbidden"`,
    );
  const expectForbidden = async (path: string, method: string, headers: Record<string, string>) => {
    const before = await forbidden(path, method);
    const res = await get(path, headers);
    assert.equal(res.status, 403, res.body);
    assert.equal(JSON.parse(res.body).error, 'forbidden');
    assert.equal(res.headers['www-authenticate'], undefined);
    assert.equal(await forbidden(path, method), before + 1);
  };

  it('basic: the listed user passes, another good user gets 403, a wrong password still 401', async () => {
    assert.equal((await get('/basic', { authorization: basic('alice', 'alice-pass') })).status, 200);
    await expectForbidden('/basic', 'basic', { authorization: basic('bob', 'bob-pass') });
    assert.equal((await get('/basic', { authorization: basic('bob', 'wrong') })).status, 401);
  });

  it('apikey: matched on the key name', async () => {
    assert.equal((await get('/keys', { 'x-api-key': 'key-of-ci-0123' })).status, 200);
    await expectForbidden('/keys', 'apikey', { 'x-api-key': 'key-of-intern-0123' });
  });

  it('forward: matched on the subject the auth service vouches for', async () => {
    assert.equal((await get('/forward-alice', { cookie: OAUTH2_PROXY_COOKIE })).status, 200);
    await expectForbidden('/forward-bob', 'forward', { cookie: OAUTH2_PROXY_COOKIE });
  });

  it('jwt: keys AND, values OR, over email domain, groups and claims', async () => {
    const token = (claims: Record<string, unknown>) =>
      signAs(key, { sub: 'svc', ...claims }, { issuer: ISSUER, audience: AUDIENCE });
    const good = { email: 'a@Example.com', groups: ['dev', 'sre'], tier: 'gold' };
    assert.equal((await get('/jwt', { authorization: `Bearer ${await token(good)}` })).status, 200);
    for (const bad of [
      { ...good, email: 'a@other.com' },
      { ...good, email: 'a@other.com@example.com' },
      { ...good, email_verified: false },
      { ...good, groups: ['dev'] },
      { ...good, tier: 'silver' },
      { email: good.email, groups: good.groups },
    ]) {
      await expectForbidden('/jwt', 'jwt', { authorization: `Bearer ${await token(bad)}` });
    }
    // The claim may be a list holding one of the values.
    assert.equal(
      (await get('/jwt', { authorization: `Bearer ${await token({ ...good, tier: ['bronze', 'gold'] })}` }))
        .status,
      200,
    );
  });
});
