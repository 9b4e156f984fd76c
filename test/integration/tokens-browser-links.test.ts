import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { mintToken } from '../helpers/token-api.ts';
import { request, type Tollgate } from '../helpers/tollgate.ts';
import { type Echo, NAVIGATE, type Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'browser-links-masterkey-2d8e';

describe('shared links in a browser: the link token is exchanged for a cookie', () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    upstream = await scope.upstream({
      name: 'app',
      // An upstream that would let shared caches keep the page, as many do.
      handler: (req, res) => {
        const body = JSON.stringify({ url: req.url, headers: req.headers });
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=3600' });
        res.end(body);
      },
    });
    const servers = [upstream.address];
    tollgate = await scope.tollgate({
      main: { masterkey: MASTERKEY },
      upstreams: {
        upstreams: {
          DEFAULT: {
            paths: {
              '/reports': { servers, authorization: { type: 'jwt' } },
              '/api': { servers, authorization: { type: 'jwt', browser_links: false } },
            },
          },
        },
      },
    });
  });

  const get = (path: string, headers: Record<string, string> = {}, method = 'GET') =>
    request(tollgate.proxyUrl, { path, method, headers: { host: 'site.local', ...headers } });
  const cookieOf = (setCookie: string | string[] | undefined) => String(setCookie).split(';')[0] as string;

  it('a navigation with ?tollgatetoken= answers 303 to the URL without it and sets the cookie; the upstream sees nothing', async () => {
    const issued = await mintToken(tollgate.apiUrl, {
      master_key: MASTERKEY,
      owner: 'erin',
      valid: 30,
      scope: ['/reports/42'],
    });
    const seen = upstream.requests.length;
    const res = await get(`/reports/42/view?a=1&tollgatetoken=${issued.token}&b=2`, NAVIGATE);
    assert.equal(res.status, 303);
    assert.equal(res.headers.location, '/reports/42/view?a=1&b=2');
    assert.equal(res.headers['referrer-policy'], 'no-referrer');
    assert.equal(res.headers['cache-control'], 'private, no-store');
    const setCookie = String(res.headers['set-cookie']);
    assert.match(setCookie, new RegExp(`^tollgatetoken=${issued.token}; `));
    assert.match(setCookie, /; Path=\/reports\/42;/, 'Path is the scope');
    assert.match(setCookie, /; HttpOnly/);
    assert.match(setCookie, /; SameSite=Lax/);
    assert.doesNotMatch(setCookie, /Secure/, 'plain HTTP: no Secure flag');
    const maxAge = Number(/Max-Age=(\d+)/.exec(setCookie)?.[1]);
    assert.ok(maxAge > 29 * 60 && maxAge <= 30 * 60, `expires with the token: Max-Age=${maxAge}`);
    assert.match(setCookie, new RegExp(`Expires=${new Date(issued.expires_at).toUTCString()}`));
    assert.equal(upstream.requests.length, seen, 'the exchange is answered by the proxy');

    // What the browser does next: the same URL without the token, with the cookie.
    const next = await get('/reports/42/view?a=1&b=2', {
      ...NAVIGATE,
      cookie: `theme=dark; ${cookieOf(setCookie)}`,
    });
    assert.equal(next.status, 200);
    const echo = next.json<Echo>();
    assert.equal(echo.url, '/reports/42/view?a=1&b=2');
    assert.equal(echo.headers.cookie, 'theme=dark', 'the link cookie never reaches the upstream');
    assert.equal(echo.headers['x-tollgate-subject'], 'erin');
    assert.equal(
      next.headers['cache-control'],
      'public, max-age=3600',
      'cookie requests are ordinary requests',
    );

    // The cookie carries the same checks as the token: outside the scope, 403.
    const outside = await get('/reports/43', { cookie: cookieOf(setCookie) });
    assert.equal(outside.status, 403);
    assert.equal(outside.json().error, 'token_out_of_scope');
  });

  it('an unscoped link sets a cookie for the route prefix; HEAD navigations are exchanged too', async () => {
    const { token } = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'fred', valid: 5 });
    const res = await get(`/reports/1?tollgatetoken=${token}`, NAVIGATE, 'HEAD');
    assert.equal(res.status, 303);
    assert.match(String(res.headers['set-cookie']), /; Path=\/reports;/);
    assert.equal(res.headers.location, '/reports/1');
  });

  it('curl and scripts (no Sec-Fetch-Mode: navigate) get the page as before, marked private and no-referrer', async () => {
    const { token } = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'gina', valid: 5 });
    const res = await get(`/reports/7?tollgatetoken=${token}`);
    assert.equal(res.status, 200);
    assert.equal(res.json<Echo>().url, '/reports/7');
    assert.equal(res.headers['set-cookie'], undefined);
    assert.equal(
      res.headers['cache-control'],
      'private, no-store',
      "the upstream's public caching is overridden",
    );
    assert.equal(res.headers['referrer-policy'], 'no-referrer');
    // A fetch() or a POST from a page is not a navigation either.
    assert.equal((await get(`/reports/7?tollgatetoken=${token}`, { 'sec-fetch-mode': 'cors' })).status, 200);
    assert.equal((await get(`/reports/7?tollgatetoken=${token}`, NAVIGATE, 'POST')).status, 200);
  });

  it('a route with browser_links: false forwards link navigations, still private and no-referrer', async () => {
    const { token } = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'hank', valid: 5 });
    const res = await get(`/api/x?tollgatetoken=${token}`, NAVIGATE);
    assert.equal(res.status, 200);
    assert.equal(res.headers['set-cookie'], undefined);
    assert.equal(res.headers['referrer-policy'], 'no-referrer');
    assert.equal(res.headers['cache-control'], 'private, no-store');
  });

  it('a refused link token is not exchanged: 401, no cookie', async () => {
    const res = await get('/reports/1?tollgatetoken=not.a.token', NAVIGATE);
    assert.equal(res.status, 401);
    assert.equal(res.headers['set-cookie'], undefined);
    const expiredCookie = await get('/reports/1', { cookie: 'tollgatetoken=garbage' });
    assert.equal(expiredCookie.status, 401);
    assert.equal(expiredCookie.json().error, 'token_invalid');
  });
});
