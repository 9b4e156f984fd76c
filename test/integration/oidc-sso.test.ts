/**
 * What SSO users of oauth2-proxy and Pomerium expect (docs/authentication.md#openid-connect), through
 * the built process against oidc-provider served over HTTPS by a private CA made here with openssl:
 * the provider's `ca_file`, `cookie_domain` (one login across subdomains, in Chromium),
 * `post_logout_redirect_url`, the HTML refusal pages, and `/.tollgate/oidc/userinfo`.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import type { StatusModel } from '../../src/observe/status.ts';
import { CookieJar } from '../helpers/cookie-jar.ts';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.ts';
import { testScope } from '../helpers/scope.ts';
import { freePort, request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Echo } from '../helpers/upstream.ts';

const ALICE = { sub: 'alice', email: 'alice@corp.test', groups: ['admins'] };
const BOB = { sub: 'bob', email: 'bob@corp.test', groups: ['staff'] };
const HOSTS = ['app.corp.test', 'wiki.corp.test', 'other.test'];

/** A CA and a certificate it signed for 127.0.0.1 (the provider's), made with the openssl CLI. */
async function privateCa(dir: string): Promise<{ caFile: string; cert: Buffer; key: Buffer }> {
  const at = (name: string) => join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const run = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  run([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=Corp IdP test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  run(['req', ...ec, '-keyout', at('idp.key'), '-out', at('idp.csr'), '-subj', '/CN=127.0.0.1']);
  await writeFile(
    at('idp.ext'),
    'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
  run([
    'x509',
    '-req',
    '-in',
    at('idp.csr'),
    '-CA',
    at('ca.pem'),
    '-CAkey',
    at('ca.key'),
    '-CAcreateserial',
    '-out',
    at('idp.pem'),
    '-days',
    '2',
    '-extfile',
    at('idp.ext'),
  ]);
  return { caFile: at('ca.pem'), cert: await readFile(at('idp.pem')), key: await readFile(at('idp.key')) };
}

describe('SSO: private CA, shared sessions, logout landing, refusal pages, userinfo', () => {
  const scope = testScope();
  let provider: TestProvider;
  let tollgate: Tollgate;
  let port: number;
  const origin = (host: string) => `http://${host}:${port}`;
  const goodbye = () => `${origin('app.corp.test')}/goodbye`;

  before(async () => {
    port = await freePort();
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-oidc-sso-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    const ca = await privateCa(dir);
    provider = scope.keep(
      await startTestProvider({
        tls: { cert: ca.cert, key: ca.key },
        redirectUris: HOSTS.map((host) => `${origin(host)}/.tollgate/oidc/callback`),
        postLogoutRedirectUris: [goodbye()],
      }),
    );
    const upstream = await scope.upstream({ name: 'app' });
    await writeFile(join(dir, 'client-secret'), `${provider.clientSecret}\n`);
    await writeFile(join(dir, 'session-secrets'), 'a-session-secret-of-at-least-thirty-two-bytes\n');
    const settings = {
      issuer: provider.issuer,
      client_id: provider.clientId,
      client_secret_file: join(dir, 'client-secret'),
    };
    const servers = [upstream.address];
    const corp = { type: 'oidc', provider: 'corp' };
    tollgate = await scope.tollgate({
      main: {
        proxy_address_http: `127.0.0.1:${port}`,
        oidc_providers: {
          corp: {
            ...settings,
            ca_file: ca.caFile,
            cookie_domain: '.corp.test',
            post_logout_redirect_url: goodbye(),
          },
          // The same provider without its CA: its certificate is not trusted, its routes stay closed.
          untrusted: settings,
        },
        session_secret_file: join(dir, 'session-secrets'),
      },
      upstreams: {
        upstreams: {
          'app.corp.test': {
            paths: {
              '/': { servers, authorization: corp },
              '/admin': { servers, authorization: { ...corp, allow: { groups: ['admins'] } } },
              '/untrusted': { servers, authorization: { type: 'oidc', provider: 'untrusted' } },
            },
          },
          'wiki.corp.test': { paths: { '/': { servers, authorization: corp } } },
          'other.test': { paths: { '/': { servers, authorization: corp } } },
        },
      },
    });
  });

  const login = async (account: typeof ALICE, host = 'app.corp.test', start = '/page') => {
    provider.account = account;
    const jar = new CookieJar(HOSTS);
    const result = await jar.navigate(`${origin(host)}${start}`);
    const callback = result.hops.find((hop) => hop.url.startsWith(`${origin(host)}/.tollgate/oidc/callback`));
    assert.equal(callback?.status, 303, JSON.stringify(result.hops));
    return { jar, ...result };
  };
  /** The session's Set-Cookie line of a fresh login on `host`, read hop by hop. */
  const sessionLine = async (host: string) => {
    provider.account = ALICE;
    const jar = new CookieJar(HOSTS);
    let url: string | null = `${origin(host)}/x`;
    for (let hop = 0; url !== null && hop < 20; hop++) {
      const res: Response = await jar.fetch(url);
      const line = res.headers.getSetCookie().find((cookie) => cookie.startsWith('tollgate_session='));
      if (line !== undefined) return line;
      const location = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
      url = location === null ? null : new URL(location, url).href;
    }
    return '';
  };

  it('ca_file: discovery, token exchange and ID token keys over HTTPS with a private CA; without it, closed', async () => {
    const { last } = await login(ALICE);
    assert.equal(last.status, 200);
    assert.equal(((await last.json()) as Echo).headers['x-tollgate-subject'], 'alice');
    const closed = await request(`${tollgate.proxyUrl}/untrusted`, {
      headers: { host: 'app.corp.test', accept: 'application/json' },
    });
    assert.equal(closed.status, 503);
    let model: StatusModel | null = null;
    await waitFor(async () => {
      model = JSON.parse((await request(`${tollgate.adminUrl}/status.json`)).body) as StatusModel;
      return model.providers.some((entry) => entry.name === 'untrusted' && entry.state === 'down');
    });
    const status = model as unknown as StatusModel;
    assert.equal(status.providers.find((entry) => entry.name === 'corp')?.state, 'ok');
    assert.match(
      String(status.providers.find((entry) => entry.name === 'untrusted')?.problem),
      /not trusted/,
    );
  });

  it('cookie_domain: the session cookie is shared by hosts under it, host-only elsewhere', async () => {
    assert.match(await sessionLine('app.corp.test'), /; Domain=corp\.test;/);
    assert.match(await sessionLine('wiki.corp.test'), /; Domain=corp\.test;/);
    assert.doesNotMatch(await sessionLine('other.test'), /Domain=/i);
  });

  it('cookie_domain in Chromium: one login serves every host under the domain, not the others', async () => {
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        // The provider's certificate is for Tollgate to trust (ca_file), not for this browser.
        '--ignore-certificate-errors',
        `--host-resolver-rules=${HOSTS.map((host) => `MAP ${host} 127.0.0.1`).join(',')}`,
      ],
    });
    try {
      const page = await browser.newPage();
      const callbacks: string[] = [];
      page.on('request', (sent) => {
        if (sent.url().includes('/.tollgate/oidc/callback')) callbacks.push(new URL(sent.url()).hostname);
      });
      provider.account = BOB;
      const read = async (url: string) => {
        const response = await page.goto(url);
        return JSON.parse((await response?.text()) ?? '{}') as Echo;
      };
      assert.equal((await read(`${origin('app.corp.test')}/one`)).headers['x-tollgate-subject'], 'bob');
      assert.deepEqual(callbacks, ['app.corp.test']);
      assert.equal((await read(`${origin('wiki.corp.test')}/two`)).headers['x-tollgate-subject'], 'bob');
      assert.deepEqual(callbacks, ['app.corp.test'], 'wiki.corp.test needed no login of its own');
      assert.equal((await read(`${origin('other.test')}/three`)).headers['x-tollgate-subject'], 'bob');
      assert.deepEqual(callbacks, ['app.corp.test', 'other.test'], 'other.test logged in on its own');
    } finally {
      await browser.close();
    }
  });

  it('/.tollgate/oidc/userinfo: the session as JSON; 401 without one, never a login redirect', async () => {
    const { jar } = await login(BOB);
    const res = await jar.fetch(`${origin('app.corp.test')}/.tollgate/oidc/userinfo`, {
      headers: { accept: 'application/json', 'sec-fetch-mode': 'cors' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.deepEqual(await res.json(), {
      subject: 'bob',
      email: 'bob@corp.test',
      groups: ['staff'],
      provider: 'corp',
    });
    for (const accept of ['application/json', 'text/html']) {
      const anonymous = await request(`${tollgate.proxyUrl}/.tollgate/oidc/userinfo`, {
        headers: { host: 'app.corp.test', accept },
      });
      assert.equal(anonymous.status, 401, accept);
      assert.equal(JSON.parse(anonymous.body).error, 'login_required');
    }
  });

  it('post_logout_redirect_url: the logout ends there, and clears the shared cookie too', async () => {
    const { jar } = await login(ALICE);
    const res = await jar.fetch(`${origin('wiki.corp.test')}/.tollgate/oidc/logout`, { method: 'POST' });
    assert.equal(res.status, 303);
    const location = new URL(res.headers.get('location') as string);
    assert.equal(location.origin, provider.issuer);
    assert.equal(location.searchParams.get('post_logout_redirect_uri'), goodbye());
    const cleared = res.headers.getSetCookie().filter((line) => line.startsWith('tollgate_session=;'));
    assert.ok(cleared.some((line) => /Domain=corp\.test/.test(line)));
    assert.ok(cleared.some((line) => !/Domain=/.test(line)));
  });

  it('a refused browser gets a page: who you are, sign out, another account; no script, a CSP', async () => {
    const { jar } = await login(BOB);
    const refused = await jar.fetch(`${origin('app.corp.test')}/admin/panel?x=1`);
    assert.equal(refused.status, 403);
    assert.match(refused.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(refused.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    const html = await refused.text();
    assert.match(html, /signed in as <strong>bob<\/strong> \(bob@corp\.test\)/);
    assert.match(html, /<form method="post" action="\/\.tollgate\/oidc\/logout">/);
    assert.match(html, /href="\/\.tollgate\/oidc\/switch\?rd=%2Fadmin%2Fpanel%3Fx%3D1"/);
    assert.doesNotMatch(html, /<script/i);
    // A script with the same session still gets JSON.
    const json = await jar.fetch(`${origin('app.corp.test')}/admin/panel`, {
      headers: { accept: 'application/json', 'sec-fetch-mode': 'cors' },
    });
    assert.equal(json.status, 403);
    assert.equal(((await json.json()) as { error: string }).error, 'forbidden');
    // Another account: the session ends, the provider is asked to log in anew, and back to the page.
    provider.account = ALICE;
    // oidc-provider would first have the browser confirm the end of bob's session there (a form a
    // script submits, which this jar does not run): its own cookies go, Tollgate's stay.
    for (const name of [...jar.cookies.keys()]) if (!name.startsWith('tollgate_')) jar.cookies.delete(name);
    const switched = await jar.navigate(
      `${origin('app.corp.test')}/.tollgate/oidc/switch?rd=%2Fadmin%2Fpanel%3Fx%3D1`,
    );
    const authorize = new URL(switched.hops[0]?.location as string);
    assert.equal(authorize.searchParams.get('prompt'), 'login');
    assert.equal(switched.last.status, 200, JSON.stringify(switched.hops));
    const echo = (await switched.last.json()) as Echo;
    assert.equal(echo.url, '/admin/panel?x=1');
    assert.equal(echo.headers['x-tollgate-subject'], 'alice');
    // A form post without a session: a sign-in page, not JSON, not a redirect.
    const post = await new CookieJar(HOSTS).fetch(`${origin('app.corp.test')}/form`, { method: 'POST' });
    assert.equal(post.status, 401);
    assert.match(await post.text(), /Sign-in required/);
  });
});
