import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { type PathFields, pathConfig } from '../../src/config/path-config.ts';
import type {
  AuthorizationConfig,
  HostConfig,
  PathConfig,
  ServerAddress,
  UpstreamsConfig,
} from '../../src/config/types.ts';
import { compileRoutingTable, recompileServers } from '../../src/routing/compile.ts';
import {
  normaliseHost,
  normaliseHostKey,
  normalisePrefix,
  normaliseTarget,
} from '../../src/routing/normalise.ts';
import type { RoutingTable } from '../../src/routing/types.ts';

// Fixtures are built as validated-config objects directly: these tests exercise compile, not parsing.
// Host keys and prefixes go through the same normalisers validation uses, as a validated config's do.

function routingForm(normalised: { ok: true; value: string } | { ok: false; reason: string }): string {
  assert.ok(normalised.ok, `fixture key should be valid: ${normalised.ok ? '' : normalised.reason}`);
  return normalised.value;
}

function address(raw: string): ServerAddress {
  const bracketed = raw.match(/^\[(.+)\]:(\d+)$/);
  if (bracketed) return { raw, host: bracketed[1] as string, port: Number(bracketed[2]) };
  const colon = raw.lastIndexOf(':');
  return { raw, host: raw.slice(0, colon), port: Number(raw.slice(colon + 1)) };
}

function path(prefix: string, servers: string[], extra: Partial<PathFields> = {}): PathConfig {
  return pathConfig(routingForm(normalisePrefix(prefix)), { servers: servers.map(address), ...extra });
}

function host(name: string, ...paths: PathConfig[]): HostConfig {
  return { name: routingForm(normaliseHostKey(name)), paths };
}

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

const basicAuth: AuthorizationConfig = {
  type: 'basic',
  users: [{ username: 'alice', password: 'secret', passwordHash: null }],
  keys: [],
};
const apiKeyAuth: AuthorizationConfig = {
  type: 'apikey',
  users: [],
  keys: [{ name: 'apikey', key: 'k-123' }],
};
const jwtAuth: AuthorizationConfig = { type: 'jwt', users: [], keys: [] };

/** Matches a raw Host header and request target the way the proxy does. */
function routeOf(table: RoutingTable, hostHeader: string, target: string): string | null {
  const normalisedHost = normaliseHost(hostHeader);
  const normalisedTarget = normaliseTarget(target);
  assert.ok(normalisedHost !== null && normalisedTarget.ok, `${hostHeader} ${target} should normalise`);
  return table.match(normalisedHost, normalisedTarget.path)?.id ?? null;
}

describe('compileRoutingTable: matching', () => {
  const table = compileRoutingTable(
    config([
      host(
        'api.example.com',
        path('/', ['10.0.0.1:80']),
        path('/foo', ['10.0.0.2:80']),
        path('/foo/bar', ['10.0.0.3:80']),
        path('/v1/', ['10.0.0.4:80']),
        path('/foo/bar/baz/qux', ['10.0.0.5:80']),
      ),
      host('static.example.com', path('/assets', ['10.0.1.1:80'])),
      host('DEFAULT', path('/', ['10.0.9.9:80']), path('/health', ['10.0.9.8:80'])),
    ]),
  );

  const cases: [string, string, string | null][] = [
    // longest prefix on segment boundaries
    ['api.example.com', '/foo', 'api.example.com/foo'],
    ['api.example.com', '/foo/', 'api.example.com/foo'],
    ['api.example.com', '/foo/x', 'api.example.com/foo'],
    ['api.example.com', '/foobar', 'api.example.com/'],
    ['api.example.com', '/foo.txt', 'api.example.com/'],
    ['api.example.com', '/foo/bar', 'api.example.com/foo/bar'],
    ['api.example.com', '/foo/bar/', 'api.example.com/foo/bar'],
    ['api.example.com', '/foo/barn', 'api.example.com/foo'],
    ['api.example.com', '/foo/bar/baz', 'api.example.com/foo/bar'],
    ['api.example.com', '/foo/bar/baz/qux/1', 'api.example.com/foo/bar/baz/qux'],
    ['api.example.com', '/v1', 'api.example.com/v1'],
    ['api.example.com', '/v1/users', 'api.example.com/v1'],
    ['api.example.com', '/v10', 'api.example.com/'],
    ['api.example.com', '/', 'api.example.com/'],
    ['api.example.com', '/anything/else', 'api.example.com/'],
    // the request is normalised before matching: hostile paths land where the upstream would serve
    ['api.example.com', '/foo/../v1/x', 'api.example.com/v1'],
    ['api.example.com', '/v1/../foo', 'api.example.com/foo'],
    ['api.example.com', '//foo//bar', 'api.example.com/foo/bar'],
    ['api.example.com', '/%66oo/bar', 'api.example.com/foo/bar'],
    ['api.example.com', '/foo/%2e%2e/v1', 'api.example.com/v1'],
    ['api.example.com', '/foo?x=/foo/bar', 'api.example.com/foo'],
    // host normalisation before matching
    ['API.Example.COM:8443', '/foo', 'api.example.com/foo'],
    ['api.example.com.', '/foo', 'api.example.com/foo'],
    // a configured host without a matching prefix does NOT fall back to DEFAULT
    ['static.example.com', '/assets/app.js', 'static.example.com/assets'],
    ['static.example.com', '/assets', 'static.example.com/assets'],
    ['static.example.com', '/', null],
    ['static.example.com', '/assetsx', null],
    ['static.example.com', '/health', null],
    // unknown hosts go to DEFAULT, with its own longest-prefix match
    ['other.example.com', '/x', 'DEFAULT/'],
    ['other.example.com', '/health', 'DEFAULT/health'],
    ['other.example.com', '/healthz', 'DEFAULT/'],
    ['default', '/health', 'DEFAULT/health'],
    ['[::1]:8080', '/', 'DEFAULT/'],
    ['127.0.0.1', '/', 'DEFAULT/'],
  ];
  for (const [hostHeader, target, expected] of cases) {
    it(`${hostHeader} ${target} → ${expected}`, () => {
      assert.equal(routeOf(table, hostHeader, target), expected);
    });
  }

  it('without DEFAULT an unknown host matches nothing', () => {
    const noDefault = compileRoutingTable(config([host('a.example', path('/', ['10.0.0.1:80']))]));
    assert.equal(noDefault.match('b.example', '/'), null);
    assert.equal(noDefault.match('a.example', '/x')?.id, 'a.example/');
  });

  it('a host without a root prefix answers nothing outside its prefixes', () => {
    const only = compileRoutingTable(config([host('DEFAULT', path('/api', ['10.0.0.1:80']))]));
    assert.equal(only.match('x', '/api/v2')?.id, 'DEFAULT/api');
    assert.equal(only.match('x', '/'), null);
    assert.equal(only.match('x', '/ap'), null);
  });

  it('an empty config matches nothing', () => {
    const empty = compileRoutingTable(config([]));
    assert.equal(empty.match('a', '/'), null);
    assert.deepEqual(empty.routes, []);
    assert.deepEqual(empty.servers, []);
  });
});

describe('compileRoutingTable: routes', () => {
  it('has one route per (host, path), in config order, with the source hash for change detection', () => {
    const table = compileRoutingTable(
      config(
        [
          host('api.example.com', path('/v1', ['10.0.0.1:80']), path('/', ['10.0.0.2:80'])),
          host('DEFAULT', path('/', ['10.0.0.3:80'])),
        ],
        { hash: 'abc123' },
      ),
    );
    assert.deepEqual(
      table.routes.map((r) => [r.id, r.hostKey, r.prefix]),
      [
        ['api.example.com/v1', 'api.example.com', '/v1'],
        ['api.example.com/', 'api.example.com', '/'],
        ['DEFAULT/', 'DEFAULT', '/'],
      ],
    );
    assert.equal(table.sourceHash, 'abc123');
    assert.notEqual(table.hash, 'abc123');
  });

  const prefixes: [string, string][] = [
    ['/', '/'],
    ['/v1', '/v1'],
    ['/v1/', '/v1'],
    ['/v1//', '/v1'],
    ['//v1', '/v1'],
    ['/a/./b/../c', '/a/c'],
    ['/%76%31', '/v1'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/café', '/caf%C3%A9'],
    ['/my docs', '/my%20docs'],
    ['/..', '/'],
  ];
  for (const [configured, normalised] of prefixes) {
    it(`prefix ${JSON.stringify(configured)} is normalised to ${JSON.stringify(normalised)}`, () => {
      const table = compileRoutingTable(config([host('h', path(configured, ['10.0.0.1:80']))]));
      assert.equal(table.routes[0]?.prefix, normalised);
      assert.equal(table.routes[0]?.id, `h${normalised}`);
    });
  }

  it('a UTF-8 prefix matches the UTF-8 percent-encoded request path a client sends', () => {
    const table = compileRoutingTable(config([host('h', path('/café', ['10.0.0.1:80']))]));
    assert.equal(routeOf(table, 'h', `/${encodeURIComponent('café')}/menu`), 'h/caf%C3%A9');
    assert.equal(routeOf(table, 'h', '/caf%c3%a9'), 'h/caf%C3%A9');
  });

  it('host keys are normalised like Host headers', () => {
    const table = compileRoutingTable(
      config([
        host('API.Example.com.', path('/', ['10.0.0.1:80'])),
        host('::1', path('/', ['10.0.0.1:80'])),
        host('[2001:DB8::2]', path('/', ['10.0.0.1:80'])),
      ]),
    );
    assert.deepEqual(
      table.routes.map((r) => r.hostKey),
      ['api.example.com', '::1', '2001:db8::2'],
    );
    assert.equal(routeOf(table, 'api.example.com:80', '/'), 'api.example.com/');
    assert.equal(routeOf(table, '[::1]:8080', '/'), '::1/');
    assert.equal(routeOf(table, '[2001:db8::2]', '/'), '2001:db8::2/');
  });

  const refusedKeys: [string, () => unknown][] = [
    ['a host key that is not a host', () => normaliseHostKey('a b')],
    ['a host key with more than one trailing dot', () => normaliseHostKey('localhost..')],
    ['a host key with a port', () => normaliseHostKey('[::1]:80')],
    ['a prefix with a query', () => normalisePrefix('/v1?x=1')],
    ['a prefix with an encoded slash', () => normalisePrefix('/a%2Fb')],
    ['a prefix that is not a path', () => normalisePrefix('v1')],
    ['a prefix with a lone surrogate', () => normalisePrefix('/\ud800')],
  ];
  for (const [what, normalise] of refusedKeys) {
    it(`the normalisers refuse ${what} (validation reports it; compile never sees it)`, () => {
      assert.equal((normalise() as { ok: boolean }).ok, false);
    });
  }

  it('IPv6 host keys in any spelling match the canonical Host header, and mapped IPv4 matches IPv4', () => {
    const table = compileRoutingTable(
      config([
        host('0:0:0:0:0:0:0:1', path('/', ['10.0.0.1:80'])),
        host('[::ffff:127.0.0.1]', path('/', ['10.0.0.2:80'])),
        host('DEFAULT', path('/', ['10.0.0.3:80'])),
      ]),
    );
    assert.deepEqual(
      table.routes.map((r) => r.hostKey),
      ['::1', '127.0.0.1', 'DEFAULT'],
    );
    for (const header of ['[::1]', '[0::1]:80', '[0:0:0:0:0:0:0:1]']) {
      assert.equal(routeOf(table, header, '/'), '::1/', header);
    }
    for (const header of ['127.0.0.1', '[::ffff:127.0.0.1]:8080', '[::ffff:7f00:1]']) {
      assert.equal(routeOf(table, header, '/'), '127.0.0.1/', header);
    }
    assert.equal(normaliseHost('localhost..'), null, 'two trailing dots are a 400, not DEFAULT');
  });
});

describe('compileRoutingTable: effective policies', () => {
  const hosts = [
    host(
      'api.example.com',
      path('/basic', ['10.0.0.1:80'], { authorization: basicAuth, toHttps: true, rateLimit: 5 }),
      path('/key', ['10.0.0.1:80'], { authorization: apiKeyAuth }),
      path('/open', ['10.0.0.1:80']),
    ),
    host('DEFAULT', path('/', ['10.0.0.2:80'], { authorization: apiKeyAuth })),
  ];

  it('uses each path’s own auth when there is no global one', () => {
    const table = compileRoutingTable(config(hosts));
    assert.deepEqual(
      table.routes.map((r) => [r.id, r.auth?.type ?? null]),
      [
        ['api.example.com/basic', 'basic'],
        ['api.example.com/key', 'apikey'],
        ['api.example.com/open', null],
        ['DEFAULT/', 'apikey'],
      ],
    );
    assert.deepEqual(table.routes[0]?.auth, basicAuth);
  });

  it('a global authorization replaces the auth of every path of every host', () => {
    const table = compileRoutingTable(config(hosts, { authorization: jwtAuth }));
    assert.equal(table.routes.length, 4);
    for (const route of table.routes) assert.deepEqual(route.auth, jwtAuth, route.id);
    // one shared policy object, not a copy per route
    assert.equal(new Set(table.routes.map((r) => r.auth)).size, 1);
  });

  it('to_https: global true wins, else the path’s', () => {
    assert.deepEqual(
      compileRoutingTable(config(hosts)).routes.map((r) => r.toHttps),
      [true, false, false, false],
    );
    assert.deepEqual(
      compileRoutingTable(config(hosts, { toHttps: true })).routes.map((r) => r.toHttps),
      [true, true, true, true],
    );
  });

  it('rate_limit: the path’s, else the global, else unlimited', () => {
    assert.deepEqual(
      compileRoutingTable(config(hosts)).routes.map((r) => r.rateLimit),
      [5, null, null, null],
    );
    assert.deepEqual(
      compileRoutingTable(config(hosts, { rateLimit: 100 })).routes.map((r) => r.rateLimit),
      [5, 100, 100, 100],
    );
  });

  it('sticky sessions and health checks are carried to the routes', () => {
    const table = compileRoutingTable(
      config([host('h', path('/', ['10.0.0.1:80'], { healthCheck: { path: '/hc', intervalSeconds: 5 } }))], {
        stickySessions: { maxAgeSeconds: 3600 },
      }),
    );
    assert.deepEqual(table.routes[0]?.sticky, { maxAgeSeconds: 3600 });
    assert.deepEqual(table.routes[0]?.healthCheck, { path: '/hc', intervalSeconds: 5 });
    assert.equal(compileRoutingTable(config(hosts)).routes[0]?.sticky, null);
  });
});

describe('compileRoutingTable: immutability', () => {
  const source = config(
    [
      host(
        'h',
        path('/', ['10.0.0.1:80'], {
          authorization: basicAuth,
          healthCheck: { path: '/', intervalSeconds: 1 },
        }),
      ),
    ],
    { stickySessions: { maxAgeSeconds: null } },
  );
  const table = compileRoutingTable(source);
  const identity = table.hash;
  const route = table.routes[0];
  assert.ok(route);
  // Every target must exist: writing to undefined would throw a TypeError too and hide a failure.
  const { auth, sticky, healthCheck } = route;
  const server = route.servers[0];
  const user = auth?.users[0];
  assert.ok(auth && sticky && healthCheck && server && user);

  // Test files are ES modules, so strict mode: writes to frozen objects throw.
  const mutations: [string, () => void][] = [
    ['table.hash', () => Object.assign(table, { hash: 'x' })],
    ['table.match', () => Object.assign(table, { match: () => null })],
    ['table.routes (push)', () => (table.routes as unknown[]).push(route)],
    ['table.routes[0]', () => Object.assign(table.routes, { 0: route })],
    ['table.servers (push)', () => (table.servers as unknown[]).push(server)],
    ['route.prefix', () => Object.assign(route, { prefix: '/admin' })],
    ['route.auth', () => Object.assign(route, { auth: null })],
    ['route.servers (push)', () => (route.servers as unknown[]).push(server)],
    ['route.servers (splice)', () => (route.servers as unknown[]).splice(0, 1)],
    ['server.origin', () => Object.assign(server, { origin: 'http://evil:80' })],
    ['auth.type', () => Object.assign(auth, { type: 'jwt' })],
    ['auth.users (push)', () => (auth.users as unknown[]).push({})],
    ['auth user password', () => Object.assign(user, { password: 'x' })],
    ['sticky', () => Object.assign(sticky, { maxAgeSeconds: 1 })],
    ['healthCheck', () => Object.assign(healthCheck, { path: '/x' })],
  ];
  for (const [what, mutate] of mutations) {
    it(`${what} cannot be changed`, () => {
      assert.throws(mutate, TypeError);
    });
  }

  it('the table is unchanged after the attempts', () => {
    assert.equal(table.hash, identity);
    assert.equal(table.sourceHash, 'f'.repeat(64));
    assert.equal(table.routes.length, 1);
    assert.equal(route.prefix, '/');
    assert.equal(route.servers.length, 1);
    assert.equal(route.servers[0]?.origin, 'http://10.0.0.1:80');
    assert.deepEqual(route.auth, basicAuth);
  });

  it('leaves the caller’s config objects unfrozen and unchanged', () => {
    assert.equal(Object.isFrozen(source), false);
    assert.equal(Object.isFrozen(basicAuth), false);
    assert.equal(Object.isFrozen(basicAuth.users[0]), false);
    assert.equal(source.hosts[0]?.paths[0]?.prefix, '/');
  });

  it('a later change to the config does not reach a compiled table', () => {
    const auth: AuthorizationConfig = { type: 'apikey', users: [], keys: [{ name: 'k', key: 'old' }] };
    const compiled = compileRoutingTable(
      config([host('h', path('/', ['1.1.1.1:1'], { authorization: auth }))]),
    );
    (auth.keys[0] as { key: string }).key = 'new';
    assert.equal(compiled.routes[0]?.auth?.keys[0]?.key, 'old');
  });
});

describe('compileRoutingTable: upstream servers', () => {
  const table = compileRoutingTable(
    config([
      host('a.example', path('/', ['10.0.0.1:8080', '10.0.0.2:8080']), path('/x', ['10.0.0.2:8080'])),
      host('b.example', path('/', ['10.0.0.1:8080', '[::1]:9000', 'backend.svc:80'])),
    ]),
  );
  const byAddress = (addr: string) => table.servers.find((s) => s.address === addr);

  it('the same address on several routes is one shared frozen object', () => {
    const [aRoot, aX, bRoot] = table.routes;
    assert.ok(aRoot && aX && bRoot);
    assert.equal(aRoot.servers[1], aX.servers[0]);
    assert.equal(aRoot.servers[0], bRoot.servers[0]);
    assert.ok(Object.isFrozen(aRoot.servers[0]));
  });

  it('table.servers lists each distinct server once, in first-seen order', () => {
    assert.deepEqual(
      table.servers.map((s) => s.address),
      ['10.0.0.1:8080', '10.0.0.2:8080', '[::1]:9000', 'backend.svc:80'],
    );
    for (const route of table.routes) {
      for (const server of route.servers) assert.ok(table.servers.includes(server));
    }
  });

  it('origins are http://host:port with IPv6 bracketed', () => {
    assert.equal(byAddress('10.0.0.1:8080')?.origin, 'http://10.0.0.1:8080');
    assert.equal(byAddress('[::1]:9000')?.origin, 'http://[::1]:9000');
    assert.equal(byAddress('backend.svc:80')?.origin, 'http://backend.svc:80');
  });

  it('ids are the first 16 hex of sha256("tollgate-server:" + address), never the address', () => {
    for (const server of table.servers) {
      const expected = createHash('sha256')
        .update(`tollgate-server:${server.address}`)
        .digest('hex')
        .slice(0, 16);
      assert.equal(server.id, expected);
      assert.match(server.id, /^[0-9a-f]{16}$/);
      assert.ok(!server.id.includes(server.address));
    }
    assert.equal(new Set(table.servers.map((s) => s.id)).size, table.servers.length);
  });

  it('ids are stable across compilations (and so across replicas)', () => {
    const again = compileRoutingTable(
      config([host('other', path('/', ['backend.svc:80', '10.0.0.1:8080']))]),
    );
    assert.equal(again.servers[0]?.id, byAddress('backend.svc:80')?.id);
    assert.equal(again.servers[1]?.id, byAddress('10.0.0.1:8080')?.id);
    // a pinned value, so an accidental change to the derivation (which would break sticky cookies
    // across an upgrade) fails here
    assert.equal(again.servers[1]?.id, '81cf7ef9db205d1f');
  });
});

describe("recompileServers: an endpoint change touches only its Services' routes", () => {
  const ref = (name: string) => ({ name, namespace: 'apps', port: 'http' as const });
  const canary = {
    service: ref('web-canary'),
    origin: 'ingress/apps/web-canary',
    weight: 20,
    weightTotal: 100,
    header: null,
    headerValue: null,
    cookie: null,
  };
  const source = config([
    host('a.test', path('/', [], { service: ref('web') }), path('/static', ['10.0.0.9:80'])),
    host('b.test', path('/', [], { service: ref('api'), canary }), path('/web', [], { service: ref('web') })),
    // A Gateway API RequestMirror: its Service's endpoints are the mirror's servers.
    host(
      'c.test',
      path('/', [], { service: ref('other'), mirrors: [{ service: ref('mirror'), share: 0.5 }] }),
    ),
  ]);
  const before = new Map<string, string[]>([
    ['web', ['10.1.0.1:8080', '10.1.0.2:8080']],
    ['api', ['10.2.0.1:8080']],
    ['web-canary', ['10.3.0.1:8080']],
    ['other', ['10.0.0.9:80']],
    ['mirror', ['10.4.0.1:8080']],
  ]);
  const lookup = (servers: Map<string, string[]>) => (service: { name: string }) =>
    (servers.get(service.name) ?? []).map(address);
  /** What a request-time reader sees of a table: every field of every route, servers by address. */
  const shape = (table: RoutingTable) =>
    JSON.stringify({
      hash: table.hash,
      servers: table.servers.map((server) => server.poolKey),
      routes: table.routes.map((route) => ({ ...route, servers: route.servers.map((s) => s.poolKey) })),
    });

  for (const changedService of ['web', 'web-canary', 'other', 'mirror']) {
    it(`equals a full compile when ${changedService} changed, and keeps every other route as it was`, () => {
      const previous = compileRoutingTable(source, lookup(before));
      const after = new Map(before);
      after.set(changedService, ['10.9.0.1:8080', '10.0.0.9:80']);
      const next = recompileServers(previous, source, lookup(after), {
        keys: new Set([changedService]),
        keyOf: (service) => service.name,
      });
      assert.ok(next !== null);
      assert.equal(shape(next), shape(compileRoutingTable(source, lookup(after))));
      for (const [index, route] of next.routes.entries()) {
        const touched =
          route.service === `${changedService}.apps:http` ||
          (changedService === 'web-canary' && route.hostKey === 'b.test' && route.prefix === '/') ||
          (changedService === 'mirror' && route.hostKey === 'c.test');
        assert.equal(route === previous.routes[index], !touched, `${route.id} kept: ${!touched}`);
      }
      // A server another route already had stays one object (one connection pool).
      const shared = next.servers.filter((server) => server.address === '10.0.0.9:80');
      assert.equal(shared.length, 1);
      assert.equal(routeOf(next, 'b.test', '/x'), 'b.test/');
      // The mirror's servers are the table's too (their pools are kept), and follow its endpoints.
      const mirror = next.routes.find((route) => route.hostKey === 'c.test')?.mirrors?.[0];
      assert.deepEqual(
        mirror?.servers.map((server) => server.address),
        changedService === 'mirror' ? ['10.9.0.1:8080', '10.0.0.9:80'] : ['10.4.0.1:8080'],
      );
      for (const server of mirror?.servers ?? []) assert.ok(next.servers.includes(server));
    });
  }

  it('refuses a table compiled from another config object: the caller compiles in full', () => {
    const previous = compileRoutingTable(source, lookup(before));
    assert.equal(
      recompileServers(previous, { ...source }, lookup(before), {
        keys: new Set(['web']),
        keyOf: (service) => service.name,
      }),
      null,
    );
  });
});

describe('compileRoutingTable with the previous table: unchanged paths keep their routes', () => {
  const ref = (name: string) => ({ name, namespace: 'apps', port: 'http' as const });
  const web = path('/', [], { service: ref('web') });
  const api = path('/api', [], { service: ref('api') });
  const fixed = path('/static', ['10.0.0.9:80']);
  // The provider answers the same array for a Service whose endpoints did not change.
  const answers = (servers: Record<string, string[]>) => {
    const frozen = new Map(
      Object.entries(servers).map(([name, list]) => [name, Object.freeze(list.map(address))]),
    );
    return (service: { name: string }) => frozen.get(service.name) ?? [];
  };
  const endpoints = answers({ web: ['10.1.0.1:8080'], api: ['10.2.0.1:8080', '10.0.0.9:80'] });
  const shape = (table: RoutingTable) =>
    JSON.stringify({
      servers: table.servers.map((server) => server.poolKey).sort(),
      routes: table.routes.map((route) => ({ ...route, servers: route.servers.map((s) => s.poolKey) })),
    });

  it('keeps the Route of every path object it compiled before, compiles the changed one, and equals a full compile', () => {
    const previous = compileRoutingTable(config([host('a.test', web, api, fixed)]), endpoints);
    const renamed = path('/web', [], { service: ref('web') });
    const next = config([host('a.test', renamed, api, fixed)]);
    const table = compileRoutingTable(next, endpoints, previous);
    assert.equal(shape(table), shape(compileRoutingTable(next, endpoints)));
    assert.notEqual(table.routes[0], previous.routes[0]);
    assert.equal(table.routes[1], previous.routes[1]);
    assert.equal(table.routes[2], previous.routes[2]);
    // A server a kept route and a new one both name stays one object (one connection pool).
    assert.equal(table.servers.filter((server) => server.address === '10.0.0.9:80').length, 1);
    assert.equal(routeOf(table, 'a.test', '/web/x'), 'a.test/web');
  });

  it("a Service's new endpoints (a new answer) compile its routes again, the others are kept", () => {
    const source = config([host('a.test', web, api, fixed)]);
    const previous = compileRoutingTable(source, endpoints);
    const newWeb = Object.freeze([address('10.1.0.7:8080')]);
    const moved = (service: { name: string }) => (service.name === 'web' ? newWeb : endpoints(service));
    const next = { ...source, hosts: [...source.hosts] };
    const table = compileRoutingTable(next, moved, previous);
    assert.equal(shape(table), shape(compileRoutingTable(next, moved)));
    assert.notEqual(table.routes[0], previous.routes[0]);
    assert.deepEqual(
      table.routes[0]?.servers.map((server) => server.address),
      ['10.1.0.7:8080'],
    );
    assert.equal(table.routes[1], previous.routes[1]);
    assert.ok(!table.servers.some((server) => server.address === '10.1.0.1:8080'));
  });

  it('a config-wide setting changed: no route is kept', () => {
    const source = config([host('a.test', web, api)]);
    const previous = compileRoutingTable(source, endpoints);
    const next = { ...source, toHttps: true };
    const table = compileRoutingTable(next, endpoints, previous);
    assert.equal(shape(table), shape(compileRoutingTable(next, endpoints)));
    assert.ok(table.routes.every((route, index) => route !== previous.routes[index] && route.toHttps));
  });

  it('a path moved to another host or given another id is compiled again', () => {
    const previous = compileRoutingTable(config([host('a.test', web)]), endpoints);
    const moved = compileRoutingTable(config([host('b.test', web)]), endpoints, previous);
    assert.notEqual(moved.routes[0], previous.routes[0]);
    assert.equal(moved.routes[0]?.hostKey, 'b.test');
    // The same path object twice on one host: the second is `#2`, never the first's route.
    const twice = compileRoutingTable(config([host('a.test', web, web)]), endpoints, previous);
    assert.deepEqual(
      twice.routes.map((route) => route.id),
      ['a.test/', 'a.test/#2'],
    );
  });
});
