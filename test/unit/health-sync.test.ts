import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { HealthCheckConfig } from '../../src/config/types.ts';
import { createLogger } from '../../src/log.ts';
import { registry } from '../../src/observe/metrics.ts';
import type { Route, UpstreamServer } from '../../src/routing/types.ts';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { createServerHealth, type ServerHealth } from '../../src/upstream/health.ts';
import { fakeRoute, fakeServer, fakeTable } from '../helpers/fake-routes.ts';
import { waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

// health.sync adopts a table by its differences from the last one (routes kept as objects are
// untouched): what it keeps and drops must be what a full rebuild would keep and drop.

const server = (address: string) => fakeServer(address);
const route = (id: string, servers: UpstreamServer[], healthCheck: HealthCheckConfig | null = null) =>
  fakeRoute({ id, servers, healthCheck });
const table = (routes: Route[]) => fakeTable(routes);
const REFUSED = classifyUpstreamError(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
const logger = createLogger('error', { write: () => {} });

async function gauge(routeId: string, address: string): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('tollgate_upstream_up')?.get();
  return metric?.values.find((v) => v.labels.route === routeId && v.labels.server === address)?.value;
}

function eject(health: ServerHealth, r: Route, s: UpstreamServer): void {
  for (let i = 0; i < 3; i++) health.reportFailure(r, s, REFUSED);
  assert.equal(health.isAvailable(r, s), false, 'ejected');
}

describe('health sync across table swaps', () => {
  test('an ejection is kept across a swap that changed another route; that route gets its new gauges', async () => {
    const health = createServerHealth({ logger, cooldownMs: 60_000 });
    const [a, b, c, d, e] = ['10.1.0.1:80', '10.1.0.2:80', '10.1.0.3:80', '10.1.0.4:80', '10.1.0.5:80'].map(
      server,
    ) as [UpstreamServer, UpstreamServer, UpstreamServer, UpstreamServer, UpstreamServer];
    const kept = route('kept.sync/', [a, b]);
    const changed = route('changed.sync/', [c, d]);
    health.sync(table([kept, changed]));
    eject(health, kept, a);
    // An endpoint change of the other route: a new object for it, the same object for `kept`.
    const changedNow = route('changed.sync/', [c, e]);
    health.sync(table([kept, changedNow]));
    assert.equal(health.isAvailable(kept, a), false, 'still ejected');
    assert.equal(health.allUp, false);
    assert.equal(await gauge(kept.id, a.address), 0);
    assert.equal(await gauge(kept.id, b.address), 1);
    assert.equal(await gauge(changed.id, c.address), 1, 'a pair both objects name keeps its gauge');
    assert.equal(await gauge(changed.id, e.address), 1, 'the new server gets its gauge');
    assert.equal(await gauge(changed.id, d.address), undefined, 'the server that left loses its gauge');
    await health.close();
  });

  test('a route replaced by a new object keeps the ejection of its address; one gone takes its gauges', async () => {
    const health = createServerHealth({ logger, cooldownMs: 60_000 });
    const a = server('10.2.0.1:80');
    const b = server('10.2.0.2:80');
    const first = route('replaced.sync/', [a, b]);
    const other = route('other.sync/', [b]);
    health.sync(table([first, other]));
    eject(health, first, a);
    const second = route('replaced.sync/', [a, b]);
    health.sync(table([second]));
    assert.equal(health.isAvailable(second, a), false, 'passive health is per address, not per route object');
    assert.equal(await gauge(second.id, a.address), 0);
    assert.equal(await gauge(other.id, b.address), undefined, 'the route that left loses its gauges');
    await health.close();
  });

  test('an address that leaves every route forgets its ejection', async () => {
    const health = createServerHealth({ logger, cooldownMs: 60_000 });
    const a = server('10.3.0.1:80');
    const b = server('10.3.0.2:80');
    const r = route('forget.sync/', [a, b]);
    health.sync(table([r]));
    eject(health, r, a);
    health.sync(table([route('forget.sync/', [b])]));
    assert.equal(health.allUp, true, 'nothing ejected any more');
    const back = route('forget.sync/', [a, b]);
    health.sync(table([back]));
    assert.equal(health.isAvailable(back, a), true, 'back with a clean slate');
    assert.equal(await gauge(back.id, a.address), 1);
    await health.close();
  });
});

describe('health sync keeps active checks of kept routes', () => {
  let status = 200;
  let upstream: Upstream;
  let health: ServerHealth;
  const check = { path: '/healthz', intervalSeconds: 0.05 };

  before(async () => {
    upstream = await startUpstream({
      handler: (_req, res) => {
        res.writeHead(status).end('ok');
      },
    });
    health = createServerHealth({ logger, activeFailThreshold: 2, checkTimeoutMs: 5_000 });
  });
  after(async () => {
    await health.close();
    await upstream.close();
  });

  test("a failing check's verdict survives a swap that changed another route, and a changed check restarts", async () => {
    const s = server(upstream.address);
    const checked = route('checked.sync/', [s], check);
    health.sync(table([checked, route('plain.sync/', [server('10.4.0.1:80')])]));
    status = 500;
    await waitFor(() => !health.isAvailable(checked, s), 30_000); // the failing check takes it out
    health.sync(table([checked, route('plain.sync/', [server('10.4.0.2:80')])]));
    assert.equal(health.isAvailable(checked, s), false, 'verdict kept: the checked route did not change');
    const seen = upstream.requests.length;
    await waitFor(() => upstream.requests.length > seen, 30_000); // its checker still runs
    // The same route with another check path: a new checker, whose passing check puts it back.
    const moved = route('checked.sync/', [s], { path: '/ready', intervalSeconds: 0.05 });
    health.sync(table([moved]));
    status = 200;
    await waitFor(() => upstream.requests.some((request) => request.url === '/ready'), 30_000);
    await waitFor(() => health.isAvailable(moved, s), 30_000);
    assert.equal(health.allUp, true);
  });
});
