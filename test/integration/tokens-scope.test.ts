import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { counterValue, mintToken, postJwt } from '../helpers/token-api.ts';
import { request, type Tollgate } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'scope-test-masterkey-5c1e';
const HOST = 'reports.example.com';

describe('scoped tokens through the proxy process', () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    upstream = await scope.upstream({ name: 'reports' });
    const servers = [upstream.address];
    tollgate = await scope.tollgate({
      main: { masterkey: MASTERKEY },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/reports': { servers, authorization: { type: 'jwt' } },
              '/admin': { servers, authorization: { type: 'jwt' } },
              '/public': { servers },
            },
          },
          'other.example.com': { paths: { '/reports': { servers, authorization: { type: 'jwt' } } } },
        },
      },
    });
  });

  const get = (path: string, headers: Record<string, string> = {}, host = HOST) =>
    request(tollgate.proxyUrl, { path, headers: { host, ...headers } });
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const refusals = async (route: string) =>
    counterValue(
      await tollgate.metrics(),
      'tollgate_auth_failures_total',
      `route="${route}",method="jwt",reason="token_out_of_scope"`,
    );

  it('POST /jwt signs the scope in, echoes it in canonical form and returns the jti', async () => {
    const issued = await mintToken(tollgate.apiUrl, {
      master_key: MASTERKEY,
      owner: 'alice',
      valid: 10,
      scope: ['/reports/42/', 'Reports.Example.com./reports/7'],
    });
    assert.deepEqual(issued.scope, ['/reports/42', 'reports.example.com/reports/7']);
    assert.match(issued.jti, /^[0-9a-f-]{36}$/);
    const claims = JSON.parse(Buffer.from(issued.token.split('.')[1] as string, 'base64url').toString());
    assert.deepEqual(claims.scope, issued.scope);
    assert.equal(claims.jti, issued.jti);
  });

  it('a refused scope entry is a 400 naming it, and no token', async () => {
    for (const [entry, index] of [
      ['/reports/42/../43', 1],
      ['/a%2Fb', 1],
      ['host:8080/x', 1],
      ['', 1],
    ] as const) {
      const res = await postJwt(tollgate.apiUrl, {
        master_key: MASTERKEY,
        owner: 'a',
        valid: 5,
        scope: ['/ok', entry],
      });
      assert.equal(res.status, 400, entry);
      assert.equal(res.body.error, 'bad_request');
      assert.match(String(res.body.message), new RegExp(`^scope\\[${index}\\]`), entry);
    }
    for (const bad of [[], '/reports', Array.from({ length: 17 }, (_, i) => `/r/${i}`), [42]]) {
      const res = await postJwt(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'a', valid: 5, scope: bad });
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.match(String(res.body.message), /scope/);
    }
  });

  it('inside the scope: allowed; next to it, above it or on another route: 403 token_out_of_scope', async () => {
    const { token } = await mintToken(tollgate.apiUrl, {
      master_key: MASTERKEY,
      owner: 'alice',
      valid: 10,
      scope: ['/reports/42'],
    });
    const before = await refusals(`${HOST}/reports`);
    for (const path of [
      '/reports/42',
      '/reports/42/',
      '/reports/42/page/2?x=1',
      '/reports//42',
      '/reports/%34%32',
    ]) {
      const res = await get(path, bearer(token));
      assert.equal(res.status, 200, path);
      assert.equal(res.json<{ headers: Record<string, string> }>().headers['x-tollgate-subject'], 'alice');
    }
    const outside = [
      '/reports/420',
      '/reports/4',
      '/reports',
      '/reports/43',
      '/reports/42/../43', // normalised to /reports/43 before anything is checked
      '/reports/42/%2e%2e/43',
      '/reports/42;x/../43',
    ];
    for (const path of outside) {
      const res = await get(path, bearer(token));
      assert.equal(res.status, 403, path);
      assert.equal(res.json().error, 'token_out_of_scope', path);
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="tollgate", error="insufficient_scope"');
    }
    const admin = await get('/admin', bearer(token));
    assert.equal(admin.status, 403);
    assert.equal(admin.json().error, 'token_out_of_scope');
    assert.equal(await refusals(`${HOST}/reports`), before + outside.length);
    assert.ok((await refusals(`${HOST}/admin`)) >= 1);
    assert.ok(
      upstream.requests.every((r) => !r.url.startsWith('/reports/4') || r.url.startsWith('/reports/42')),
      'no out-of-scope request reached the upstream',
    );
  });

  it('a host-scoped entry holds on that host only', async () => {
    const { token } = await mintToken(tollgate.apiUrl, {
      master_key: MASTERKEY,
      owner: 'bob',
      valid: 10,
      scope: [`${HOST}/reports/7`],
    });
    assert.equal((await get('/reports/7', bearer(token))).status, 200);
    assert.equal((await get('/reports/7', bearer(token), 'REPORTS.example.com.:80')).status, 200);
    const elsewhere = await get('/reports/7', bearer(token), 'other.example.com');
    assert.equal(elsewhere.status, 403);
    assert.equal(elsewhere.json().error, 'token_out_of_scope');
  });

  it('a scoped link (?tollgatetoken=) opens its resource only, and the token never reaches the upstream', async () => {
    const { token } = await mintToken(tollgate.apiUrl, {
      master_key: MASTERKEY,
      owner: 'carol',
      valid: 10,
      scope: ['/reports/42'],
    });
    const inside = await get(`/reports/42?page=1&tollgatetoken=${token}`);
    assert.equal(inside.status, 200);
    assert.equal(inside.json<{ url: string }>().url, '/reports/42?page=1');
    assert.equal(inside.headers['referrer-policy'], 'no-referrer');
    assert.equal(inside.headers['cache-control'], 'private, no-store');
    const outside = await get(`/reports/420?tollgatetoken=${token}`);
    assert.equal(outside.status, 403);
    assert.equal(outside.json().error, 'token_out_of_scope');
    const all = JSON.stringify(upstream.requests);
    assert.ok(!all.includes(token.split('.')[2] as string), 'no upstream request carried the token');
    assert.ok(!tollgate.stdout().includes(token.split('.')[2] as string), 'the token is in no log line');
  });

  it('an unscoped token keeps opening every jwt route', async () => {
    const { token } = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'dave', valid: 10 });
    for (const path of ['/reports/1', '/admin/x'])
      assert.equal((await get(path, bearer(token))).status, 200, path);
    assert.equal((await get('/reports/9', bearer(token), 'other.example.com')).status, 200);
  });
});
