import assert from 'node:assert/strict';
import { appendFile, copyFile, mkdtemp, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { hashPassword } from '../../src/auth/password.ts';
import type { StatusModel } from '../../src/observe/status.ts';
import { launchChromium } from '../helpers/browser.ts';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';
import {
  endpointSlice,
  ingress,
  ingressClass,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';
import { PROCESS_START_MS } from '../helpers/workers.ts';

/**
 * /status and /status.json on the admin port (docs/observability.md#status), through the built
 * process: what it shows of routes, server health, reloads, certificates and workers, that it never
 * shows a credential, that it stays bounded with 20,000 routes, and that it reads in a real browser
 * with JavaScript off.
 */

const HOST = 'app.status.test';
const MASTERKEY = 'status-masterkey-5f1d9c';
// Every credential kind a config can hold: none may ever appear on the page or in the JSON.
const SECRETS = {
  masterkey: MASTERKEY,
  plainPassword: 'plain-pw-status-81',
  hashedPassword: 'hashed-pw-status-27',
  credsPassword: 'creds-pw-status-64',
  apiKey: 'api-key-status-3e9a',
  legacyKey: 'legacy-key-status-7c20',
  forwardToken: 'forward-token-status-11d',
  upstreamSecret: 'upstream-bearer-status-902',
};

const scope = testScope();

async function statusJson(tollgate: Tollgate): Promise<StatusModel> {
  const res = await request(`${tollgate.adminUrl}/status.json`);
  assert.equal(res.status, 200);
  return res.json<StatusModel>();
}

/** /status.json until `check` holds (a build is reused for up to a second, so this polls). */
async function statusWhen(
  tollgate: Tollgate,
  check: (model: StatusModel) => boolean,
  timeoutMs = 10_000,
): Promise<StatusModel> {
  let last: StatusModel | null = null;
  try {
    await waitFor(async () => {
      last = await statusJson(tollgate);
      return check(last);
    }, timeoutMs);
  } catch (error) {
    throw new Error(`${(error as Error).message}; last /status.json: ${JSON.stringify(last)}`);
  }
  return last as unknown as StatusModel;
}

const routeOf = (model: StatusModel, id: string) => model.routes.find((route) => route.id === id);

describe('/status on the admin port (single process)', { skip: hasOpenssl() ? false : 'no openssl' }, () => {
  let alive: Upstream;
  let dead: string;
  let tollgate: Tollgate;
  let volume: SecretVolume;
  let upstreams: Record<string, unknown>;
  let passwordHash: string;

  before(async () => {
    alive = await scope.upstream({ name: 'alive' });
    dead = await scope.deadServer();
    const certificate = selfSigned(HOST); // valid for two days: under the 14-day warning
    volume = new SecretVolume({ 'tls.crt': certificate.cert, 'tls.key': certificate.key });
    passwordHash = await hashPassword(SECRETS.hashedPassword, 10);
    const servers = [alive.address];
    upstreams = {
      upstreams: {
        [HOST]: {
          paths: {
            '/': { servers: [dead, alive.address] },
            '/basic': {
              servers,
              authorization: {
                type: 'basic',
                users: [
                  { username: 'alice', password: SECRETS.plainPassword },
                  { username: 'bob', password_hash: passwordHash },
                ],
              },
            },
            '/creds': { servers, authorization: { type: 'basic', creds: `admin:${SECRETS.credsPassword}` } },
            '/key': {
              servers,
              authorization: { type: 'apikey', keys: [{ name: 'ci', key: SECRETS.apiKey }] },
            },
            '/legacy': { servers, authorization: { type: 'api', data: SECRETS.legacyKey } },
            '/jwt': { servers, authorization: { type: 'jwt' } },
            '/forward': {
              servers,
              authorization: {
                type: 'forward',
                url: `http://${alive.address}/auth?token=${SECRETS.forwardToken}`,
              },
            },
            '/headers': { servers, server_headers: [`Authorization:Bearer ${SECRETS.upstreamSecret}`] },
            '/<script>': { servers },
          },
        },
      },
    };
    tollgate = await scope.tollgate({
      main: {
        masterkey: MASTERKEY,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
      },
      upstreams,
    });
  });
  after(() => volume?.remove());

  it('lists the routing table with each route auth method, and no credential anywhere', async () => {
    const res = await request(`${tollgate.adminUrl}/status.json`);
    assert.equal(res.headers['cache-control'], 'no-store');
    const model = res.json<StatusModel>();
    const auth = Object.fromEntries(model.routes.map((route) => [route.path, route.auth]));
    assert.deepEqual(auth, {
      '/': 'none',
      '/basic': 'basic',
      '/creds': 'basic',
      '/key': 'apikey',
      '/legacy': 'apikey',
      '/jwt': 'jwt',
      '/forward': 'forward',
      '/headers': 'none',
      '/%3Cscript%3E': 'none',
    });
    assert.equal(routeOf(model, `${HOST}/basic`)?.credentials, 2);
    assert.equal(routeOf(model, `${HOST}/key`)?.credentials, 1);
    assert.ok(model.routes.every((route) => route.host === HOST));
    assert.deepEqual(
      routeOf(model, `${HOST}/basic`)?.servers.map((server) => server.address),
      [alive.address],
    );
    assert.equal(model.phase, 'ready');
    assert.equal(model.totals.routes, 9);
    assert.equal(model.routes_truncated, null);
    assert.equal(model.workers, null);

    const page = await request(`${tollgate.adminUrl}/status`);
    assert.equal(page.status, 200);
    assert.equal(page.headers['cache-control'], 'no-store');
    assert.match(String(page.headers['content-type']), /^text\/html/);
    for (const body of [res.body, page.body]) {
      for (const [kind, secret] of Object.entries({ ...SECRETS, passwordHash })) {
        assert.ok(!body.includes(secret), `the ${kind} must not appear on /status`);
      }
      assert.ok(!body.includes('token='), 'no part of the forward-auth URL');
    }
  });

  it('shows a server that went down, and counts requests, errors and in-flight per server', async () => {
    for (let i = 0; i < 10; i++) {
      const res = await request(tollgate.proxyUrl, { path: '/', headers: { host: HOST } });
      assert.equal(res.status, 200);
    }
    const model = await statusWhen(tollgate, (m) => routeOf(m, `${HOST}/`)?.state === 'warning');
    const route = routeOf(model, `${HOST}/`);
    assert.deepEqual(route?.problems, ['1 of 2 servers out of rotation']);
    const [down, up] = route?.servers ?? [];
    assert.deepEqual(
      { address: down?.address, up: down?.up, errors: down?.errors, in_flight: down?.in_flight },
      { address: dead, up: false, errors: 3, in_flight: 0 },
    );
    assert.deepEqual(
      { address: up?.address, up: up?.up, errors: up?.errors },
      { address: alive.address, up: true, errors: 0 },
    );
    assert.equal(route?.requests, 10);
    assert.equal(up?.requests, 10, 'every request ended on the live server');
    assert.equal(down?.requests, 3, 'three attempts before the dead one was ejected');
    // Listed first: routes needing attention lead the table.
    assert.equal(model.routes[0]?.id, `${HOST}/`);
    assert.equal(model.totals.routes_warning, 1);
  });

  it('shows the TLS certificate and warns of its expiry under 14 days', async () => {
    const model = await statusJson(tollgate);
    assert.equal(model.certificates.length, 1);
    const [cert] = model.certificates;
    assert.equal(cert?.certificate, 'tls_certificate');
    assert.deepEqual(cert?.names, [HOST]);
    assert.ok((cert?.days_left ?? 99) <= 2, `days left: ${cert?.days_left}`);
    assert.equal(cert?.warning, true);
    const metrics = await tollgate.metrics();
    assert.match(
      metrics,
      new RegExp(
        `tollgate_tls_certificate_expiry_timestamp_seconds\\{certificate="tls_certificate",names="${HOST.replaceAll('.', '\\.')}"\\} \\d{10}`,
      ),
    );
  });

  it('reports the last reload: its identity after a reload, the reasons after a refused one', async () => {
    const initial = await statusJson(tollgate);
    const loaded = initial.sources.find((source) => source.source === 'upstreams.yaml');
    assert.equal(loaded?.result, 'loaded');
    assert.equal(loaded?.hash, initial.config_hash);

    const paths = (upstreams.upstreams as Record<string, { paths: Record<string, unknown> }>)[HOST]?.paths;
    await tollgate.writeUpstreams({
      upstreams: { [HOST]: { paths: { ...paths, '/added': { servers: [alive.address] } } } },
    });
    const reloaded = await statusWhen(tollgate, (m) =>
      m.sources.some((source) => source.source === 'upstreams.yaml' && source.result === 'success'),
    );
    const success = reloaded.sources.find((source) => source.source === 'upstreams.yaml');
    assert.notEqual(reloaded.config_hash, initial.config_hash);
    assert.equal(success?.hash, reloaded.config_hash);
    assert.deepEqual(success?.problems, []);
    assert.ok(routeOf(reloaded, `${HOST}/added`), 'the new route is listed');

    await tollgate.writeUpstreams(
      'upstreams:\n  app.status.test:\n    paths:\n      /:\n        servers: [not-an-address]\n',
    );
    const refused = await statusWhen(tollgate, (m) =>
      m.sources.some((source) => source.source === 'upstreams.yaml' && source.result === 'failure'),
    );
    const failure = refused.sources.find((source) => source.source === 'upstreams.yaml');
    assert.equal(refused.config_hash, reloaded.config_hash, 'the previous config keeps serving');
    assert.equal(failure?.hash, reloaded.config_hash);
    assert.equal(failure?.last_success, success?.last_attempt);
    assert.ok((failure?.problems.length ?? 0) > 0);
    assert.match(failure?.problems[0] ?? '', /upstreams\.yaml:5:/, 'the logged file:line message');

    const page = (await request(`${tollgate.adminUrl}/status`)).body;
    assert.match(page, /<td class="failure">failure<\/td>/);

    // main.yaml is never applied live: a change is shown as waiting for a restart.
    assert.equal(refused.sources.find((source) => source.source === 'main.yaml')?.result, 'loaded');
    const mainPath = join(tollgate.dir, 'main.yaml');
    await appendFile(mainPath, 'log_level: debug\n');
    const changed = await statusWhen(tollgate, (m) =>
      m.sources.some((source) => source.source === 'main.yaml' && source.result === 'restart_required'),
    );
    assert.deepEqual(changed.sources.find((source) => source.source === 'main.yaml')?.problems, [
      'changed on disk; restart tollgate to apply it',
    ]);
  });

  it('reads in Chromium with JavaScript off: routes, health, reloads, certificate warning', async () => {
    const browser: Browser = await launchChromium();
    try {
      const context = await browser.newContext({
        javaScriptEnabled: false,
        viewport: { width: 1280, height: 900 },
      });
      const page = await context.newPage();
      const response = await page.goto(`${tollgate.adminUrl}/status`);
      assert.equal(response?.status(), 200);
      assert.equal(await page.title(), 'Tollgate status');
      // biome-ignore lint/performance/useDomNodeTextContent: what a reader sees is the subject here
      const text = await page.locator('body').innerText();
      for (const expected of [
        'Routes',
        HOST,
        '/basic',
        'basic (2 configured)',
        'apikey (1 configured)',
        'forward',
        '1 of 2 servers out of rotation',
        'Sources and reloads',
        'upstreams.yaml',
        'TLS certificates',
        'renew soon',
      ]) {
        assert.ok(text.includes(expected), `"${expected}" is visible on the page`);
      }
      // The path with markup in it is shown as text, not parsed as an element.
      assert.ok(text.includes('/%3Cscript%3E'));
      assert.equal(await page.locator('script').count(), 0);
      const dir = await mkdtemp(join(tmpdir(), 'tollgate-status-'));
      const screenshot = join(dir, 'status-page.png');
      await page.screenshot({ path: screenshot, fullPage: true });
      assert.ok((await stat(screenshot)).size > 10_000, `a screenshot was written to ${screenshot}`);
      // `STATUS_SCREENSHOT=docs/images/status-page.png` refreshes the picture in docs/observability.md.
      if (process.env.STATUS_SCREENSHOT) await copyFile(screenshot, process.env.STATUS_SCREENSHOT);
    } finally {
      await browser.close();
    }
  });
});

describe('/status with workers: 2', () => {
  it('lists both workers and sums their requests', async () => {
    const upstream = await scope.upstream({ name: 'one' });
    const tollgate = await scope.tollgate({
      main: { workers: 2 },
      upstreams: { upstreams: { [HOST]: { paths: { '/': { servers: [upstream.address] } } } } },
    });
    // Separate connections: the kernel spreads them over both workers.
    for (let i = 0; i < 12; i++) {
      assert.equal((await request(tollgate.proxyUrl, { path: '/', headers: { host: HOST } })).status, 200);
    }
    const model = await statusWhen(tollgate, (m) => routeOf(m, `${HOST}/`)?.requests === 12);
    assert.equal(model.workers?.configured, 2);
    assert.equal(model.workers?.serving, 2);
    assert.deepEqual(
      model.workers?.list.map((worker) => [worker.index, worker.state, worker.serves_live_config]),
      [
        [0, 'serving', true],
        [1, 'serving', true],
      ],
    );
    assert.ok(model.workers?.list.every((worker) => typeof worker.pid === 'number' && worker.pid > 0));
    const server = routeOf(model, `${HOST}/`)?.servers[0];
    assert.deepEqual(
      { up: server?.up, requests: server?.requests, errors: server?.errors },
      { up: true, requests: 12, errors: 0 },
    );
    assert.equal(model.sources.find((source) => source.source === 'upstreams.yaml')?.result, 'loaded');
    const page = (await request(`${tollgate.adminUrl}/status`)).body;
    assert.match(page, /2 of 2 serving the live config/);
  });
});

describe('/status with 20,000 routes', () => {
  it('stays bounded, says it is truncated, and the admin port keeps answering probes', async () => {
    const upstream = await scope.upstream({ name: 'many' });
    const paths: Record<string, unknown> = {};
    for (let i = 0; i < 20_000; i++) paths[`/p${i}`] = { servers: [upstream.address] };
    const tollgate = await scope.tollgate({
      main: { log_level: 'warn' },
      upstreams: { upstreams: { [HOST]: { paths } } },
      readyTimeoutMs: 120_000,
    });
    // Many at once: one build serves them all, and /healthz is answered meanwhile.
    const pages = Promise.all(Array.from({ length: 20 }, () => request(`${tollgate.adminUrl}/status`)));
    const health = await request(`${tollgate.adminUrl}/healthz`);
    assert.equal(health.status, 200);
    for (const page of await pages) {
      assert.equal(page.status, 200);
      assert.ok(page.body.length < 1_000_000, `the page is ${page.body.length} bytes`);
      assert.match(page.body, /Showing 500 of 20000 routes/);
    }
    const model = await statusJson(tollgate);
    assert.equal(model.routes.length, 500);
    assert.deepEqual(model.routes_truncated, { shown: 500, total: 20_000 });
    assert.equal(model.totals.routes, 20_000);
  });
});

describe('/status with the Ingress controller', { skip: hasOpenssl() ? false : 'no openssl' }, () => {
  it('lists Ingress routes, the watches, a rejected Ingress and an Ingress TLS certificate', async () => {
    const pod = await scope.upstream({ name: 'shop' });
    const api = scope.keep(await startFakeKubeApi());
    api.apply(ingressClass());
    api.apply(
      service({ name: 'shop', namespace: 'apps', ports: [{ name: 'http', port: 80, targetPort: pod.port }] }),
    );
    api.apply(
      endpointSlice({
        service: 'shop',
        namespace: 'apps',
        ports: [{ name: 'http', port: pod.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    const shopCertificate = selfSigned('shop.test');
    api.apply(
      secret({
        name: 'shop-tls',
        namespace: 'apps',
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': shopCertificate.cert.toString(), 'tls.key': shopCertificate.key.toString() },
      }),
    );
    api.apply(
      ingress({
        name: 'shop',
        namespace: 'apps',
        tls: [{ hosts: ['shop.test'], secretName: 'shop-tls' }],
        rules: [{ host: 'shop.test', paths: [{ service: 'shop', port: 80 }] }],
      }),
    );
    // upstreams.yaml owns file.test: an Ingress naming it is left out and reported.
    api.apply(
      ingress({
        name: 'clash',
        namespace: 'apps',
        rules: [{ host: 'file.test', paths: [{ service: 'shop', port: 80 }] }],
      }),
    );
    const fallback = selfSigned('default.test');
    const volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    scope.keep({ close: async () => volume.remove() });
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-status-kube-'));
    const tollgate = await scope.tollgate({
      main: {
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps'), ingress_class: 'tollgate' },
      },
      upstreams: { upstreams: { 'file.test': { paths: { '/': { servers: [pod.address] } } } } },
      env: { KUBECONFIG: '' },
      readyTimeoutMs: PROCESS_START_MS,
    });
    const model = await statusWhen(
      tollgate,
      (m) =>
        m.routes.some((route) => route.host === 'shop.test' && route.servers.length === 1) &&
        (m.kubernetes?.ingresses_rejected.length ?? 0) > 0 &&
        m.certificates.some((cert) => cert.certificate === 'ingress'),
      30_000,
    );
    const shop = model.routes.find((route) => route.host === 'shop.test');
    assert.equal(shop?.state, 'ok');
    assert.equal(shop?.servers[0]?.address, `127.0.0.1:${pod.port}`);
    assert.deepEqual(model.kubernetes?.ingresses_rejected, [{ namespace: 'apps', name: 'clash' }]);
    const watched = model.kubernetes?.watches.map((watch) => watch.resource) ?? [];
    for (const resource of ['ingresses', 'services', 'secrets', 'endpointslices'])
      assert.ok(watched.includes(resource), `${resource} in ${watched.join(', ')}`);
    assert.ok(model.kubernetes?.watches.every((watch) => watch.up && watch.last_sync !== null));
    const ingressCertificate = model.certificates.find((cert) => cert.certificate === 'ingress');
    assert.deepEqual(ingressCertificate?.names, ['shop.test']);
    assert.equal(ingressCertificate?.warning, true);
    assert.deepEqual(model.certificates.find((cert) => cert.certificate === 'tls_certificate')?.names, [
      'default.test',
    ]);
    const page = (await request(`${tollgate.adminUrl}/status`)).body;
    assert.match(page, /Ingresses not served as written: <span class="warning">apps\/clash<\/span>/);
    const text = JSON.stringify(model);
    assert.ok(!text.includes(shopCertificate.key.toString().split('\n')[1] as string), 'no private key');
  });
});
