import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import * as client from 'openid-client';
import { createSealer } from '../../src/auth/session-cookie.ts';
import { CookieJar } from '../helpers/cookie-jar.ts';
import { connectHttp2, h2Request } from '../helpers/h2-client.ts';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.ts';
import { testScope } from '../helpers/scope.ts';
import { counterValue } from '../helpers/token-api.ts';
import { freePort, request, type Tollgate } from '../helpers/tollgate.ts';
import type { Echo, Upstream } from '../helpers/upstream.ts';

const SECRET_A = 'first-session-secret-0123456789-abcdefghij';
const SECRET_B = 'second-session-secret-0123456789-abcdefghij';
/** Never listened on: the test's own client stops at this redirect to read the code. */
const TEST_CLIENT_CALLBACK = 'http://127.0.0.1:9/test-callback';

const ALICE = { sub: 'alice', email: 'alice@example.com', groups: ['staff', 'admins'] };
const BOB = { sub: 'bob', email: 'bob@example.com', groups: ['staff'] };

describe('OpenID Connect login through the proxy process (oidc-provider on loopback)', () => {
  const scope = testScope();
  let provider: TestProvider;
  let upstream: Upstream;
  let tollgate: Tollgate;
  let twin: Tollgate;
  let origin: string;
  let twinOrigin: string;
  let dir: string;

  before(async () => {
    const [port, twinPort] = [await freePort(), await freePort()];
    origin = `http://127.0.0.1:${port}`;
    twinOrigin = `http://127.0.0.1:${twinPort}`;
    provider = scope.keep(
      await startTestProvider({
        redirectUris: [
          `${origin}/.tollgate/oidc/callback`,
          `${twinOrigin}/.tollgate/oidc/callback`,
          `http://sub.test:${port}/.tollgate/oidc/callback`,
          TEST_CLIENT_CALLBACK,
        ],
        postLogoutRedirectUris: [`${origin}/`],
      }),
    );
    upstream = await scope.upstream({ name: 'app' });
    dir = await mkdtemp(join(tmpdir(), 'tollgate-oidc-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    await writeFile(join(dir, 'client-secret'), `${provider.clientSecret}\n`);
    // The first line seals, every line opens: the twin has the secrets the other way round, as two
    // replicas in the middle of a rotation, and each opens what the other sealed.
    await writeFile(join(dir, 'session-secrets'), `${SECRET_A}\n${SECRET_B}\n`);
    await writeFile(join(dir, 'session-secrets-rotated'), `${SECRET_B}\n${SECRET_A}\n`);
    const servers = [upstream.address];
    const oidc = { type: 'oidc', provider: 'corp' };
    const config = (proxyPort: number, workers: number, secrets: string) => ({
      main: {
        proxy_address_http: `127.0.0.1:${proxyPort}`,
        workers,
        http2_cleartext: true,
        oidc_providers: {
          corp: {
            issuer: provider.issuer,
            client_id: provider.clientId,
            client_secret_file: join(dir, 'client-secret'),
            scopes: ['openid', 'email', 'profile', 'offline_access'],
          },
          // The same client again, passing the access token upstream, on its own route.
          'corp-token': {
            issuer: provider.issuer,
            client_id: provider.clientId,
            client_secret_file: join(dir, 'client-secret'),
            pass_access_token: true,
          },
        },
        session_secret_file: join(dir, secrets),
      },
      upstreams: {
        upstreams: {
          '127.0.0.1': {
            paths: {
              '/': { servers, authorization: oidc },
              '/admin': { servers, authorization: { ...oidc, allow: { groups: ['admins'] } } },
              '/mail': {
                servers,
                authorization: {
                  ...oidc,
                  allow: { email_domains: ['example.com'], subjects: ['alice', 'bob'] },
                },
              },
              '/open': { servers },
              '/token': { servers, authorization: { type: 'oidc', provider: 'corp-token' } },
            },
          },
          // A host whose only oidc route is a sub-path: the callback is still answered there.
          'sub.test': { paths: { '/': { servers }, '/app': { servers, authorization: oidc } } },
        },
      },
    });
    [tollgate, twin] = await Promise.all([
      scope.tollgate(config(port, 2, 'session-secrets')),
      scope.tollgate(config(twinPort, 1, 'session-secrets-rotated')),
    ]);
  });

  /** Logs `account` in from a fresh browser; returns the jar holding the session. */
  const login = async (account: typeof ALICE | null, start = '/app/page?x=1', at = origin) => {
    provider.account = account;
    const jar = new CookieJar();
    const result = await jar.navigate(`${at}${start}`);
    return { jar, ...result };
  };
  const failures = async (reason: string, route = '127.0.0.1/') =>
    counterValue(
      await tollgate.metrics(),
      'tollgate_auth_failures_total',
      `route="${route}",method="oidc",reason="${reason}"`,
    );

  it('sends a browser navigation without a session to the provider: PKCE S256, state, nonce, no-store', async () => {
    const jar = new CookieJar();
    const res = await jar.fetch(`${origin}/app?q=2`);
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const location = new URL(res.headers.get('location') as string);
    assert.equal(location.origin, provider.issuer);
    assert.equal(location.searchParams.get('response_type'), 'code');
    assert.equal(location.searchParams.get('code_challenge_method'), 'S256');
    assert.match(location.searchParams.get('code_challenge') ?? '', /^[\w-]{43}$/);
    assert.ok((location.searchParams.get('state') ?? '').length >= 32);
    assert.ok((location.searchParams.get('nonce') ?? '').length >= 32);
    assert.equal(location.searchParams.get('redirect_uri'), `${origin}/.tollgate/oidc/callback`);
    const stateCookie = res.headers.getSetCookie().find((line) => line.startsWith('tollgate_oidc_'));
    assert.ok(stateCookie, 'a state cookie is set');
    assert.match(stateCookie, /HttpOnly/);
    assert.match(stateCookie, /SameSite=Lax/);
    assert.match(stateCookie, /Max-Age=600/);
    // Sealed: neither the state nor the URL to return to can be read from it.
    assert.ok(!stateCookie.includes(location.searchParams.get('state') as string));
    assert.ok(!decodeURIComponent(stateCookie).includes('/app'));
  });

  it('answers other requests 401 login_required with a Bearer challenge (XHR, fetch, JSON, POST)', async () => {
    const cases: Array<{ method?: string; headers: Record<string, string> }> = [
      { headers: { accept: 'application/json' } },
      { headers: { accept: 'text/html', 'x-requested-with': 'XMLHttpRequest' } },
      { headers: { accept: 'text/html', 'sec-fetch-mode': 'cors' } },
      { method: 'POST', headers: { accept: 'application/json' } },
    ];
    const before = await failures('login_required');
    for (const { method, headers } of cases) {
      const res = await request(`${origin}/api`, { method, headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.equal(JSON.parse(res.body).error, 'login_required');
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="tollgate"');
    }
    // A browser's form post cannot be sent to the login: a 401 page with a sign-in link instead.
    const form = await request(`${origin}/api`, { method: 'POST', headers: { accept: 'text/html' } });
    assert.equal(form.status, 401);
    assert.match(String(form.headers['content-type']), /^text\/html/);
    assert.match(form.body, /href="\/\.tollgate\/oidc\/switch\?rd=%2Fapi"/);
    assert.equal(form.headers['www-authenticate'], 'Bearer realm="tollgate"');
    assert.equal(await failures('login_required'), before + cases.length + 1);
  });

  it('gRPC without a session: status 16 UNAUTHENTICATED, never a redirect', async () => {
    const session = await connectHttp2(origin);
    try {
      const res = await h2Request(session, {
        ':method': 'POST',
        ':path': '/echo.Echo/Say',
        ':authority': '127.0.0.1',
        'content-type': 'application/grpc',
        accept: 'text/html',
        te: 'trailers',
      });
      assert.equal(res.status, 200);
      const grpcStatus = res.headers['grpc-status'] ?? res.trailers?.['grpc-status'];
      assert.equal(grpcStatus, '16');
    } finally {
      session.close();
    }
  });

  it('logs in, 303s back to the original URL, and the upstream learns who it is (and nothing more)', async () => {
    const { jar, hops, last } = await login(ALICE);
    const callback = hops.find((hop) => hop.url.startsWith(`${origin}/.tollgate/oidc/callback`));
    assert.ok(callback, JSON.stringify(hops));
    assert.equal(callback.status, 303);
    assert.equal(callback.location, '/app/page?x=1');
    assert.equal(last.status, 200);
    assert.ok(jar.cookies.has('tollgate_session'));
    assert.ok(
      ![...jar.cookies.keys()].some((name) => name.startsWith('tollgate_oidc_')),
      'state cookie cleared',
    );
    const echo = (await last.json()) as Echo;
    assert.equal(echo.url, '/app/page?x=1');
    assert.equal(echo.headers['x-tollgate-subject'], 'alice');
    assert.equal(echo.headers['x-tollgate-email'], 'alice@example.com');
    assert.equal(echo.headers['x-tollgate-groups'], 'staff,admins');
    assert.equal(echo.headers.authorization, undefined, 'no access token without pass_access_token');
    assert.ok(!(echo.headers.cookie ?? '').includes('tollgate_'), 'our cookies never reach the upstream');

    // Client-sent copies of the identity headers are dropped, in every spelling.
    const spoofed = await jar.fetch(`${origin}/x`, {
      headers: {
        'x-tollgate-email': 'root@example.com',
        x_tollgate_groups: 'admins',
        'X-Tollgate-Subject': 'root',
      },
    });
    const spoofEcho = (await spoofed.json()) as Echo;
    assert.equal(spoofEcho.headers['x-tollgate-email'], 'alice@example.com');
    assert.equal(spoofEcho.headers['x-tollgate-subject'], 'alice');
    assert.equal(spoofEcho.headers.x_tollgate_groups, undefined);
  });

  it('answers the callback on a host whose oidc route covers only a sub-path', async () => {
    provider.account = ALICE;
    const jar = new CookieJar(['sub.test']);
    const subOrigin = origin.replace('127.0.0.1', 'sub.test');
    const { hops, last } = await jar.navigate(`${subOrigin}/app/x`);
    const login = hops[0];
    assert.equal(login?.status, 302);
    assert.equal(
      new URL(login?.location as string).searchParams.get('redirect_uri'),
      `${subOrigin}/.tollgate/oidc/callback`,
    );
    assert.equal(last.status, 200, JSON.stringify(hops));
    assert.equal(((await last.json()) as Echo).headers['x-tollgate-subject'], 'alice');
  });

  it('pass_access_token: the access token goes upstream as Bearer, replacing the client one; two providers on one host', async () => {
    const { jar } = await login(ALICE);
    // corp's session is not corp-token's: a login with corp-token, whose callback the host's first
    // oidc route (corp's) answers for corp-token.
    const { last, hops } = await jar.navigate(`${origin}/token/page`);
    assert.equal(last.status, 200, JSON.stringify(hops));
    const res = await jar.fetch(`${origin}/token/again`, {
      headers: { authorization: 'Bearer client-made-up' },
    });
    const echo = (await res.json()) as Echo;
    assert.match(echo.headers.authorization ?? '', /^Bearer [\w-]{20,}/);
    assert.notEqual(echo.headers.authorization, 'Bearer client-made-up');
    assert.equal(echo.headers['x-tollgate-subject'], 'alice');
  });

  it('a session sealed by one process opens in another, each holding the secrets in another order', async () => {
    for (const [sealedAt, openedAt] of [
      [origin, twinOrigin],
      [twinOrigin, origin],
    ] as const) {
      const { jar, last } = await login(ALICE, '/start', sealedAt);
      assert.equal(last.status, 200);
      const res = await fetch(`${openedAt}/elsewhere`, {
        headers: { cookie: jar.header(), accept: 'application/json' },
      });
      assert.equal(res.status, 200, `sealed at ${sealedAt}, opened at ${openedAt}`);
      assert.equal(((await res.json()) as Echo).headers['x-tollgate-subject'], 'alice');
    }
  });

  it('callback: a state cookie that is expired, or holds another state, is refused with its reason', async () => {
    const sealer = createSealer([Buffer.from(SECRET_A)]);
    const now = Math.floor(Date.now() / 1000);
    const state = 'crafted-state-0123456789-abcdefghijklmnop';
    const stateCookie = (payload: Record<string, unknown>) =>
      sealer.seal({
        k: 'state',
        s: state,
        n: 'nonce',
        v: 'verifier',
        u: '/x',
        r: `${origin}/.tollgate/oidc/callback`,
        p: 'corp',
        exp: now + 600,
        ...payload,
      });
    for (const [payload, reason] of [
      [{ exp: now - 1 }, 'state_expired'],
      [{ s: 'another-state' }, 'state_mismatch'],
      [{ p: 'nobody' }, 'state_mismatch'],
    ] as const) {
      const jar = new CookieJar();
      jar.cookies.set(`tollgate_oidc_${state.slice(0, 16)}`, await stateCookie(payload));
      const res = await jar.fetch(`${origin}/.tollgate/oidc/callback?code=whatever&state=${state}`);
      assert.equal(res.status, 401, reason);
      assert.match(await res.text(), new RegExp(`reason: ${reason}`));
      assert.ok(!jar.cookies.has(`tollgate_oidc_${state.slice(0, 16)}`), 'the state cookie is cleared');
    }
  });

  it('state cookies do not pile up: beyond three pending logins they are cleared', async () => {
    const jar = new CookieJar();
    for (let i = 0; i < 3; i++) assert.equal((await jar.fetch(`${origin}/pending-${i}`)).status, 302);
    assert.equal([...jar.cookies.keys()].filter((name) => name.startsWith('tollgate_oidc_')).length, 3);
    await jar.fetch(`${origin}/pending-3`);
    assert.equal([...jar.cookies.keys()].filter((name) => name.startsWith('tollgate_oidc_')).length, 1);
  });

  it('allow rules: 403 forbidden (never a login loop) for someone the rules do not name, counted', async () => {
    const alice = await login(ALICE);
    const bob = await login(BOB);
    const allowed = await alice.jar.fetch(`${origin}/admin/panel`);
    assert.equal(allowed.status, 200);
    const before = await failures('forbidden', '127.0.0.1/admin');
    // A browser gets a page (who you are, sign out, another account), a script JSON: both 403.
    const refused = await bob.jar.fetch(`${origin}/admin/panel`);
    assert.equal(refused.status, 403);
    assert.match(await refused.text(), /signed in as <strong>bob<\/strong>/);
    assert.equal(refused.headers.get('www-authenticate'), null);
    const scripted = await bob.jar.fetch(`${origin}/admin/panel`, {
      headers: { accept: 'application/json', 'sec-fetch-mode': 'cors' },
    });
    assert.equal(scripted.status, 403);
    assert.equal(((await scripted.json()) as { error: string }).error, 'forbidden');
    assert.equal(await failures('forbidden', '127.0.0.1/admin'), before + 2);
    // Keys AND, values OR: both pass subjects and the domain.
    assert.equal((await bob.jar.fetch(`${origin}/mail`)).status, 200);
  });

  it('refuses a multi-@ email for an email_domains rule', async () => {
    const { jar } = await login({ sub: 'bob', email: 'mallory@evil.test@example.com', groups: [] });
    const res = await jar.fetch(`${origin}/mail`);
    assert.equal(res.status, 403);
    // No groups from the provider: no X-Tollgate-Groups, even when the client sends one.
    const plain = await jar.fetch(`${origin}/plain`, { headers: { 'x-tollgate-groups': 'admins' } });
    assert.equal(((await plain.json()) as Echo).headers['x-tollgate-groups'], undefined);
  });

  it('callback: no state, unknown state, a replayed code and access_denied are refused with a page and a reason', async () => {
    const jar = new CookieJar();
    const noState = await jar.fetch(`${origin}/.tollgate/oidc/callback?code=abc`);
    assert.equal(noState.status, 401);
    assert.match(noState.headers.get('content-type') ?? '', /text\/html/);
    assert.match(await noState.text(), /reason: state_missing/);

    const before = await failures('code_rejected');
    // Stop at the callback to use the code twice.
    provider.account = ALICE;
    const replayJar = new CookieJar();
    const { stoppedAt } = await replayJar.navigate(`${origin}/p`, (url) =>
      url.includes('/.tollgate/oidc/callback'),
    );
    assert.ok(stoppedAt);
    const savedCookies = new Map(replayJar.cookies);
    const first = await replayJar.fetch(stoppedAt);
    assert.equal(first.status, 303);
    const sessionCookie = first.headers.getSetCookie().find((line) => line.startsWith('tollgate_session='));
    assert.ok(sessionCookie);
    // Host-only (no Domain), HttpOnly, Lax, whole site; no Secure over plain HTTP.
    assert.match(sessionCookie, /; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    assert.doesNotMatch(sessionCookie, /Domain=/i);
    // The attacker (or a double click) replays the same callback with the same state cookie.
    const replay = new CookieJar();
    for (const [name, value] of savedCookies) replay.cookies.set(name, value);
    const replayed = await replay.fetch(stoppedAt);
    assert.equal(replayed.status, 401);
    assert.match(await replayed.text(), /reason: code_rejected/);
    assert.equal(await failures('code_rejected'), before + 1);

    // A state cookie from another login does not match this state.
    const other = new CookieJar();
    for (const [name, value] of savedCookies) other.cookies.set(name, value);
    const wrongState = await other.fetch(
      stoppedAt.replace(/state=[^&]+/, 'state=somebody-elses-state-value-0000'),
    );
    assert.equal(wrongState.status, 401);
    assert.match(await wrongState.text(), /reason: state_missing/);

    const deniedBefore = await failures('access_denied');
    const denied = await login(null);
    assert.equal(denied.last.status, 403);
    assert.match(await denied.last.text(), /reason: access_denied/);
    assert.equal(await failures('access_denied'), deniedBefore + 1);
    assert.ok(
      tollgate
        .logs()
        .some((line) => line.event === 'oidc_callback_refused' && line.reason === 'access_denied'),
    );
  });

  it('never redirects off the host after login, whatever the URL asked for', async () => {
    for (const start of ['//evil.example/x', '/\\evil.example']) {
      provider.account = ALICE;
      const jar = new CookieJar();
      const { hops } = await jar.navigate(
        `${origin}${start}`,
        (url) => !url.startsWith(origin) && !url.startsWith(provider.issuer),
      );
      const callback = hops.find((hop) => hop.url.includes('/.tollgate/oidc/callback'));
      assert.ok(callback, `${start}: ${JSON.stringify(hops)}`);
      const target = new URL(callback.location as string, origin);
      assert.equal(target.origin, origin, `${start} → ${callback.location}`);
    }
  });

  it('a tampered, foreign or garbage session cookie is no session', async () => {
    const { jar } = await login(ALICE);
    const sealed = jar.cookies.get('tollgate_session') as string;
    const parts = sealed.split('.');
    const flipped = parts[3]?.startsWith('A') ? `B${parts[3].slice(1)}` : `A${parts[3]?.slice(1)}`;
    const tampered = [parts[0], parts[1], parts[2], flipped, parts[4]].join('.');
    for (const value of [tampered, 'garbage', `${sealed}x`]) {
      const res = await request(`${origin}/x`, {
        headers: { cookie: `tollgate_session=${value}`, accept: 'application/json' },
      });
      assert.equal(res.status, 401, value.slice(0, 20));
    }
  });

  it('accepts a Bearer JWT of the same issuer with aud = client_id, without a session', async () => {
    // The test is its own client of the provider: it logs in and keeps the ID token (aud = client_id).
    const configuration = await client.discovery(
      new URL(provider.issuer),
      provider.clientId,
      undefined,
      client.ClientSecretBasic(provider.clientSecret),
      { execute: [client.allowInsecureRequests] },
    );
    const verifier = client.randomPKCECodeVerifier();
    const url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: TEST_CLIENT_CALLBACK,
      scope: 'openid email',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: 'machine-state',
    });
    provider.account = BOB;
    const jar = new CookieJar();
    const { stoppedAt } = await jar.navigate(url.href, (next) => next.startsWith(TEST_CLIENT_CALLBACK));
    assert.ok(stoppedAt);
    const tokens = await client.authorizationCodeGrant(configuration, new URL(stoppedAt), {
      pkceCodeVerifier: verifier,
      expectedState: 'machine-state',
    });
    const idToken = tokens.id_token as string;
    const res = await request(`${origin}/api`, {
      headers: { authorization: `Bearer ${idToken}`, accept: 'application/json' },
    });
    assert.equal(res.status, 200, res.body);
    const echo = JSON.parse(res.body) as Echo;
    assert.equal(echo.headers['x-tollgate-subject'], 'bob');
    assert.equal(echo.headers.authorization, undefined, 'the verified token is not forwarded');
    const forged = `${idToken.slice(0, -4)}AAAA`;
    const refused = await request(`${origin}/api`, { headers: { authorization: `Bearer ${forged}` } });
    assert.equal(refused.status, 401);
    assert.match(refused.headers['www-authenticate'] as string, /invalid_token/);
  });

  it('logout clears the session and goes to the provider end_session_endpoint with id_token_hint', async () => {
    const { jar } = await login(ALICE);
    const res = await jar.fetch(`${origin}/.tollgate/oidc/logout`);
    assert.equal(res.status, 303);
    const location = new URL(res.headers.get('location') as string);
    assert.equal(location.origin, provider.issuer);
    assert.ok(location.searchParams.get('id_token_hint'));
    assert.equal(location.searchParams.get('post_logout_redirect_uri'), `${origin}/`);
    assert.ok(!jar.cookies.has('tollgate_session'));
    const after = await jar.fetch(`${origin}/app`);
    assert.equal(after.status, 302, 'logged out: back to the login');
  });

  it('splits a session over 4 KB into tollgate_session_1… and opens it again', async () => {
    const groups = Array.from({ length: 200 }, (_, i) => `group-with-a-long-name-${i}`);
    const { jar, last } = await login({ sub: 'carol', email: 'carol@example.com', groups });
    assert.equal(last.status, 200);
    assert.ok(!jar.cookies.has('tollgate_session'));
    assert.ok(jar.cookies.has('tollgate_session_1') && jar.cookies.has('tollgate_session_2'));
    for (const value of jar.cookies.values()) assert.ok(value.length <= 3800);
    const echo = (await (await jar.fetch(`${origin}/again`)).json()) as Echo;
    assert.equal(echo.headers['x-tollgate-subject'], 'carol');
    // Only the open route is reached without logging in at all, and the session never reaches it.
    const sessionCookies = [...jar.cookies].filter(([name]) => name.startsWith('tollgate_session'));
    const cookie = [
      ...sessionCookies.map(([name, value]) => `${name}=${value}`),
      'theirs=1',
      'tollgate_sticky=s1',
    ].join('; ');
    const open = await request(`${origin}/open`, { headers: { cookie } });
    assert.equal(open.status, 200);
    const openEcho = JSON.parse(open.body) as Echo;
    assert.equal(openEcho.headers.cookie, 'theirs=1; tollgate_sticky=s1');
  });
});
