import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type InProcessTollgate, request, startInProcess } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Header rules, redirect_to and the brute-force guard (docs/configuration.md), through the proxy.
 */

const HOST = 'app.example.com';
const OTHER = 'other.example.com';

interface Echo {
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

describe('header rules, redirect_to and auth_failure_limit', () => {
  let upstream: Upstream;
  let tollgate: InProcessTollgate;

  before(async () => {
    upstream = await startUpstream({
      name: 'app',
      handler: (req, res) => {
        const body = JSON.stringify({ url: req.url, headers: req.headers });
        res.writeHead(200, {
          'content-type': 'application/json',
          'x-powered-by': 'framework 1.0',
          'x-upstream': 'kept',
          vary: 'Accept',
        });
        res.end(body);
      },
    });
    const servers = [upstream.address];
    tollgate = await startInProcess({
      upstreams: {
        auth_failure_limit: 3,
        request_headers: { set: { 'X-Env': 'prod', 'X-Team': 'core' }, remove: ['X-Debug'] },
        response_headers: { remove: ['X-Powered-By'], add: { 'X-Frame-Options': 'DENY' } },
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers },
              '/api': {
                servers,
                request_headers: { set: { 'X-Env': 'api' }, add: { 'X-Debug': 'path-wins' } },
                response_headers: { add: { Vary: 'Origin' } },
                server_headers: ['Authorization:Bearer upstream-secret'],
                client_headers: ['Access-Control-Allow-Origin:*'],
              },
              '/old': { redirect_to: 'https://new.example.com/' },
              '/login': { servers, authorization: { type: 'basic', creds: 'alice:right-pw' } },
              '/strict': {
                servers,
                auth_failure_limit: 1,
                authorization: { type: 'apikey', creds: 'the-key' },
              },
            },
          },
          [OTHER]: {
            paths: { '/login': { servers, authorization: { type: 'basic', creds: 'alice:right-pw' } } },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
  });

  const send = (
    path: string,
    headers: Record<string, string> = {},
    options: { method?: string; host?: string; localAddress?: string } = {},
  ) =>
    request(tollgate.proxyUrl, {
      path,
      method: options.method,
      localAddress: options.localAddress,
      headers: { host: options.host ?? HOST, ...headers },
    });
  const basic = (password: string) => `Basic ${Buffer.from(`alice:${password}`).toString('base64')}`;

  it('global request and response rules apply to every route', async () => {
    const res = await send('/page', { 'x-env': 'client', 'x-debug': '1', 'x-team': 'client' });
    const echo = res.json<Echo>();
    assert.equal(echo.headers['x-env'], 'prod');
    assert.equal(echo.headers['x-team'], 'core');
    assert.equal(echo.headers['x-debug'], undefined);
    assert.equal(res.headers['x-powered-by'], undefined);
    assert.equal(res.headers['x-frame-options'], 'DENY');
    assert.equal(res.headers['x-upstream'], 'kept');
  });

  it("a path's rule for a name wins; the global rules for other names still apply; Aralez lists work", async () => {
    const res = await send('/api/x', {
      'x-env': 'client',
      'x-debug': 'client',
      authorization: 'Basic client',
    });
    const echo = res.json<Echo>();
    assert.equal(echo.headers['x-env'], 'api');
    assert.equal(echo.headers['x-team'], 'core');
    // The path's `add` replaced the global `remove` for this name: the client's copy stays, one is added.
    assert.equal(echo.headers['x-debug'], 'client, path-wins');
    assert.equal(echo.headers.authorization, 'Bearer upstream-secret');
    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.equal(res.headers.vary, 'Accept, Origin');
    assert.equal(res.headers['x-frame-options'], 'DENY');
    assert.equal(res.headers['x-powered-by'], undefined);
  });

  it('redirect_to: 301 for GET/HEAD, 308 otherwise, the path and query kept, before anything else', async () => {
    const before = upstream.requests.length;
    const get = await send('/old/docs/a?x=1&y=%20');
    assert.equal(get.status, 301);
    assert.equal(get.headers.location, 'https://new.example.com/old/docs/a?x=1&y=%20');
    const post = await send('/old', {}, { method: 'POST' });
    assert.equal(post.status, 308);
    assert.equal(post.headers.location, 'https://new.example.com/old');
    assert.equal(upstream.requests.length, before);
  });

  it('auth_failure_limit: after N failures a client gets 429 on that host, even with the right password', async () => {
    const client = '127.0.0.1';
    for (let i = 0; i < 3; i++) {
      assert.equal(
        (await send('/login', { authorization: basic(`wrong-${i}`) }, { localAddress: client })).status,
        401,
      );
    }
    const blocked = await send('/login', { authorization: basic('right-pw') }, { localAddress: client });
    assert.equal(blocked.status, 429);
    assert.equal(blocked.json().error, 'auth_failures');
    const retryAfter = Number(blocked.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    // Open routes of the host, other clients and other hosts are not affected.
    assert.equal((await send('/page', {}, { localAddress: client })).status, 200);
    assert.equal(
      (await send('/login', { authorization: basic('right-pw') }, { localAddress: '127.0.0.2' })).status,
      200,
    );
    assert.equal(
      (await send('/login', { authorization: basic('right-pw') }, { localAddress: client, host: OTHER }))
        .status,
      200,
    );
    // Requests without credentials are not failed attempts.
    for (let i = 0; i < 5; i++) {
      assert.equal((await send('/login', {}, { localAddress: '127.0.0.3' })).status, 401);
    }
    assert.equal(
      (await send('/login', { authorization: basic('right-pw') }, { localAddress: '127.0.0.3' })).status,
      200,
    );
    const metrics = await tollgate.metrics();
    assert.match(
      metrics,
      /tollgate_auth_failures_total\{route="app\.example\.com\/login",method="basic",reason="auth_failures"\} [1-9]/,
    );
  });

  it("a path's auth_failure_limit overrides the global one", async () => {
    const client = '127.0.0.4';
    assert.equal((await send('/strict', { 'x-api-key': 'nope' }, { localAddress: client })).status, 401);
    assert.equal((await send('/strict', { 'x-api-key': 'the-key' }, { localAddress: client })).status, 429);
  });
});
