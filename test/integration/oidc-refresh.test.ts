import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { CookieJar } from '../helpers/cookie-jar.ts';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { testScope } from '../helpers/scope.ts';
import { freePort, request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream } from '../helpers/upstream.ts';

const SECRET = 'refresh-session-secret-0123456789-abcdefghij';

/**
 * Sessions renewed with the refresh token (one refresh per session at a time), and providers that
 * cannot be reached or answer garbage: only their routes answer 503, and they recover on their own
 * (docs/authentication.md#openid-connect).
 */
describe('OpenID sessions: refresh and provider outages, through the proxy process', () => {
  const scope = testScope();
  let provider: TestProvider;
  let strict: TestProvider;
  let tollgate: Tollgate;
  let origin: string;

  before(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    // ID tokens live 20 s, under the 30 s Tollgate refreshes ahead: every use of a session refreshes it.
    provider = scope.keep(
      await startTestProvider({ redirectUris: [`${origin}/.tollgate/oidc/callback`], idTokenSeconds: 20 }),
    );
    strict = scope.keep(
      await startTestProvider({
        redirectUris: [`${origin}/.tollgate/oidc/callback`],
        idTokenSeconds: 20,
        claimsInUserinfoOnly: true,
      }),
    );
    // Starts down: Tollgate must come up anyway and serve everything else.
    provider.down = true;
    const garbage = scope.keep(
      await startUpstream({
        handler: (_req, res) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"issuer": 42, "nothing": "useful"}');
        },
      }),
    );
    const upstream = await scope.upstream({ name: 'app' });
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-oidc-refresh-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    // Both test providers use the default client secret.
    await writeFile(join(dir, 'client-secret'), provider.clientSecret);
    await writeFile(join(dir, 'session-secrets'), `${SECRET}\n`);
    const servers = [upstream.address];
    const provide = (issuer: string) => ({
      issuer,
      client_id: provider.clientId,
      client_secret_file: join(dir, 'client-secret'),
      scopes: ['openid', 'email', 'offline_access'],
    });
    tollgate = await scope.tollgate({
      main: {
        proxy_address_http: `127.0.0.1:${port}`,
        oidc_providers: {
          corp: provide(provider.issuer),
          junk: provide(garbage.origin),
          gone: provide(`http://${await scope.deadServer()}`),
          strict: provide(strict.issuer),
        },
        session_secret_file: join(dir, 'session-secrets'),
      },
      upstreams: {
        upstreams: {
          '127.0.0.1': {
            paths: {
              '/': { servers, authorization: { type: 'oidc', provider: 'corp' } },
              '/junk': { servers, authorization: { type: 'oidc', provider: 'junk' } },
              '/gone': { servers, authorization: { type: 'oidc', provider: 'gone' } },
              '/open': { servers },
              '/strict': {
                servers,
                authorization: { type: 'oidc', provider: 'strict', allow: { groups: ['ops'] } },
              },
            },
          },
        },
      },
    });
  });

  it('a provider down at start, one answering garbage and one unreachable: 503 on their routes only', async () => {
    const browser: Record<string, string> = { accept: 'text/html', 'sec-fetch-mode': 'navigate' };
    for (const path of ['/app', '/junk/x', '/gone/x']) {
      for (const headers of [browser, { accept: 'application/json' }]) {
        const res = await request(`${origin}${path}`, { headers });
        assert.equal(res.status, 503, `${path} ${JSON.stringify(headers)}: ${res.body}`);
        assert.equal(JSON.parse(res.body).error, 'auth_unavailable');
      }
    }
    assert.equal((await request(`${origin}/open`)).status, 200);
    for (const name of ['junk', 'gone']) {
      assert.ok(
        tollgate.logs().some((line) => line.event === 'oidc_provider_unavailable' && line.provider === name),
        `a log line for ${name}`,
      );
    }
    assert.equal(tollgate.child.exitCode, null, 'still running');
  });

  it('the provider coming back is found again (retried with backoff)', async () => {
    provider.down = false;
    await waitFor(
      async () => (await request(`${origin}/app`, { headers: { accept: 'text/html' } })).status === 302,
      20_000,
    );
    assert.ok(
      tollgate.logs().some((line) => line.event === 'oidc_provider_ready' && line.provider === 'corp'),
    );
  });

  it('refreshes a session silently, once for many parallel requests carrying it', async () => {
    provider.account = { sub: 'dana', email: 'dana@example.com', groups: ['ops'] };
    const jar = new CookieJar();
    const { last } = await jar.navigate(`${origin}/start`);
    assert.equal(last.status, 200);
    const cookie = jar.header();
    const before = provider.grants.refresh_token ?? 0;
    const responses = await Promise.all(
      Array.from({ length: 8 }, () =>
        fetch(`${origin}/parallel`, { headers: { cookie, accept: 'application/json' } }),
      ),
    );
    for (const res of responses) {
      assert.equal(res.status, 200);
      const renewed = res.headers.getSetCookie().find((line) => line.startsWith('tollgate_session='));
      assert.ok(renewed, 'the renewed session is handed back');
      assert.match(renewed, /HttpOnly; SameSite=Lax/);
    }
    assert.equal((provider.grants.refresh_token ?? 0) - before, 1, 'one refresh for all of them');
    const values = new Set(
      responses.map((res) => res.headers.getSetCookie().find((line) => line.startsWith('tollgate_session='))),
    );
    assert.equal(values.size, 1, 'all got the same renewed session');
    // The renewed session works and is itself renewed with the rotated refresh token.
    const next = new CookieJar();
    next.store(responses[0] as Response);
    const again = await next.fetch(`${origin}/again`);
    assert.equal(again.status, 200);
    assert.equal((provider.grants.refresh_token ?? 0) - before, 2);
  });

  it('a refresh the provider cannot answer keeps a session whose tokens are still valid', async () => {
    provider.account = { sub: 'erin', email: 'erin@example.com', groups: [] };
    const jar = new CookieJar();
    assert.equal((await jar.navigate(`${origin}/start`)).last.status, 200);
    provider.down = true;
    try {
      const res = await jar.fetch(`${origin}/during-outage`, { headers: { accept: 'application/json' } });
      assert.equal(res.status, 200);
      assert.equal(
        ((await res.json()) as { headers: Record<string, string> }).headers['x-tollgate-subject'],
        'erin',
      );
      assert.ok(
        tollgate.logs().some((line) => line.event === 'oidc_refresh_failed' && line.reason === 'unreachable'),
      );
    } finally {
      provider.down = false;
    }
  });

  it('email and groups only in userinfo: read from it at login, kept across refreshes', async () => {
    strict.account = { sub: 'gail', email: 'gail@example.com', groups: ['ops'] };
    const jar = new CookieJar();
    const { last, hops } = await jar.navigate(`${origin}/strict/page`);
    assert.equal(last.status, 200, JSON.stringify(hops));
    const echo = (await last.json()) as { headers: Record<string, string> };
    assert.equal(echo.headers['x-tollgate-email'], 'gail@example.com');
    assert.equal(echo.headers['x-tollgate-groups'], 'ops');
    const refreshes = strict.grants.refresh_token ?? 0;
    const again = await jar.fetch(`${origin}/strict/again`, { headers: { accept: 'application/json' } });
    assert.equal(again.status, 200, 'still allowed: the groups survive the refresh');
    assert.ok((strict.grants.refresh_token ?? 0) > refreshes);
    assert.equal(
      ((await again.json()) as { headers: Record<string, string> }).headers['x-tollgate-groups'],
      'ops',
    );
  });

  it('a provider failing at the token request: the callback answers 503, and the login works once it is back', async () => {
    provider.account = { sub: 'hank', email: 'hank@example.com', groups: [] };
    const jar = new CookieJar();
    const { stoppedAt } = await jar.navigate(`${origin}/after-outage`, (url) =>
      url.includes('/.tollgate/oidc/callback'),
    );
    assert.ok(stoppedAt);
    provider.down = true;
    try {
      const failed = await jar.fetch(stoppedAt);
      assert.equal(failed.status, 503);
      assert.equal(((await failed.json()) as { error: string }).error, 'auth_unavailable');
    } finally {
      provider.down = false;
    }
    // The code was never used: the same callback now completes the login.
    const done = await jar.fetch(stoppedAt);
    assert.equal(done.status, 303);
    assert.equal(done.headers.get('location'), '/after-outage');
  });

  it('a reload naming an unknown provider is refused at its line; the routes in force keep serving', async () => {
    const before = reloadCount(await tollgate.metrics(), 'upstreams.yaml', 'failure');
    await tollgate.writeUpstreams({
      upstreams: {
        '127.0.0.1': {
          paths: { '/': { servers: ['127.0.0.1:9'], authorization: { type: 'oidc', provider: 'nobody' } } },
        },
      },
    });
    await waitFor(
      async () =>
        reloadCount(await tollgate.metrics(), 'upstreams.yaml', 'failure') >
        (Number.isNaN(before) ? 0 : before),
      20_000,
    );
    assert.ok(
      tollgate
        .logs()
        .some((line) =>
          /upstreams\.yaml:\d+:\d+: .*unknown OpenID provider 'nobody'/.test(JSON.stringify(line)),
        ),
      'the refusal names the line',
    );
    assert.equal((await request(`${origin}/open`)).status, 200);
    assert.equal((await request(`${origin}/app`, { headers: { accept: 'application/json' } })).status, 401);
  });
});
