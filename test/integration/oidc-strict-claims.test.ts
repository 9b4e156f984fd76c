import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import type { StatusModel } from '../../src/observe/status.ts';
import { CookieJar } from '../helpers/cookie-jar.ts';
import { startTestProvider, type TestAccount, type TestProvider } from '../helpers/oidc-provider.ts';
import { testScope } from '../helpers/scope.ts';
import { freePort, request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Echo } from '../helpers/upstream.ts';

/**
 * Identity claims are read strictly (docs/authentication.md#who-may-pass): `email_verified` only as
 * `true` / `"true"`, `require_verified_email` for a missing one, `allow.claims` on top-level strings
 * and string lists only, and a Bearer ID token only with `typ` absent or `JWT` and, with several
 * audiences, `azp` = client_id. Through the built process with oidc-provider on loopback.
 */
describe('OpenID identity claims are read strictly (oidc-provider on loopback)', () => {
  const scope = testScope();
  let provider: TestProvider;
  let tollgate: Tollgate;
  let origin: string;

  before(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    provider = scope.keep(await startTestProvider({ redirectUris: [`${origin}/.tollgate/oidc/callback`] }));
    const upstream = await scope.upstream({ name: 'app' });
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-oidc-strict-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    await writeFile(join(dir, 'client-secret'), `${provider.clientSecret}\n`);
    await writeFile(join(dir, 'session-secrets'), 'a-session-secret-of-at-least-thirty-two-bytes\n');
    const settings = {
      issuer: provider.issuer,
      client_id: provider.clientId,
      client_secret_file: join(dir, 'client-secret'),
    };
    const servers = [upstream.address];
    const corp = { type: 'oidc', provider: 'corp' };
    const strict = { type: 'oidc', provider: 'strict' };
    const domain = { email_domains: ['example.com'] };
    tollgate = await scope.tollgate({
      main: {
        proxy_address_http: `127.0.0.1:${port}`,
        oidc_providers: {
          corp: settings,
          strict: { ...settings, require_verified_email: true },
          // Nothing listens there: its routes answer 503, and /status must say so.
          gone: { ...settings, issuer: 'http://127.0.0.1:1' },
        },
        session_secret_file: join(dir, 'session-secrets'),
      },
      upstreams: {
        upstreams: {
          '127.0.0.1': {
            paths: {
              '/': { servers, authorization: corp },
              '/mail': { servers, authorization: { ...corp, allow: domain } },
              '/strict': { servers, authorization: strict },
              '/strict-mail': { servers, authorization: { ...strict, allow: domain } },
              '/team': { servers, authorization: { ...corp, allow: { claims: { team: ['blue'] } } } },
              '/gone': { servers, authorization: { type: 'oidc', provider: 'gone' } },
            },
          },
        },
      },
    });
  });

  const login = async (account: TestAccount, start: string) => {
    provider.account = account;
    const jar = new CookieJar();
    const { last, hops } = await jar.navigate(`${origin}${start}`);
    assert.ok(
      hops.some((hop) => hop.url.startsWith(`${origin}/.tollgate/oidc/callback`) && hop.status === 303),
      JSON.stringify(hops),
    );
    return last;
  };
  const bearer = (path: string, token: string) =>
    request(`${origin}${path}`, {
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    });

  it('email_verified "false" (a string) is no email: no X-Tollgate-Email, email rules refuse', async () => {
    const account = { sub: 'mallory', email: 'mallory@example.com', emailVerified: 'false', groups: [] };
    const page = await login(account, '/x');
    assert.equal(page.status, 200);
    const echo = (await page.json()) as Echo;
    assert.equal(echo.headers['x-tollgate-subject'], 'mallory');
    assert.equal(echo.headers['x-tollgate-email'], undefined);
    const refused = await login(account, '/mail/x');
    assert.equal(refused.status, 403);
    // The page names the person, without the unverified address.
    const html = await refused.text();
    assert.match(html, /signed in as <strong>mallory<\/strong>,/);
    assert.doesNotMatch(html, /mallory@example\.com/);
    // The string "true" is a verified address, as boolean true is.
    const trusted = await login({ ...account, sub: 'trent', emailVerified: 'true' }, '/mail/x');
    assert.equal(trusted.status, 200);
    assert.equal(((await trusted.json()) as Echo).headers['x-tollgate-email'], 'mallory@example.com');
    // The login's log line names who logged in.
    await waitFor(() =>
      tollgate.logs().some((line) => line.event === 'oidc_login' && line.subject === 'trent'),
    );
    const loginLine = tollgate
      .logs()
      .find((line) => line.event === 'oidc_login' && line.subject === 'mallory');
    assert.equal(loginLine?.provider, 'corp');
  });

  it('a missing email_verified counts as verified unless the provider sets require_verified_email', async () => {
    const account = { sub: 'victor', email: 'victor@example.com', emailVerified: null, groups: [] };
    const lax = await login(account, '/x');
    assert.equal(((await lax.json()) as Echo).headers['x-tollgate-email'], 'victor@example.com');
    const strictPage = await login(account, '/strict/x');
    assert.equal(strictPage.status, 200);
    const echo = (await strictPage.json()) as Echo;
    assert.equal(echo.headers['x-tollgate-subject'], 'victor');
    assert.equal(echo.headers['x-tollgate-email'], undefined);
    assert.equal((await login(account, '/strict-mail/x')).status, 403);
    assert.equal((await login({ ...account, emailVerified: true }, '/strict-mail/x')).status, 200);
  });

  it('Bearer tokens: email_verified read as strictly as in a session', async () => {
    const email = { sub: 'svc', email: 'svc@example.com' };
    assert.equal((await bearer('/mail', await provider.sign(email))).status, 200);
    for (const verified of ['false', 0, 1, 'yes', null]) {
      const res = await bearer('/mail', await provider.sign({ ...email, email_verified: verified }));
      assert.equal(res.status, 403, `email_verified ${JSON.stringify(verified)}`);
    }
    assert.equal((await bearer('/strict-mail', await provider.sign(email))).status, 403);
    const verified = await provider.sign({ ...email, email_verified: true });
    assert.equal((await bearer('/strict-mail', verified)).status, 200);
  });

  it('a Bearer ID token passes only with typ absent or JWT', async () => {
    const claims = { sub: 'svc' };
    assert.equal((await bearer('/api', await provider.sign(claims))).status, 200);
    assert.equal((await bearer('/api', await provider.sign(claims, { typ: 'JWT' }))).status, 200);
    for (const typ of ['at+jwt', 'logout+jwt', 'application/at+jwt', 'secevent+jwt', 'JWS']) {
      const res = await bearer('/api', await provider.sign(claims, { typ }));
      assert.equal(res.status, 401, `typ ${typ}: ${res.body}`);
      assert.equal(JSON.parse(res.body).error, 'token_invalid');
    }
  });

  it('several audiences pass only when azp is the client_id', async () => {
    const client = provider.clientId;
    const pass = async (claims: Record<string, unknown>) =>
      (await bearer('/api', await provider.sign({ sub: 'svc', ...claims }))).status;
    assert.equal(await pass({ aud: [client, 'other'], azp: client }), 200);
    assert.equal(await pass({ aud: [client, 'other'], azp: 'other' }), 401);
    assert.equal(await pass({ aud: [client, 'other'] }), 401);
    assert.equal(await pass({ aud: client, azp: 'other' }), 401);
    assert.equal(await pass({ aud: [client] }), 200);
  });

  it('allow.claims matches a top-level string or a list of strings, nothing nested', async () => {
    const pass = async (team: unknown) =>
      (await bearer('/team', await provider.sign({ sub: 'svc', team }))).status;
    assert.equal(await pass('blue'), 200);
    assert.equal(await pass(['red', 'blue']), 200);
    assert.equal(await pass([['blue']]), 403);
    assert.equal(await pass(['red', ['blue']]), 403);
    assert.equal(await pass({ name: 'blue' }), 403);
    assert.equal(await pass([{ name: 'blue' }]), 403);
    assert.equal(await pass('red'), 403);
  });

  it('a route whose provider cannot be reached answers 503 and /status shows it down, with the reason', async () => {
    const res = await request(`${origin}/gone/x`, { headers: { accept: 'application/json' } });
    assert.equal(res.status, 503);
    assert.equal(JSON.parse(res.body).error, 'auth_unavailable');
    let model: StatusModel | null = null;
    await waitFor(async () => {
      model = JSON.parse((await request(`${tollgate.adminUrl}/status.json`)).body) as StatusModel;
      return model.providers.some((provider) => provider.name === 'gone' && provider.state === 'down');
    });
    const status = model as unknown as StatusModel;
    assert.deepEqual(
      status.providers.map(({ name, state }) => [name, state]),
      [
        ['corp', 'ok'],
        ['gone', 'down'],
        ['strict', 'ok'],
      ],
    );
    assert.match(String(status.providers.find((p) => p.name === 'gone')?.problem), /cannot be reached/);
    const route = (id: string) => status.routes.find((candidate) => candidate.id === id);
    assert.equal(route('127.0.0.1/gone')?.state, 'down');
    assert.match(
      String(route('127.0.0.1/gone')?.problems),
      /OpenID provider gone unavailable: cannot be reached/,
    );
    assert.equal(route('127.0.0.1/')?.state, 'ok');
    assert.ok(status.totals.routes_down >= 1);
    const page = (await request(`${tollgate.adminUrl}/status`)).body;
    assert.match(page, /<h2>Login providers<\/h2>/);
    assert.match(page, /<td>gone<\/td><td class="down">down: its routes answer 503<\/td>/);
  });
});
