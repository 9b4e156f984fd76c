import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  AUTHELIA_COOKIE,
  AUTHELIA_PORTAL,
  type AuthService,
  OAUTH2_PROXY_COOKIE,
  startAuthelia,
  startOauth2Proxy,
} from '../helpers/auth-services.ts';
import { connectHttp2, h2Request } from '../helpers/h2-client.ts';
import {
  type InProcessTollgate,
  type RefusedAddress,
  refusedAddress,
  request,
  startInProcess,
  startTollgate,
  type Tollgate,
  waitFor,
} from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';
import {
  type EchoUpstream,
  mustOpen,
  mustRefuse,
  nextMessage,
  startEchoUpstream,
} from '../helpers/websocket.ts';

/**
 * `type: forward` through the built process (docs/authentication.md#forward-auth), against auth
 * services that follow oauth2-proxy's and Authelia's documented contracts. The upstream is reached only
 * when the auth service said 2xx for that very request; anything else fails closed.
 */

const HOST = 'app.example.com';
const SLOW_TIMEOUT_SECONDS = 0.5;

interface Echo {
  method: string;
  url: string;
  headers: Record<string, string | undefined>;
  bodyBytes: number;
}

describe('forward auth through the proxy process', () => {
  let oauth2: AuthService;
  let authelia: AuthService;
  let slow: AuthService;
  let broken: AuthService;
  let refused: RefusedAddress;
  let upstream: Upstream;
  let sockets: EchoUpstream;
  let tollgate: Tollgate;

  before(async () => {
    [oauth2, authelia, slow, broken, refused, upstream, sockets] = await Promise.all([
      startOauth2Proxy(),
      startAuthelia(),
      startOauth2Proxy(),
      startOauth2Proxy(),
      refusedAddress(),
      startUpstream({ name: 'app' }),
      startEchoUpstream(),
    ]);
    slow.mode = 'slow';
    broken.mode = 'error';
    const oauth2Policy = {
      type: 'forward',
      url: `${oauth2.origin}/oauth2/auth`,
      auth_response_headers: ['X-Auth-Request-User', 'X-Auth-Request-Email'],
      subject_header: 'X-Auth-Request-User',
      timeout_seconds: 5,
    };
    const servers = [upstream.address];
    tollgate = await startTollgate({
      main: { log_level: 'info', http2_cleartext: true },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/oauth': { servers, authorization: oauth2Policy },
              '/signin': {
                servers,
                authorization: { ...oauth2Policy, signin_url: `https://${HOST}/oauth2/start` },
              },
              '/authelia': {
                servers,
                authorization: {
                  type: 'forward',
                  // The Aralez spelling of the URL.
                  data: `${authelia.origin}/api/authz/forward-auth`,
                  auth_response_headers: ['Remote-User', 'Remote-Groups'],
                  subject_header: 'Remote-User',
                },
              },
              '/ws': { servers: [sockets.address], authorization: oauth2Policy },
              '/slow': {
                servers,
                authorization: {
                  ...oauth2Policy,
                  url: `${slow.origin}/oauth2/auth`,
                  timeout_seconds: SLOW_TIMEOUT_SECONDS,
                },
              },
              '/down': { servers, authorization: { ...oauth2Policy, url: `http://${refused.address}/auth` } },
              '/broken': { servers, authorization: { ...oauth2Policy, url: `${broken.origin}/oauth2/auth` } },
            },
          },
        },
      },
    });
  });

  after(async () => {
    // Servers are closed whatever stop() says, so a failing check cannot keep the test file alive.
    try {
      await tollgate?.stop();
    } finally {
      await refused?.release();
      await Promise.all(
        [oauth2, authelia, slow, broken, upstream, sockets].map((closable) => closable?.close()),
      );
    }
  });

  const send = (path: string, headers: Record<string, string> = {}, method = 'GET', body?: string) =>
    request(tollgate.proxyUrl, { path, method, body, headers: { host: HOST, ...headers } });

  /** Asserts that the request was answered without the upstream hearing of it. */
  async function withoutUpstream<T>(run: () => Promise<T>): Promise<T> {
    const before = upstream.requests.length;
    const result = await run();
    assert.equal(upstream.requests.length, before, 'the upstream must not be reached');
    return result;
  }

  it('oauth2-proxy: no session → its 401 is relayed (status, body, Set-Cookie) and the upstream is never reached', async () => {
    const res = await withoutUpstream(() => send('/oauth/page'));
    assert.equal(res.status, 401);
    assert.equal(res.body, 'Unauthorized');
    assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
    assert.deepEqual(res.headers['set-cookie'], ['_oauth2_proxy_csrf=csrf-token; Path=/; HttpOnly']);
    assert.equal(res.headers['cache-control'], 'no-store');
    const metrics = await tollgate.metrics();
    assert.match(
      metrics,
      /tollgate_auth_failures_total\{route="app\.example\.com\/oauth",method="forward",reason="missing_credentials"\} [1-9]/,
    );
  });

  it('oauth2-proxy: a session passes; the named headers replace client copies, the subject is set', async () => {
    const res = await send('/oauth/page?x=1&tollgatetoken=secret-token&y=2', {
      cookie: `${OAUTH2_PROXY_COOKIE}; theme=dark`,
      'x-auth-request-user': 'mallory',
      'X-Auth-Request-Email': 'mallory@evil.example',
      'x-forwarded-uri': '/spoofed',
    });
    assert.equal(res.status, 200);
    const echo = res.json<Echo>();
    assert.equal(echo.url, '/oauth/page?x=1&y=2');
    assert.equal(echo.headers['x-auth-request-user'], 'alice');
    assert.equal(echo.headers['x-auth-request-email'], 'alice@example.com');
    assert.equal(echo.headers['x-tollgate-subject'], 'alice');
    assert.equal(echo.headers.cookie, `${OAUTH2_PROXY_COOKIE}; theme=dark`);
    // The client's claim about the original request reaches no auth layer behind Tollgate either.
    assert.equal(echo.headers['x-forwarded-uri'], undefined);
    const check = oauth2.checks.at(-1);
    assert.ok(check);
    assert.equal(check.method, 'GET');
    assert.equal(check.url, '/oauth2/auth');
    assert.equal(check.headers['x-forwarded-method'], 'GET');
    assert.equal(check.headers['x-forwarded-proto'], 'http');
    assert.equal(check.headers['x-forwarded-host'], HOST);
    // The client's path and query, token parameters removed, never what the client claimed.
    assert.equal(check.headers['x-forwarded-uri'], '/oauth/page?x=1&y=2');
    assert.equal(check.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(check.headers.cookie, `${OAUTH2_PROXY_COOKIE}; theme=dark`);
    // Only the chosen client headers: not the spoofed identity, not the client's other headers.
    assert.equal(check.headers['x-auth-request-user'], undefined);
    const isLine = (entry: Record<string, unknown>) =>
      entry.msg === 'access' && entry.path === '/oauth/page?x=1&y=2' && entry.status === 200;
    await waitFor(() => tollgate.logs().some(isLine));
    assert.equal(tollgate.logs().find(isLine)?.subject, 'alice');
  });

  it('client copies of the named headers are dropped even when the auth service does not return them', async () => {
    // Authelia answers with Remote-User and Remote-Groups; the client adds a Remote-Groups of its own
    // on a route whose auth service vouches for nothing else: it never arrives.
    const res = await send('/authelia/x', {
      cookie: AUTHELIA_COOKIE,
      'remote-groups': 'root',
      remote_user: 'root',
    });
    assert.equal(res.status, 200);
    const echo = res.json<Echo>();
    assert.equal(echo.headers['remote-groups'], 'admins,dev');
    assert.equal(echo.headers['remote-user'], 'bob');
    assert.equal(echo.headers.remote_user, undefined);
    assert.equal(echo.headers['x-tollgate-subject'], 'bob');
  });

  it('a body is never sent to the auth service and reaches the upstream intact; the check is a GET', async () => {
    const body = 'field=value&'.repeat(20_000);
    const checks = oauth2.checks.length;
    const res = await send(
      '/oauth/upload',
      { cookie: OAUTH2_PROXY_COOKIE, 'content-type': 'text/plain' },
      'POST',
      body,
    );
    assert.equal(res.status, 200);
    const echo = res.json<Echo>();
    assert.equal(echo.method, 'POST');
    assert.equal(echo.bodyBytes, Buffer.byteLength(body));
    const check = oauth2.checks[checks];
    assert.ok(check);
    assert.equal(check.method, 'GET');
    assert.equal(check.bodyBytes, 0);
    assert.equal(check.headers['content-length'], undefined);
    assert.equal(check.headers['x-forwarded-method'], 'POST');
    // Refused: the body goes nowhere.
    const refusedPost = await withoutUpstream(() => send('/oauth/upload', {}, 'POST', body));
    assert.equal(refusedPost.status, 401);
  });

  it('HEAD is checked with HEAD', async () => {
    const checks = oauth2.checks.length;
    const res = await send('/oauth/page', { cookie: OAUTH2_PROXY_COOKIE }, 'HEAD');
    assert.equal(res.status, 200);
    assert.equal(oauth2.checks[checks]?.method, 'HEAD');
  });

  it('signin_url: a 401 becomes a 302 to the sign-in page with rd= the original URL', async () => {
    const res = await withoutUpstream(() => send('/signin/report?id=7'));
    assert.equal(res.status, 302);
    assert.equal(
      res.headers.location,
      `https://${HOST}/oauth2/start?rd=${encodeURIComponent(`http://${HOST}/signin/report?id=7`)}`,
    );
    assert.deepEqual(res.headers['set-cookie'], ['_oauth2_proxy_csrf=csrf-token; Path=/; HttpOnly']);
  });

  it('Authelia: no session → its 302 to the portal (rd= the URL it rebuilt from X-Forwarded-*) is relayed', async () => {
    const res = await withoutUpstream(() => send('/authelia/docs?page=2'));
    assert.equal(res.status, 302);
    assert.equal(
      res.headers.location,
      `${AUTHELIA_PORTAL}?rd=${encodeURIComponent(`http://${HOST}/authelia/docs?page=2`)}&rm=GET`,
    );
    assert.match(res.body, /^<a href=/);
    const post = await withoutUpstream(() => send('/authelia/docs', {}, 'POST', 'x=1'));
    assert.equal(post.status, 303);
  });

  it('Authelia: a session without access to the resource → 403 relayed', async () => {
    const res = await withoutUpstream(() => send('/authelia/admin', { cookie: AUTHELIA_COOKIE }));
    assert.equal(res.status, 403);
    assert.equal(res.body, '<h1>403 Forbidden</h1>');
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  });

  it('WebSocket upgrades are checked the same way before the tunnel opens', async () => {
    const url = `ws://127.0.0.1:${tollgate.proxyPort}/ws/chat`;
    const refusedUpgrade = await mustRefuse(url, { host: HOST });
    assert.equal(refusedUpgrade.status, 401);
    assert.equal(sockets.handshakes.length, 0);
    const socket = await mustOpen(url, { host: HOST, cookie: OAUTH2_PROXY_COOKIE });
    socket.send('hello');
    assert.equal((await nextMessage(socket)).data.toString(), 'hello');
    assert.equal(sockets.handshakes[0]?.headers['x-auth-request-user'], 'alice');
    socket.close();
  });

  it('fails closed with 503 auth_unavailable: auth service slow, down, or answering 500', async () => {
    const started = performance.now();
    const slowAnswer = await withoutUpstream(() => send('/slow/x', { cookie: OAUTH2_PROXY_COOKIE }));
    const elapsed = (performance.now() - started) / 1000;
    assert.equal(slowAnswer.status, 503);
    assert.equal(slowAnswer.json().error, 'auth_unavailable');
    assert.equal(slowAnswer.headers['retry-after'], '1');
    // About timeout_seconds: not before it, and not the default 5 s either.
    assert.ok(elapsed >= SLOW_TIMEOUT_SECONDS * 0.9, `answered after ${elapsed}s`);
    assert.ok(elapsed < 4, `answered after ${elapsed}s`);
    for (const path of ['/down/x', '/broken/x']) {
      const res = await withoutUpstream(() => send(path, { cookie: OAUTH2_PROXY_COOKIE }));
      assert.equal(res.status, 503, path);
      assert.equal(res.json().error, 'auth_unavailable', path);
    }
    assert.equal(broken.checks.length, 1);
    const metrics = await tollgate.metrics();
    for (const route of ['slow', 'down', 'broken']) {
      assert.match(
        metrics,
        new RegExp(
          `tollgate_auth_failures_total\\{route="app\\.example\\.com/${route}",method="forward",reason="auth_unavailable"\\} 1`,
        ),
      );
    }
    assert.match(
      metrics,
      /tollgate_forward_auth_duration_seconds_count\{route="app\.example\.com\/oauth",result="allowed"\} [1-9]/,
    );
    assert.match(
      metrics,
      /tollgate_forward_auth_duration_seconds_count\{route="app\.example\.com\/slow",result="error"\} 1/,
    );
  });

  it('HTTP/2 requests go through the same check: refused, relayed; allowed, with the body intact', async () => {
    const session = await connectHttp2(tollgate.proxyUrl, HOST);
    try {
      const base = { ':authority': HOST, ':scheme': 'http' };
      const before = upstream.requests.length;
      const refusedH2 = await h2Request(session, { ...base, ':method': 'GET', ':path': '/oauth/h2' });
      assert.equal(refusedH2.status, 401);
      assert.equal(refusedH2.body.toString(), 'Unauthorized');
      assert.equal(upstream.requests.length, before);
      const checks = oauth2.checks.length;
      const body = 'h2-body-'.repeat(4096);
      const allowed = await h2Request(
        session,
        { ...base, ':method': 'POST', ':path': '/oauth/h2?q=1', cookie: OAUTH2_PROXY_COOKIE },
        [body.slice(0, 10_000), body.slice(10_000)],
      );
      assert.equal(allowed.status, 200);
      const echo = allowed.json<Echo>();
      assert.equal(echo.bodyBytes, body.length);
      assert.equal(echo.headers['x-auth-request-user'], 'alice');
      const check = oauth2.checks[checks];
      assert.equal(check?.method, 'GET');
      assert.equal(check?.bodyBytes, 0);
      assert.equal(check?.headers['x-forwarded-method'], 'POST');
      assert.equal(check?.headers['x-forwarded-host'], HOST);
      assert.equal(check?.headers['x-forwarded-uri'], '/oauth/h2?q=1');
      // Cookie crumbs (RFC 9113 §8.2.3): the HTTP/1.1 upstream gets one Cookie line, the one approved.
      const crumbs = await h2Request(session, {
        ...base,
        ':method': 'GET',
        ':path': '/oauth/crumbs',
        cookie: [OAUTH2_PROXY_COOKIE, 'theme=dark', 'lang=en'],
      });
      assert.equal(crumbs.status, 200);
      const approved = oauth2.checks.at(-1)?.headers.cookie;
      assert.equal(approved, `${OAUTH2_PROXY_COOKIE}; theme=dark; lang=en`);
      const raw = upstream.requests.at(-1)?.rawHeaders ?? [];
      const cookieLines = raw.filter((_, i) => i % 2 === 1 && raw[i - 1]?.toLowerCase() === 'cookie');
      assert.deepEqual(cookieLines, [approved]);
    } finally {
      session.close();
    }
  });

  it('keeps connections to the auth service alive', async () => {
    const from = oauth2.checks.length;
    for (let i = 0; i < 5; i++) {
      assert.equal((await send('/oauth/k', { cookie: OAUTH2_PROXY_COOKIE })).status, 200);
    }
    const ports = new Set(oauth2.checks.slice(from).map((check) => check.remotePort));
    assert.equal(ports.size, 1, 'one after the other, the checks reuse one connection');
  });
});

describe('a global forward authorization', () => {
  let authService: AuthService;
  let upstream: Upstream;
  let tollgate: InProcessTollgate;

  before(async () => {
    [authService, upstream] = await Promise.all([startOauth2Proxy(), startUpstream({ name: 'app' })]);
    tollgate = await startInProcess({
      upstreams: {
        authorization: {
          type: 'forward',
          url: `${authService.origin}/oauth2/auth`,
          auth_response_headers: ['X-Auth-Request-User'],
        },
        upstreams: {
          'a.example.com': { paths: { '/': { servers: [upstream.address] } } },
          DEFAULT: { paths: { '/docs': { servers: [upstream.address] } } },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await Promise.all([authService?.close(), upstream?.close()]);
  });

  it('protects every host and path, DEFAULT included', async () => {
    for (const [host, path] of [
      ['a.example.com', '/x'],
      ['unknown.example.com', '/docs/y'],
    ] as const) {
      const refused = await request(tollgate.proxyUrl, { path, headers: { host } });
      assert.equal(refused.status, 401, `${host}${path}`);
      const allowed = await request(tollgate.proxyUrl, {
        path,
        headers: { host, cookie: OAUTH2_PROXY_COOKIE },
      });
      assert.equal(allowed.status, 200, `${host}${path}`);
      assert.equal(allowed.json<Echo>().headers['x-auth-request-user'], 'alice');
      assert.equal(authService.checks.at(-1)?.headers['x-forwarded-host'], host);
    }
    assert.equal(upstream.requests.length, 2);
  });
});
