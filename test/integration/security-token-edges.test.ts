/**
 * Token edges (docs/security.md, "Token edges"), each through the real process: login CSRF through
 * a link, the response headers of every request whose URL held a token, the `;name=` spelling, a
 * key removed from an issuer's JWKS, and `.` in header names.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import {
  type IssuerKey,
  issuerKey,
  type JwksServer,
  signAs,
  startJwksServer,
} from '../helpers/jwks-server.ts';
import { testScope } from '../helpers/scope.ts';
import { mintToken } from '../helpers/token-api.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { type Echo, NAVIGATE, type Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'token-edges-masterkey-8c1f';
const ISSUER = 'https://idp.edges.example';
const AUDIENCE = 'tollgate-edges';

describe('token edges', () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;
  let jwks: JwksServer;
  let kept: IssuerKey;
  let removed: IssuerKey;
  let unpublished: IssuerKey;

  before(async () => {
    [kept, removed, unpublished] = await Promise.all([
      issuerKey('kept-1', 'ES256'),
      issuerKey('removed-1', 'ES256'),
      issuerKey('never-1', 'ES256'),
    ]);
    jwks = scope.keep(await startJwksServer());
    jwks.setKeys('/keys', [kept, removed]);
    upstream = await scope.upstream({ name: 'app' });
    const servers = [upstream.address];
    tollgate = await scope.tollgate({
      main: { masterkey: MASTERKEY },
      upstreams: {
        upstreams: {
          DEFAULT: {
            paths: {
              '/reports': { servers, authorization: { type: 'jwt' } },
              '/ext': {
                servers,
                authorization: {
                  type: 'jwt',
                  issuer: ISSUER,
                  audience: AUDIENCE,
                  jwks_uri: `${jwks.origin}/keys`,
                },
              },
              '/open': { servers },
            },
          },
        },
      },
    });
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    request(tollgate.proxyUrl, { path, headers: { host: 'site.local', ...headers } });
  const cookieOf = (setCookie: string | string[] | undefined) => String(setCookie).split(';')[0] as string;
  const token = async (owner: string) =>
    (await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner, valid: 30 })).token;

  it('a link navigation never replaces a valid link cookie of another subject (login CSRF)', async () => {
    const victim = await token('victim');
    const attacker = await token('attacker');
    const first = await get(`/reports/1?tollgatetoken=${victim}`, NAVIGATE);
    assert.equal(first.status, 303);
    const victimCookie = cookieOf(first.headers['set-cookie']);

    // Another site navigates the victim's browser to the attacker's link: the victim's cookie comes along.
    const forged = await get(`/reports/1?tollgatetoken=${attacker}`, { ...NAVIGATE, cookie: victimCookie });
    assert.equal(forged.headers['set-cookie'], undefined, "the attacker's token is not set as the cookie");
    assert.notEqual(forged.status, 303);
    assert.equal(forged.headers['referrer-policy'], 'no-referrer');
    assert.equal(forged.headers['cache-control'], 'private, no-store');

    // The same subject (a fresh link), or a cookie that is no longer valid, is exchanged as before.
    const again = await get(`/reports/1?tollgatetoken=${await token('victim')}`, {
      ...NAVIGATE,
      cookie: victimCookie,
    });
    assert.equal(again.status, 303);
    assert.match(String(again.headers['set-cookie']), /^tollgatetoken=/);
    const stale = await get(`/reports/1?tollgatetoken=${attacker}`, {
      ...NAVIGATE,
      cookie: 'tollgatetoken=garbage',
    });
    assert.equal(stale.status, 303);
  });

  it('every answer to a URL carrying the token has Referrer-Policy and Cache-Control, open routes and refusals too', async () => {
    const cases: Array<[string, number]> = [
      ['/open/page?tollgatetoken=anything', 200],
      ['/open/page?a=1&TOLLGATETOKEN=x', 200],
      ['/open/page?a=1;tollgatetoken=x', 200],
      ['/reports/1?tollgatetoken=not-a-token', 401],
      ['/nowhere?tollgatetoken=x', 404],
    ];
    for (const [path, status] of cases) {
      const res = await request(tollgate.proxyUrl, {
        path,
        headers: { host: path.startsWith('/nowhere') ? 'unknown.local' : 'site.local' },
      });
      if (path.startsWith('/nowhere')) assert.ok(res.status >= 400, path);
      else assert.equal(res.status, status, path);
      assert.equal(res.headers['referrer-policy'], 'no-referrer', path);
      assert.equal(res.headers['cache-control'], 'private, no-store', path);
    }
    const plain = await get('/open/page?a=1');
    assert.equal(plain.headers['referrer-policy'], undefined, 'other requests are left alone');
  });

  it('`?a=1;tollgatetoken=T` is removed before forwarding and redacted in the access log', async () => {
    const secret = await token('matrix');
    const res = await get(`/open/m?a=1;tollgatetoken=${secret};b=2&c=3`);
    assert.equal(res.status, 200);
    assert.equal(res.json<Echo>().url, '/open/m?a=1;b=2&c=3');
    await waitFor(() => tollgate.logs().some((l) => String(l.path ?? '').startsWith('/open/m')));
    assert.ok(!tollgate.stdout().includes(secret), 'the token is in the log');
  });

  it('X.Tollgate.Subject and other dotted spellings of managed headers never reach the upstream', async () => {
    const res = await get('/open/h', {
      'X.Tollgate.Subject': 'admin',
      'x.tollgate_subject': 'admin',
      'X.Forwarded.For': '10.9.9.9',
      'X.Original.URL': '/admin',
      'X.Real.IP': '10.9.9.9',
    });
    const names = Object.keys(res.json<Echo>().headers);
    for (const name of [
      'x.tollgate.subject',
      'x.tollgate_subject',
      'x.forwarded.for',
      'x.original.url',
      'x.real.ip',
    ])
      assert.ok(!names.includes(name), `${name} was forwarded`);
  });

  it("a key removed from the issuer's JWKS stops verifying at the refresh that removed it, cached tokens included", async () => {
    const claims = { issuer: ISSUER, audience: AUDIENCE };
    const cached = await signAs(removed, { sub: 'cached' }, claims);
    const ok = (t: string) => get('/ext/x', { authorization: `Bearer ${t}` });
    assert.equal((await ok(cached)).status, 200);
    assert.equal((await ok(cached)).status, 200, 'verified again from the cache');

    jwks.setKeys('/keys', [kept]);
    const fetches = jwks.fetches('/keys');
    // A token with a kid the set never had makes Tollgate refresh the set (once per cooldown).
    assert.equal((await ok(await signAs(unpublished, {}, claims))).status, 401);
    assert.equal(jwks.fetches('/keys'), fetches + 1, 'the set was refreshed');

    const after = await ok(cached);
    assert.equal(after.status, 401, 'a cached verification outlived the key');
    assert.equal((await ok(await signAs(removed, { sub: 'fresh' }, claims))).status, 401);
    assert.equal((await ok(await signAs(kept, { sub: 'still' }, claims))).status, 200);
  });
});
