import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { refusedAddress, request, type SimpleResponse, type Tollgate, waitFor } from '../helpers/tollgate.ts';
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
/**
 * An upstream back on the port a refusedAddress() held. The port was an ephemeral one: between its
 * release and this listen, another connection on the machine (other test files run beside this one)
 * may be handed it as its local port for a moment, so EADDRINUSE is retried until it is free again.
 */
async function upstreamBackOn(name: string, port: number): Promise<Upstream> {
  let back: Upstream | undefined;
  await waitFor(async () => {
    try {
      back = await upstream({ name, port });
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      return false;
    }
  }, 10_000);
  return back as Upstream;
}

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

  it('answers 503 at once, without trying anyone, when every server of the route fails its health check', async () => {
    let proxied = 0;
    // Up, but failing their check: no request of a client reaches them.
    const failing = () =>
      upstream({
        handler: (req, res) => {
          if (req.url !== '/healthz') proxied++;
          res.writeHead(req.url === '/healthz' ? 500 : 200).end();
        },
      });
    const [one, two] = [await failing(), await failing()];
    const tollgate = await proxyFor({
      servers: [one.address, two.address],
      health_check: { path: '/healthz', interval_seconds: 0.2 },
    });
    await waitFor(async () => (await upGauge(tollgate, one.address)) === 0, 5_000);
    await waitFor(async () => (await upGauge(tollgate, two.address)) === 0, 5_000);

    const res = await get(tollgate);
    assert.equal(res.status, 503);
    assert.equal(res.json<{ error: string }>().error, 'no_healthy_upstream');
    assert.equal(proxied, 0, 'no upstream was contacted');
  });

  it("a slow URL's response timeouts never take the route's only server out: other URLs and other routes to it still answer", async () => {
    // Answers at once, except /slow, which it never answers.
    const pod = await upstream({
      handler: (req, res) => {
        if (req.url?.startsWith('/slow')) return;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ server: 'pod' }));
      },
    });
    const tollgate = await scope.tollgate({
      main: { upstream_response_timeout_seconds: 0.3 },
      upstreams: {
        upstreams: {
          'app.test': { paths: { '/': { servers: [pod.address] } } },
          'admin.test': { paths: { '/': { servers: [pod.address] } } },
        },
      },
    });
    for (let i = 0; i < 5; i++) {
      const slow = await request(tollgate.proxyUrl, { path: `/slow/${i}`, headers: { host: 'app.test' } });
      assert.equal(slow.status, 504);
    }
    for (const host of ['app.test', 'admin.test']) {
      const fast = await request(tollgate.proxyUrl, { path: '/fast', headers: { host } });
      assert.equal(fast.status, 200, `${host}: ${fast.body}`);
      assert.equal(servedBy(fast), 'pod');
    }
    assert.equal(await upGauge(tollgate, pod.address), 1);
    assert.equal(logCount(tollgate, 'upstream server ejected'), 0);
  });

  it('a response timeout is no ejection signal beside other servers either', async () => {
    const slow = await upstream({
      handler: (req, res) => {
        if (req.url === '/report') return; // this server never finishes its report
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ server: 'slow' }));
      },
    });
    const quick = await upstream({ name: 'quick' });
    const tollgate = await proxyFor(
      { servers: [slow.address, quick.address] },
      { upstream_response_timeout_seconds: 0.3 },
    );
    // Round robin: every other report lands on the slow server and times out (a 504, not retried).
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      statuses.push(
        (await request(tollgate.proxyUrl, { path: '/report', headers: { host: 'app.test' } })).status,
      );
    }
    assert.equal(statuses.filter((status) => status === 504).length, 4, String(statuses));
    assert.equal(await upGauge(tollgate, slow.address), 1);
    const served = new Set<string>();
    for (let i = 0; i < 4; i++) served.add(servedBy(await get(tollgate)));
    assert.deepEqual([...served].sort(), ['quick', 'slow'], 'the slow server is still in rotation');
  });

  it("a route's only server that refuses connections is never ejected: each request tries it, and it serves again at once", async () => {
    const refused = await refusedAddress();
    const tollgate = await proxyFor({ servers: [refused.address] });
    for (let i = 0; i < 5; i++) {
      const res = await get(tollgate);
      assert.equal(res.status, 502, res.body);
      assert.equal(res.json<{ error: string }>().error, 'bad_gateway');
    }
    assert.equal(await connectErrors(tollgate, refused.address), 5, 'every request tried it');
    assert.equal(await upGauge(tollgate, refused.address), 1);
    assert.equal(logCount(tollgate, 'upstream server ejected'), 0);

    // Back on the same port: served by the next request, no cool-down to sit out.
    await refused.release();
    scope.keep(await upstreamBackOn('back', refused.port));
    const res = await get(tollgate);
    assert.equal(res.status, 200);
    assert.equal(servedBy(res), 'back');
  });

  it('when every server of a route has been ejected, all are still tried (panic), and the first back serves', async () => {
    const [first, second] = [await refusedAddress(), await refusedAddress()];
    scope.keep({ close: () => second.release() });
    const tollgate = await proxyFor({ servers: [first.address, second.address] });
    // Each request fails over from one to the other: two connect failures each.
    for (let i = 0; i < 4; i++) assert.equal((await get(tollgate)).status, 502);
    await waitFor(() => logCount(tollgate, 'upstream server ejected') === 2, 2_000);
    const res = await get(tollgate);
    assert.equal(res.status, 502, 'tried, not refused at once with 503');
    assert.equal(res.json<{ error: string }>().error, 'bad_gateway');

    await first.release();
    scope.keep(await upstreamBackOn('first-back', first.port));
    const back = await get(tollgate);
    assert.equal(back.status, 200);
    assert.equal(servedBy(back), 'first-back');
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
