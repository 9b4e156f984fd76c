import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderStatusPage } from '../../src/admin/status-page.ts';
import { buildStatus, type MetricsSnapshot, type StatusInputs, sharedFor } from '../../src/observe/status.ts';
import { fakeRoute, fakeServer, fakeTable } from '../helpers/fake-routes.ts';

/**
 * The /status model and page on their own (the process tests are test/integration/status-page.test.ts):
 * route states and their order, truncation, what the page escapes, and the shared build.
 */

const NOW = Date.parse('2026-01-10T00:00:00Z');
const a = fakeServer('10.0.0.1:80');
const b = fakeServer('10.0.0.2:80');

function metric(name: string, type: string, values: Array<[Record<string, string>, number]>) {
  return {
    name,
    help: '',
    type,
    aggregator: 'sum',
    values: values.map(([labels, value]) => ({ labels, value })),
  } as unknown as MetricsSnapshot[number];
}

function inputs(overrides: Partial<StatusInputs> = {}): StatusInputs {
  return {
    now: NOW,
    phase: 'ready',
    table: fakeTable([fakeRoute({ id: 'app.test/', servers: [a, b] })]),
    metrics: [],
    reloads: [],
    workers: null,
    ...overrides,
  };
}

describe('buildStatus', () => {
  it('takes counts and health from the metrics, and orders down, warning, ok', () => {
    const table = fakeTable([
      fakeRoute({ id: 'ok.test/', servers: [a] }),
      fakeRoute({ id: 'half.test/', servers: [a, b] }),
      fakeRoute({ id: 'none.test/', servers: [], service: 'default/shop:80' }),
      fakeRoute({
        id: 'moved.test/',
        servers: [],
        redirectTo: 'https://u:secret-pw@elsewhere.test?sig=secret-sig',
      }),
    ]);
    const model = buildStatus(
      inputs({
        table,
        metrics: [
          metric('tollgate_requests_total', 'counter', [
            [{ route: 'half.test/', method: 'GET', status: '200' }, 7],
            [{ route: 'half.test/', method: 'GET', status: '502' }, 2],
            [{ route: 'half.test/', method: 'POST', status: '503' }, 1],
          ]),
          metric('tollgate_upstream_up', 'gauge', [[{ route: 'half.test/', server: b.address }, 0]]),
          metric('tollgate_upstream_errors_total', 'counter', [
            [{ route: 'half.test/', server: b.address, kind: 'connect' }, 3],
            [{ route: 'half.test/', server: b.address, kind: 'timeout' }, 1],
            [{ route: 'ok.test/', server: b.address, kind: 'connect' }, 5],
          ]),
          metric('tollgate_upstream_in_flight', 'gauge', [[{ server: a.address }, 4]]),
          metric('tollgate_upstream_requests_total', 'counter', [[{ server: a.address }, 40]]),
        ],
      }),
    );
    assert.deepEqual(
      model.routes.map((route) => [route.id, route.state, route.problems]),
      [
        ['none.test/', 'down', ['no ready endpoints']],
        ['half.test/', 'warning', ['1 of 2 servers out of rotation']],
        ['ok.test/', 'ok', []],
        ['moved.test/', 'ok', []],
      ],
    );
    const half = model.routes[1];
    assert.deepEqual([half?.requests, half?.responses_5xx], [10, 3]);
    assert.deepEqual(half?.servers, [
      { address: a.address, up: true, requests: 40, errors: 0, in_flight: 4 },
      { address: b.address, up: false, requests: 0, errors: 4, in_flight: 0 },
    ]);
    assert.equal(model.routes[3]?.auth, 'redirect');
    assert.equal(model.routes[3]?.redirect_to, 'https://elsewhere.test/');
    assert.ok(!JSON.stringify(model).includes('secret-'), 'no user info or query of a redirect');
    assert.deepEqual(model.totals, {
      routes: 4,
      servers: 2,
      routes_down: 1,
      routes_warning: 1,
      requests: 10,
      responses_5xx: 3,
    });
  });

  it('lists at most maxRoutes, the ones needing attention first, and says so', () => {
    const routes = Array.from({ length: 50 }, (_, i) => fakeRoute({ id: `r${i}.test/`, servers: [a] }));
    routes.push(fakeRoute({ id: 'broken.test/', servers: [a], unavailable: 'no masterkey' }));
    const model = buildStatus(inputs({ table: fakeTable(routes), maxRoutes: 10 }));
    assert.equal(model.routes.length, 10);
    assert.equal(model.routes[0]?.id, 'broken.test/');
    assert.deepEqual(model.routes[0]?.problems, ['auth policy could not be built']);
    assert.deepEqual(model.routes_truncated, { shown: 10, total: 51 });
  });

  it('shows an auth method and a count, never the credentials', () => {
    const secret = 'secret-value-1b2c';
    const route = fakeRoute({
      id: 'api.test/',
      servers: [a],
      auth: {
        type: 'apikey',
        users: [],
        keys: [{ name: 'ci', key: secret }] as never,
      },
    });
    const model = buildStatus(inputs({ table: fakeTable([route]) }));
    assert.equal(model.routes[0]?.auth, 'apikey');
    assert.equal(model.routes[0]?.credentials, 1);
    assert.ok(!JSON.stringify(model).includes(secret));
    assert.ok(!renderStatusPage(model).includes(secret));
  });

  it('flags certificates under 14 days, and sums worker restarts by reason', () => {
    const day = 86_400;
    const model = buildStatus(
      inputs({
        metrics: [
          metric('tollgate_tls_certificate_expiry_timestamp_seconds', 'gauge', [
            [{ certificate: 'tls_certificate', names: 'a.test,b.test' }, NOW / 1000 + 13 * day + 3600],
            [{ certificate: 'ingress', names: 'c.test' }, NOW / 1000 + 30 * day],
          ]),
          metric('tollgate_worker_restarts_total', 'counter', [
            [{ reason: 'crash' }, 2],
            [{ reason: 'config' }, 1],
          ]),
        ],
        workers: { configured: 2, serving: 2, list: [] },
      }),
    );
    assert.deepEqual(
      model.certificates.map((cert) => [cert.certificate, cert.names, cert.days_left, cert.warning]),
      [
        ['tls_certificate', ['a.test', 'b.test'], 13, true],
        ['ingress', ['c.test'], 30, false],
      ],
    );
    assert.deepEqual(model.workers?.restarts, { crash: 2, config: 1 });
  });
});

describe('renderStatusPage', () => {
  it('escapes every value that came from config or a log message', () => {
    const model = buildStatus(
      inputs({
        table: fakeTable([
          fakeRoute({ id: 'x.test/', servers: [a], redirectTo: 'https://e.test/"><script>x</script>' }),
        ]),
        reloads: [
          {
            source: 'upstreams.yaml',
            origin: '/etc/<b>tollgate</b>/upstreams.yaml',
            at: NOW,
            result: 'failure',
            hash: null,
            problems: [`upstreams.yaml:3: 'a' & "b" <img src=x onerror=alert(1)>`],
            lastSuccessAt: null,
          },
        ],
      }),
    );
    const page = renderStatusPage(model);
    assert.ok(!page.includes('<script>'), 'no script element');
    assert.ok(!page.includes('<img'), 'no injected element');
    assert.ok(!page.includes('<b>'), 'no injected markup');
    assert.ok(page.includes('&lt;img src=x onerror=alert(1)&gt;'));
    assert.ok(page.includes('&#39;a&#39; &amp; &quot;b&quot;'));
    assert.ok(page.includes('/etc/&lt;b&gt;tollgate&lt;/b&gt;/upstreams.yaml'));
  });
});

describe('sharedFor', () => {
  it('shares one build among callers within the interval, and builds again after it', async () => {
    let now = 0;
    let builds = 0;
    const shared = sharedFor(
      1_000,
      async () => ++builds,
      () => now,
    );
    assert.deepEqual(await Promise.all([shared(), shared(), shared()]), [1, 1, 1]);
    now = 999;
    assert.equal(await shared(), 1);
    now = 1_000;
    assert.equal(await shared(), 2);
  });

  it('does not keep a failed build', async () => {
    let fail = true;
    const shared = sharedFor(
      1_000,
      async () => {
        if (fail) throw new Error('no');
        return 'ok';
      },
      () => 0,
    );
    await assert.rejects(shared());
    fail = false;
    assert.equal(await shared(), 'ok');
  });
});
