import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { HealthCheckConfig } from '../../src/config/types.ts';
import { createLogger } from '../../src/log.ts';
import { registry } from '../../src/observe/metrics.ts';
import type { Route, UpstreamServer } from '../../src/routing/types.ts';
import { createDnsCache } from '../../src/upstream/dns-cache.ts';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { createServerHealth, type ServerHealth } from '../../src/upstream/health.ts';
import { fakeRoute, fakeServer, fakeTable } from '../helpers/fake-routes.ts';
import { waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const server = (address: string) => fakeServer(address);
const route = (hostKey: string, servers: UpstreamServer[], healthCheck: HealthCheckConfig | null) =>
  fakeRoute({ id: `${hostKey}/`, servers, healthCheck });
const table = (routes: Route[]) => fakeTable(routes);
const REFUSED = classifyUpstreamError(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));

async function gauge(routeId: string, address: string): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('tollgate_upstream_up')?.get();
  return metric?.values.find((v) => v.labels.route === routeId && v.labels.server === address)?.value;
}

describe('active health checks', () => {
  let status = 200;
  let upstream: Upstream;
  let health: ServerHealth;
  const messages: string[] = [];
  const check = { path: '/healthz', intervalSeconds: 0.05 };

  before(async () => {
    upstream = await startUpstream({
      handler: (_req, res) => {
        res.writeHead(status).end('ok');
      },
    });
    const logger = createLogger('info', { write: (line: string) => messages.push(JSON.parse(line).msg) });
    // Checks every 50 ms, but a loaded machine may take longer than that to answer one: the timeout
    // is not what these tests are about.
    health = createServerHealth({ logger, activeFailThreshold: 2, checkTimeoutMs: 5_000 });
  });
  after(async () => {
    await health.close();
    await upstream.close();
  });

  test('checks GET the path on each server with the route host and a recognisable user agent', async () => {
    const r = route('checked.example', [server(upstream.address)], check);
    health.sync(table([r]));
    await waitFor(() => upstream.requests.length >= 2, 3_000);
    const first = upstream.requests[0];
    assert.equal(first?.method, 'GET');
    assert.equal(first?.url, '/healthz');
    assert.equal(first?.headers.host, 'checked.example');
    assert.equal(first?.headers['user-agent'], 'tollgate-health-check');
    assert.equal(health.isAvailable(r, r.servers[0] as UpstreamServer), true);
  });

  test('3xx counts as up; failing checks take the server out, a passing one puts it back', async () => {
    const r = route('checked.example', [server(upstream.address)], check);
    const s = r.servers[0] as UpstreamServer;
    health.sync(table([r]));
    status = 302;
    const seen = upstream.requests.length;
    await waitFor(() => upstream.requests.length >= seen + 2, 3_000);
    assert.equal(health.isAvailable(r, s), true);

    status = 503;
    await waitFor(() => !health.isAvailable(r, s), 3_000);
    assert.equal(health.allUp, false);
    assert.equal(await gauge(r.id, s.address), 0);

    status = 200;
    await waitFor(() => health.isAvailable(r, s), 3_000);
    assert.equal(health.allUp, true);
    assert.equal(await gauge(r.id, s.address), 1);
    assert.equal(messages.filter((m) => m === 'health check fails: server out of rotation').length, 1);
    assert.equal(messages.filter((m) => m === 'health check passes again').length, 1);
  });

  test('a passing check lifts a passive ejection', async () => {
    // A second, healthy server: passive health never ejects a route's only one.
    const second = await startUpstream();
    try {
      const r = route('checked.example', [server(upstream.address), server(second.address)], check);
      const s = r.servers[0] as UpstreamServer;
      health.sync(table([r]));
      for (let i = 0; i < 3; i++) health.reportFailure(r, s, REFUSED);
      assert.equal(health.isAvailable(r, s), false);
      await waitFor(() => health.isAvailable(r, s), 3_000);
    } finally {
      health.sync(table([]));
      await second.close();
    }
  });

  test('a server that refuses connections is taken out; a route without checks is not affected', async () => {
    const dead = await startUpstream();
    await dead.close();
    const deadServer = server(dead.address);
    const checked = route('checked.example', [deadServer], check);
    const unchecked = route('unchecked.example', [deadServer], null);
    health.sync(table([checked, unchecked]));
    await waitFor(() => !health.isAvailable(checked, deadServer), 3_000);
    assert.equal(health.isAvailable(unchecked, deadServer), true);
    assert.equal(await gauge(unchecked.id, deadServer.address), 1);
  });

  test('checks a server named by host through the DNS cache', async () => {
    const lookedUp: string[] = [];
    const dns = createDnsCache({
      resolve: (name, callback) => {
        lookedUp.push(name);
        setImmediate(() => callback(null, [{ address: '127.0.0.1', family: 4 }]));
      },
    });
    const named = createServerHealth({ logger: createLogger('silent'), checkTimeoutMs: 5_000, dns });
    try {
      const r = route('named.example', [server(`backend.internal:${upstream.port}`)], check);
      const seen = upstream.requests.length;
      named.sync(table([r]));
      await waitFor(() => upstream.requests.length >= seen + 2, 3_000);
      assert.equal(named.isAvailable(r, r.servers[0] as UpstreamServer), true);
      assert.deepEqual(lookedUp, ['backend.internal']);
    } finally {
      await named.close();
    }
  });

  test('sync stops the checkers of routes that lost their check', async () => {
    const r = route('checked.example', [server(upstream.address)], null);
    health.sync(table([r]));
    await new Promise((resolve) => setTimeout(resolve, 100)); // let a check already in flight land
    const seen = upstream.requests.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(upstream.requests.length, seen);
    assert.equal(health.allUp, true, 'the dead server of the previous table is forgotten');
  });
});
