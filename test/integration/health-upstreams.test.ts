import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { request, type SimpleResponse, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

const scope = testScope();
const { upstream, deadServer } = scope;

function proxyFor(path: Record<string, unknown>, main: Record<string, unknown> = {}): Promise<Tollgate> {
  return scope.tollgate({ upstreams: { upstreams: { 'app.test': { paths: { '/': path } } } }, main });
}

const ROUTE = 'app.test/';
const get = (tollgate: Tollgate): Promise<SimpleResponse> =>
  request(tollgate.proxyUrl, { path: '/', headers: { host: 'app.test' } });
const servedBy = (res: SimpleResponse) => res.json<{ server: string }>().server;

/** The value of one sample in the /metrics text, or undefined when the series is absent. */
async function sample(
  tollgate: Tollgate,
  name: string,
  labels: Record<string, string>,
): Promise<number | undefined> {
  const text = await tollgate.metrics();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const matches = Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`));
    if (matches) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

const upGauge = (tollgate: Tollgate, server: string) =>
  sample(tollgate, 'tollgate_upstream_up', { route: ROUTE, server });
const connectErrors = async (tollgate: Tollgate, server: string) =>
  (await sample(tollgate, 'tollgate_upstream_errors_total', { route: ROUTE, server, kind: 'connect' })) ?? 0;
const logCount = (tollgate: Tollgate, msg: string) =>
  tollgate.logs().filter((line) => line.msg === msg).length;

describe('server health', () => {
  it('ejects a server that refuses connections: gauge 0, no more attempts on it', async () => {
    const alive = await upstream({ name: 'alive' });
    const dead = await deadServer();
    const tollgate = await proxyFor({ servers: [dead, alive.address] });
    assert.equal(await upGauge(tollgate, dead), 1);
    assert.equal(await upGauge(tollgate, alive.address), 1);

    for (let i = 0; i < 10; i++) {
      const res = await get(tollgate);
      assert.equal(res.status, 200);
      assert.equal(servedBy(res), 'alive');
    }
    assert.equal(await upGauge(tollgate, dead), 0);
    assert.equal(await upGauge(tollgate, alive.address), 1);
    const attempts = await connectErrors(tollgate, dead);
    assert.equal(attempts, 3, 'ejected after three consecutive connect failures');

    for (let i = 0; i < 20; i++) assert.equal((await get(tollgate)).status, 200);
    assert.equal(await connectErrors(tollgate, dead), attempts, 'an ejected server is not tried');
    await waitFor(() => logCount(tollgate, 'upstream server ejected') === 1, 2_000);
    const line = tollgate.logs().find((l) => l.msg === 'upstream server ejected');
    assert.equal(line?.server, dead);
  });

  it('re-admits a server once its health check passes again', async () => {
    const steady = await upstream({ name: 'steady' });
    let flaky = await upstream({ name: 'flaky' });
    const port = flaky.port;
    const tollgate = await proxyFor({
      servers: [steady.address, flaky.address],
      health_check: { path: '/healthz', interval_seconds: 0.2 },
    });
    await waitFor(() =>
      flaky.requests.some((r) => r.url === '/healthz' && r.headers['user-agent'] === 'tollgate-health-check'),
    );

    await flaky.close();
    await waitFor(async () => (await upGauge(tollgate, flaky.address)) === 0, 5_000);
    const served = new Set<string>();
    for (let i = 0; i < 10; i++) served.add(servedBy(await get(tollgate)));
    assert.deepEqual([...served], ['steady']);

    flaky = await upstream({ name: 'flaky', port });
    await waitFor(async () => (await upGauge(tollgate, flaky.address)) === 1, 5_000);
    const after = new Set<string>();
    for (let i = 0; i < 10; i++) after.add(servedBy(await get(tollgate)));
    assert.deepEqual([...after].sort(), ['flaky', 'steady']);
    await waitFor(() => logCount(tollgate, 'health check passes again') === 1, 2_000);
    assert.equal(logCount(tollgate, 'health check fails: server out of rotation'), 1);
  });

  it('answers 503 at once, without trying anyone, when every server of the route is down', async () => {
    let hung = 0;
    // Accepts connections and never answers: each attempt costs a full response timeout.
    const silent = await upstream({
      handler: () => {
        hung++;
      },
    });
    const refused = await deadServer();
    const tollgate = await proxyFor(
      { servers: [silent.address, refused] },
      { upstream_response_timeout_seconds: 0.3 },
    );

    // A timeout is not retried on the next server (the upstream may have acted on the request), so
    // each request costs one or two failures; three each, and the route has nobody left.
    const statuses: number[] = [];
    while (statuses.length < 8 && statuses.at(-1) !== 503) statuses.push((await get(tollgate)).status);
    assert.equal(statuses.at(-1), 503, String(statuses));
    assert.ok(
      statuses.slice(0, -1).every((s) => s === 502 || s === 504),
      String(statuses),
    );

    const attemptsBefore = hung;
    const res = await get(tollgate);
    assert.equal(res.status, 503);
    assert.equal(res.json<{ error: string }>().error, 'no_healthy_upstream');
    assert.equal(hung, attemptsBefore, 'no upstream was contacted');
    assert.equal(await upGauge(tollgate, silent.address), 0);
    assert.equal(await upGauge(tollgate, refused), 0);
  });

  it('follows reloads: checks start for a path that gains health_check, gauges of removed servers go', async () => {
    const a = await upstream({ name: 'a' });
    const b = await upstream({ name: 'b' });
    const config = (servers: Upstream[], healthCheck?: Record<string, unknown>) => ({
      upstreams: {
        'app.test': {
          paths: {
            '/': {
              servers: servers.map((s) => s.address),
              ...(healthCheck && { health_check: healthCheck }),
            },
          },
        },
      },
    });
    const tollgate = await scope.tollgate({ upstreams: config([a, b]) });
    assert.equal(await upGauge(tollgate, b.address), 1);

    await tollgate.writeUpstreams(config([a], { path: '/ready', interval_seconds: 0.2 }));
    await waitFor(() => a.requests.some((r) => r.url === '/ready'), 5_000);
    assert.equal(await upGauge(tollgate, a.address), 1);
    assert.equal(await upGauge(tollgate, b.address), undefined, 'the removed server has no series any more');
    assert.ok(!b.requests.some((r) => r.url === '/ready'));
  });
});
