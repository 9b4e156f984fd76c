import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ResponseCache } from '../../src/cache/response-cache.ts';
import { type PathFields, pathConfig } from '../../src/config/path-config.ts';
import type { HostConfig, PathConfig, ServerAddress, UpstreamsConfig } from '../../src/config/types.ts';
import { unverifiedUpstreamsLog } from '../../src/data-plane/files.ts';
import { createLogger } from '../../src/log.ts';
import { registry } from '../../src/observe/metrics.ts';
import { compileRoutingTable, recompileServers, serverCount } from '../../src/routing/compile.ts';
import { changeFrom } from '../../src/routing/table-change.ts';
import type { RoutingTable } from '../../src/routing/types.ts';
import { createServerHealth } from '../../src/upstream/health.ts';
import { UpstreamPools } from '../../src/upstream/pools.ts';

// A table compiled from the previous one tells what left and arrived (routing/table-change), and the
// swap listeners follow that change instead of walking every route. These tests replace a route by a
// new object of the same id and shape but another server: a listener reusing a stale result would
// miss it.

/** `10.0.0.1:80`, or `https://10.0.0.1:443` for a server dialled with TLS. */
function address(raw: string): ServerAddress {
  const tls = raw.startsWith('https://');
  const rest = tls ? raw.slice('https://'.length) : raw;
  const colon = rest.lastIndexOf(':');
  return { raw, host: rest.slice(0, colon), port: Number(rest.slice(colon + 1)), ...(tls ? { tls } : {}) };
}
const path = (prefix: string, servers: string[], extra: Partial<PathFields> = {}): PathConfig =>
  pathConfig(prefix, { servers: servers.map(address), ...extra });
const host = (name: string, ...paths: PathConfig[]): HostConfig => ({ name, paths });
function config(hosts: HostConfig[], extra: Partial<UpstreamsConfig> = {}): UpstreamsConfig {
  return {
    file: '/etc/tollgate/upstreams.yaml',
    hash: 'f'.repeat(64),
    provider: 'file',
    masterkey: null,
    stickySessions: null,
    toHttps: false,
    rateLimit: null,
    authorization: null,
    requestHeaders: null,
    responseHeaders: null,
    authFailureLimit: null,
    maxBodyBytes: null,
    hosts,
    ...extra,
  };
}
const endpoints = () => [];

/** What a full comparison of the two tables gives: routes that left and arrived, as objects. */
function difference(next: RoutingTable, previous: RoutingTable) {
  const before = new Set(previous.routes);
  const after = new Set(next.routes);
  return {
    gone: previous.routes.filter((route) => !after.has(route)),
    arrived: next.routes.filter((route) => !before.has(route)),
  };
}

const kept = host('kept.test', path('/', ['10.0.0.1:80']), path('/b', ['10.0.0.2:80']));
const first = config([kept, host('swap.test', path('/', ['10.0.1.1:80']), path('/x', ['10.0.0.1:80']))]);
/** `swap.test/` again, a new path object with the same prefix and another server. */
const replaced = (servers: string[], extra: Partial<PathFields> = {}) =>
  config([kept, host('swap.test', path('/', servers, extra), first.hosts[1]?.paths[1] as PathConfig)]);

describe('table changes recorded by compile', () => {
  it('are the difference of the routes, for an edit, a same-shaped replacement and an endpoint change', () => {
    const t0 = compileRoutingTable(first, endpoints);
    const t1 = compileRoutingTable(replaced(['10.0.2.2:80']), endpoints, t0);
    const change = changeFrom(t1, t0);
    assert.ok(change !== null);
    assert.deepEqual({ gone: change.gone, arrived: change.arrived }, difference(t1, t0));
    assert.equal(change.gone.length, 1);
    assert.equal(change.arrived[0]?.id, 'swap.test/', 'the same id, a new object');
    assert.equal(change.arrived[0]?.servers[0]?.address, '10.0.2.2:80');

    const ref = { name: 'web', namespace: 'apps', port: 'http' as const };
    const withService = config([...first.hosts, host('svc.test', path('/', [], { service: ref }))]);
    const s0 = compileRoutingTable(withService, () => [address('10.5.0.1:80')]);
    const s1 = recompileServers(s0, withService, () => [address('10.5.0.2:80')], {
      keys: new Set(['web']),
      keyOf: (service) => service.name,
    });
    assert.ok(s1 !== null);
    const moved = changeFrom(s1, s0);
    assert.ok(moved !== null);
    assert.deepEqual({ gone: moved.gone, arrived: moved.arrived }, difference(s1, s0));
    assert.equal(moved.arrived.length, 1);
  });

  it('are not told for a table made from another one, or compiled from scratch', () => {
    const t0 = compileRoutingTable(first, endpoints);
    const t1 = compileRoutingTable(replaced(['10.0.2.2:80']), endpoints, t0);
    const t2 = compileRoutingTable(replaced(['10.0.2.3:80']), endpoints, t1);
    assert.equal(changeFrom(t2, t0), null, 'a follower that missed t1 compares whole');
    assert.equal(changeFrom(compileRoutingTable(first, endpoints), t2), null);
    assert.notEqual(
      changeFrom(compileRoutingTable(first, endpoints, t2), t2),
      null,
      'a compile from t2 is told',
    );
    // Another config-wide setting: nothing is kept, so nothing is told.
    assert.equal(changeFrom(compileRoutingTable({ ...first, toHttps: true }, endpoints, t2), t2), null);
  });
});

describe('the server index handed from table to table', () => {
  it('gives one server object per address to every route, across many edits, and the servers (and count) of a full compile', () => {
    let table = compileRoutingTable(first, endpoints);
    for (let edit = 0; edit < 200; edit++) {
      // Addresses come, go and come back: an index kept from older tables must not give a second object.
      const servers = [`10.7.0.${edit % 7}:80`, '10.0.0.1:80'];
      const next = replaced(servers);
      table = compileRoutingTable(next, endpoints, table);
      const byAddress = new Map<string, unknown>();
      for (const route of table.routes)
        for (const server of route.servers) {
          const seen = byAddress.get(server.address);
          assert.ok(seen === undefined || seen === server, `one object for ${server.address}`);
          byAddress.set(server.address, server);
        }
      // Counted from the change before the list is made (the rebuild's log line), then listed.
      assert.equal(serverCount(table), compileRoutingTable(next, endpoints).servers.length);
      assert.deepEqual(
        table.servers.map((server) => server.poolKey),
        compileRoutingTable(next, endpoints).servers.map((server) => server.poolKey),
      );
    }
  });
});

describe('swap listeners follow a replaced route', () => {
  const timeouts = {
    upstreamConnectMs: 5_000,
    upstreamResponseHeadersMs: 5_000,
    clientKeepAliveMs: 5_000,
    clientHeadersMs: 5_000,
    clientFirstByteMs: 5_000,
    clientBodyIdleMs: 5_000,
    clientSendMs: 5_000,
  };
  const limits = {
    maxConnectionsPerServer: 4,
    maxConnectionsPerRoute: 3,
    queueSize: 1,
    queueTimeoutMs: 1_000,
  };

  it("health: the new object's server gets its gauge, the one that left loses it", async () => {
    const gauge = async (route: string, server: string) =>
      (await registry.getSingleMetric('tollgate_upstream_up')?.get())?.values.find(
        (value) => value.labels.route === route && value.labels.server === server,
      )?.value;
    const health = createServerHealth({ logger: createLogger('error', { write: () => {} }) });
    const t0 = compileRoutingTable(first, endpoints);
    health.sync(t0);
    assert.equal(await gauge('swap.test/', '10.0.1.1:80'), 1);
    const t1 = compileRoutingTable(replaced(['10.0.3.1:80']), endpoints, t0);
    health.sync(t1);
    assert.equal(await gauge('swap.test/', '10.0.3.1:80'), 1);
    assert.equal(await gauge('swap.test/', '10.0.1.1:80'), undefined);
    assert.equal(await gauge('kept.test/', '10.0.0.1:80'), 1, 'a kept route keeps its gauge');
    await health.close();
  });

  it("pools: the pool and slots of the server the replaced route left are closed; a shared one's stay", async () => {
    const pools = new UpstreamPools({ timeouts, limits });
    const t0 = compileRoutingTable(first, endpoints);
    pools.retainOnly(t0);
    const [left, shared] = [t0.routes[2]?.servers[0], t0.routes[3]?.servers[0]];
    assert.ok(left !== undefined && shared !== undefined);
    pools.get(left);
    pools.get(shared);
    const slots = pools.slots(left);
    const t1 = compileRoutingTable(replaced(['10.0.4.1:80']), endpoints, t0);
    pools.retainOnly(t1);
    assert.equal(
      pools.size,
      1,
      "10.0.0.1 is still named by kept.test/ and swap.test/x; 10.0.1.1's pool went",
    );
    assert.notEqual(pools.slots(left), slots, 'the slots of the server that left went too');
    // A request on the older table made a pool for the server that left since: the next swap closes it.
    pools.get(left);
    const t2 = compileRoutingTable(replaced(['10.0.4.2:80']), endpoints, t1);
    pools.retainOnly(t2);
    assert.equal(pools.size, 1);
    await pools.close();
  });

  it('the verify: false warning: a replaced route that stops checking is named, once', () => {
    const lines: string[] = [];
    const logUnverified = unverifiedUpstreamsLog(createLogger('warn', { write: (line) => lines.push(line) }));
    const t0 = compileRoutingTable(first, endpoints);
    logUnverified(t0);
    const upstreamTls = {
      caFile: null,
      serverName: null,
      certificateFile: null,
      keyFile: null,
      verify: false,
    };
    const t1 = compileRoutingTable(replaced(['https://10.0.5.1:443'], { upstreamTls }), endpoints, t0);
    logUnverified(t1);
    assert.equal(lines.length, 1);
    assert.deepEqual(JSON.parse(lines[0] as string).routes, ['swap.test/']);
    // The same set of routes again (a new swap.test/ object): nothing new is logged.
    const c2 = replaced(['https://10.0.5.1:443'], { upstreamTls });
    const t2 = compileRoutingTable(c2, endpoints, t1);
    logUnverified(t2);
    // An edit elsewhere, the unverified route kept as it was: nothing is logged either.
    const t3 = compileRoutingTable(
      config([host('kept.test', path('/', ['10.0.0.1:80'])), c2.hosts[1] as HostConfig]),
      endpoints,
      t2,
    );
    assert.equal(t3.routes[1], t2.routes[2], 'swap.test/ kept');
    logUnverified(t3);
    assert.equal(lines.length, 1);
    // swap.test/ replaced by a new object that checks its certificate again: the set is empty now,
    // and one that stops checking again is named again.
    const t4 = compileRoutingTable(replaced(['https://10.0.5.1:443']), endpoints, t3);
    logUnverified(t4);
    logUnverified(compileRoutingTable(replaced(['https://10.0.5.1:443'], { upstreamTls }), endpoints, t4));
    assert.equal(lines.length, 2);
  });

  it('the response cache drops the store of a route replaced by one without a cache', () => {
    const cache = new ResponseCache({ globalMaxBytes: null, forward: (() => {}) as never });
    const policies = { cache: { maxBytes: 1_000_000, maxObjectBytes: 100_000, defaultTtlSeconds: 60 } };
    const t0 = compileRoutingTable(replaced(['10.0.6.1:80'], { policies }), endpoints);
    cache.retainOnly(t0);
    const dropped: string[] = [];
    const store = cache.store as unknown as { retainOnly(cached: ReadonlyMap<string, unknown>): void };
    const retain = store.retainOnly.bind(store);
    store.retainOnly = (cached) => {
      dropped.push([...cached.keys()].join(','));
      retain(cached);
    };
    const t1 = compileRoutingTable(replaced(['10.0.6.1:80']), endpoints, t0);
    cache.retainOnly(t1);
    assert.deepEqual(dropped, [''], 'swap.test/ has no cache any more');
  });
});
