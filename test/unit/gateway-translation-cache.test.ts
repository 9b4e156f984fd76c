import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Secret, V1Service } from '@kubernetes/client-node';
import fc from 'fast-check';
import type { PathConfig } from '../../src/config/types.ts';
import type { Gateway, HttpRoute, ReferenceGrant } from '../../src/sources/kubernetes/gateway/objects.ts';
import type { TollgatePolicy } from '../../src/sources/kubernetes/gateway/policy.ts';
import {
  type GatewayInput,
  type GatewayTranslation,
  translateGateways,
} from '../../src/sources/kubernetes/gateway/translate.ts';
import { GatewayTranslationCache } from '../../src/sources/kubernetes/gateway/translation-cache.ts';
import type { AgedClaim } from '../../src/sources/kubernetes/ownership.ts';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';
import { selfSigned } from '../helpers/certs.ts';

/**
 * The Gateway source's translation cache (translation-cache.ts, docs/benchmark.md#control-plane-at-scale):
 * a translation with the cache is the translation from scratch, and an unchanged route keeps the very
 * PathConfig objects of the last translation while a route whose inputs changed gets new ones.
 *
 * Seeded: TOLLGATE_PROPERTY_SEED=<n> replays a run; TOLLGATE_PROPERTY_RUNS=<n> runs more cases.
 */

const SEED = Number(process.env.TOLLGATE_PROPERTY_SEED ?? 38_004);
const RUNS = Number(process.env.TOLLGATE_PROPERTY_RUNS ?? 150);

const base64 = (text: string) => Buffer.from(text).toString('base64');
const time = (second: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString();
const CLASS = { metadata: { name: 'tollgate' }, spec: { controllerName: 'tollgate.io/gateway-controller' } };

const certificates = [selfSigned('secure.test'), selfSigned('secure.test')];
const tlsSecret = (which: number): V1Secret => ({
  metadata: { name: 'cert', namespace: 'apps', resourceVersion: `cert-${which}` },
  type: 'kubernetes.io/tls',
  data: {
    'tls.crt': (certificates[which] as { cert: Buffer }).cert.toString('base64'),
    'tls.key': (certificates[which] as { key: Buffer }).key.toString('base64'),
  },
});
const usersSecret = (password: string): V1Secret => ({
  metadata: { name: 'users', namespace: 'apps' },
  data: { auth: base64(`alice:${bcryptOf(password)}\n`) },
});
const service = (namespace: string, name: string, port: number, h2c = false): V1Service => ({
  metadata: { name, namespace },
  spec: { ports: [{ name: 'http', port, ...(h2c ? { appProtocol: 'kubernetes.io/h2c' } : {}) }] },
});
const grant = (toName?: string): ReferenceGrant => ({
  metadata: { name: 'routes-to-api', namespace: 'backends' },
  spec: {
    from: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', namespace: 'apps' }],
    to: [{ group: '', kind: 'Service', ...(toName === undefined ? {} : { name: toName }) }],
  },
});

function gateway(web: { hostname?: string; from?: 'All' | 'Same' | 'Selector' }): Gateway {
  return {
    metadata: { name: 'gw', namespace: 'apps', creationTimestamp: time(0), generation: 1 },
    spec: {
      gatewayClassName: 'tollgate',
      listeners: [
        {
          name: 'web',
          port: 80,
          protocol: 'HTTP',
          ...(web.hostname === undefined ? {} : { hostname: web.hostname }),
          allowedRoutes: {
            namespaces: {
              from: web.from ?? 'All',
              ...(web.from === 'Selector' ? { selector: { matchLabels: { team: 'a' } } } : {}),
            },
          },
        },
      ],
    },
  } as Gateway;
}

/** The TLS Gateway, apart: a route through it reads nothing of `gw`. */
const TLS_GATEWAY = {
  metadata: { name: 'gw-tls', namespace: 'apps', creationTimestamp: time(1), generation: 1 },
  spec: {
    gatewayClassName: 'tollgate',
    listeners: [
      {
        name: 'secure',
        port: 443,
        protocol: 'HTTPS',
        hostname: 'secure.test',
        tls: { certificateRefs: [{ name: 'cert' }] },
      },
    ],
  },
} as Gateway;

function route(
  name: string,
  host: string,
  backend: { name: string; namespace?: string; port: number },
  parent = 'gw',
  second = 0,
): HttpRoute {
  return {
    metadata: { name, namespace: 'apps', creationTimestamp: time(10 + second), generation: 1 },
    spec: {
      parentRefs: [{ name: parent }],
      hostnames: [host],
      rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/' } }], backendRefs: [backend] }],
    },
  } as HttpRoute;
}

const ROUTES = {
  local: route('r-local', 'a.test', { name: 'web', port: 80 }, 'gw', 1),
  cross: route('r-cross', 'b.test', { name: 'api', namespace: 'backends', port: 8080 }, 'gw', 2),
  other: route('r-other', 'c.test', { name: 'other', port: 80 }, 'gw', 3),
  policed: route('r-policed', 'p.test', { name: 'web', port: 80 }, 'gw', 4),
  secure: route('r-secure', 'secure.test', { name: 'web', port: 80 }, 'gw-tls', 5),
};

const policy = (target: { kind: string; name: string }, password = 'user'): TollgatePolicy => ({
  metadata: { name: `auth-${target.name}`, namespace: 'apps', creationTimestamp: time(0) },
  spec: {
    targetRefs: [{ group: 'gateway.networking.k8s.io', ...target }],
    authorization: {
      type: 'basic',
      basic: { secretRef: { name: password === 'user' ? 'users' : password } },
    },
  },
});

function baseInput(): GatewayInput {
  return {
    className: 'tollgate',
    classes: [CLASS],
    gateways: [gateway({ hostname: '*.test' }), TLS_GATEWAY],
    httpRoutes: Object.values(ROUTES),
    grpcRoutes: [],
    grants: [grant()],
    policies: [policy({ kind: 'HTTPRoute', name: 'r-policed' })],
    namespaces: new Map([
      ['apps', { team: 'a' }],
      ['backends', {}],
    ]),
    services: new Map([
      ['apps/web', service('apps', 'web', 80)],
      ['apps/other', service('apps', 'other', 80)],
      ['backends/api', service('backends', 'api', 8080)],
    ]),
    secrets: new Map([
      ['apps/cert', tlsSecret(0)],
      ['apps/users', usersSecret('wonderland')],
    ]),
    fileHosts: [],
    ingressClaims: [],
    addresses: null,
  };
}

/** Each served path of the translation, by the route that asked for it. */
function pathsByRoute(translation: GatewayTranslation): Map<string, PathConfig[]> {
  const byRoute = new Map<string, PathConfig[]>();
  for (const host of translation.hosts)
    for (const path of host.paths) {
      const route = String(path.origin);
      byRoute.set(route, [...(byRoute.get(route) ?? []), path]);
    }
  return byRoute;
}

/** With the cache after `before`, then `after`: each route's paths, and the check that the cached one is the fresh one. */
function edit(change: (input: GatewayInput) => GatewayInput) {
  const cache = new GatewayTranslationCache();
  const input = baseInput();
  const first = pathsByRoute(translateGateways(input, cache));
  const next = change(input);
  const cached = translateGateways(next, cache);
  assert.deepStrictEqual(cached, translateGateways(next), 'the cached translation is the one from scratch');
  const second = pathsByRoute(cached);
  /** The routes (`r-local`, …) whose served paths are not the very objects of the first translation. */
  const renewed = [...new Set([...first.keys(), ...second.keys()])]
    .filter((key) => {
      const a = first.get(key) ?? [];
      const b = second.get(key) ?? [];
      return a.length !== b.length || a.some((path, index) => path !== b[index]);
    })
    .map((key) => key.replace('httproute/apps/', ''))
    .sort();
  return { first, second, renewed };
}

const originOf = (name: string) => `httproute/apps/${name}`;

describe('gateway translation cache: a route keeps its paths until something it read changes', () => {
  it('translating twice with the same inputs gives the very same path and host objects', () => {
    const cache = new GatewayTranslationCache();
    const input = baseInput();
    const first = translateGateways(input, cache);
    const second = translateGateways({ ...input, httpRoutes: [...input.httpRoutes] }, cache);
    assert.deepStrictEqual(second, first);
    assert.ok(first.hosts.length >= 5);
    for (const [index, host] of first.hosts.entries()) {
      assert.equal(second.hosts[index], host, host.name);
      for (const [at, path] of host.paths.entries()) assert.equal(second.hosts[index]?.paths[at], path);
    }
    // An unchanged route's status is the same object too (status-memo.ts skips it by identity).
    const routeStatus = (t: GatewayTranslation) => t.statuses.find((item) => item.name === 'r-local');
    assert.equal(routeStatus(second), routeStatus(first));
  });

  it("a Service changed: only the routes forwarding to it get new paths, with the Service's new protocol", () => {
    const { second, renewed } = edit((input) => ({
      ...input,
      services: new Map([...input.services, ['apps/other', service('apps', 'other', 80, true)]]),
    }));
    assert.deepEqual(renewed, ['r-other']);
    assert.equal(second.get(originOf('r-other'))?.[0]?.upstreamProtocol, 'h2c');
  });

  it('a ReferenceGrant withdrawn: the cross-namespace route answers 500, the others keep their paths', () => {
    const { first, second, renewed } = edit((input) => ({ ...input, grants: [] }));
    assert.deepEqual(renewed, ['r-cross']);
    assert.equal(first.get(originOf('r-cross'))?.[0]?.backendError, null);
    assert.match(String(second.get(originOf('r-cross'))?.[0]?.backendError), /no ReferenceGrant/);
  });

  it('a ReferenceGrant narrowed to another Service name: the same', () => {
    const { renewed } = edit((input) => ({ ...input, grants: [grant('not-api')] }));
    assert.deepEqual(renewed, ['r-cross']);
  });

  it('a listener hostname changed: the routes through it follow, the route of the other Gateway keeps its paths', () => {
    const { second, renewed } = edit((input) => ({
      ...input,
      gateways: [gateway({ hostname: 'a.test' }), TLS_GATEWAY],
    }));
    // Only r-local's host meets the listener now: the others lose their paths.
    assert.deepEqual(renewed, ['r-cross', 'r-other', 'r-policed']);
    assert.ok(second.get(originOf('r-local')));
    assert.equal(second.get(originOf('r-other')), undefined);
  });

  it("a listener's allowedRoutes changed: the same answer by namespace labels, the paths kept when nothing they say changed", () => {
    // Selector team=a admits namespace apps as All did: what the routes read gives the same paths.
    const same = edit((input) => ({
      ...input,
      gateways: [gateway({ hostname: '*.test', from: 'Selector' }), TLS_GATEWAY],
    }));
    assert.deepEqual(same.renewed, []);
    // Then the namespace loses its label: every route through the listener is refused.
    const cache = new GatewayTranslationCache();
    const input = {
      ...baseInput(),
      gateways: [gateway({ hostname: '*.test', from: 'Selector' }), TLS_GATEWAY],
    };
    const before = translateGateways(input, cache);
    const next = { ...input, namespaces: new Map([...input.namespaces, ['apps', { team: 'b' }]]) };
    const after = translateGateways(next, cache);
    assert.deepStrictEqual(after, translateGateways(next));
    assert.deepEqual(
      after.hosts.map((host) => host.name),
      ['secure.test'],
    );
    assert.equal(
      after.hosts[0],
      before.hosts.find((host) => host.name === 'secure.test'),
    );
  });

  it("a Secret changed: the listener's certificate, or the policy's users, and nothing else", () => {
    const cert = edit((input) => ({
      ...input,
      secrets: new Map([...input.secrets, ['apps/cert', tlsSecret(1)]]),
    }));
    // The paths do not carry the certificate: they stay; the certificate served is the new one.
    assert.deepEqual(cert.renewed, []);
    const cache = new GatewayTranslationCache();
    const input = baseInput();
    translateGateways(input, cache);
    const next = { ...input, secrets: new Map([...input.secrets, ['apps/cert', tlsSecret(1)]]) };
    const after = translateGateways(next, cache);
    assert.equal(after.certificates[0]?.certificate, (certificates[1] as { cert: Buffer }).cert.toString());
    const users = edit((input) => ({
      ...input,
      secrets: new Map([...input.secrets, ['apps/users', usersSecret('builder')]]),
    }));
    assert.deepEqual(users.renewed, ['r-policed']);
    const removed = edit((input) => {
      const secrets = new Map(input.secrets);
      secrets.delete('apps/users');
      return { ...input, secrets };
    });
    assert.deepEqual(removed.renewed, ['r-policed']);
    assert.match(String(removed.second.get(originOf('r-policed'))?.[0]?.unavailable), /does not exist/);
  });

  it('a TollgatePolicy retargeted from a route to the Gateway: the routes it leaves and those it reaches', () => {
    const { second, renewed } = edit((input) => ({
      ...input,
      policies: [policy({ kind: 'Gateway', name: 'gw' })],
    }));
    // r-policed is still covered (through its Gateway), by another policy: its path is new as well.
    assert.deepEqual(renewed, ['r-cross', 'r-local', 'r-other', 'r-policed']);
    assert.equal(second.get(originOf('r-local'))?.[0]?.authorization?.type, 'basic');
    const gone = edit((input) => ({ ...input, policies: [] }));
    assert.deepEqual(gone.renewed, ['r-policed']);
    assert.equal(gone.second.get(originOf('r-policed'))?.[0]?.authorization, null);
  });

  it("the Ingresses' claims and upstreams.yaml's hosts: the route that loses its host, and no other", () => {
    const ingress: AgedClaim = { namespace: 'team-z', ingress: 'team-z/old', hosts: ['c.test'], created: 0 };
    const claimed = edit((input) => ({ ...input, ingressClaims: [ingress] }));
    assert.deepEqual(claimed.renewed, ['r-other']);
    assert.equal(claimed.second.get(originOf('r-other')), undefined);
    const filed = edit((input) => ({ ...input, fileHosts: ['b.test'] }));
    assert.deepEqual(filed.renewed, ['r-cross']);
  });

  it('a route edited, or an older route added: the others keep their path objects', () => {
    const edited = edit((input) => ({
      ...input,
      httpRoutes: input.httpRoutes.map((item) =>
        item === ROUTES.local ? route('r-local', 'a.test', { name: 'other', port: 80 }, 'gw', 1) : item,
      ),
    }));
    assert.deepEqual(edited.renewed, ['r-local']);
    // An older route moves every other one in age order: their entries are ranked again, same paths.
    const older = edit((input) => ({
      ...input,
      httpRoutes: [route('r-oldest', 'o.test', { name: 'web', port: 80 }, 'gw', -5), ...input.httpRoutes],
    }));
    assert.deepEqual(older.renewed, ['r-oldest']);
    // A route written again as it was (a status write: a new object, the same spec): the same paths.
    const rewritten = edit((input) => ({
      ...input,
      httpRoutes: input.httpRoutes.map((item) => structuredClone(item)),
    }));
    assert.deepEqual(rewritten.renewed, []);
  });

  it('a route written again with a new status only is not translated again: the same outcome and status objects', () => {
    const cache = new GatewayTranslationCache();
    const input = baseInput();
    const first = translateGateways(input, cache);
    const written = input.httpRoutes.map((item) => ({
      ...structuredClone(item),
      status: { parents: [] },
      metadata: { ...structuredClone(item.metadata), resourceVersion: 'after-status-write' },
    }));
    const second = translateGateways({ ...input, httpRoutes: written }, cache);
    assert.deepStrictEqual(second, translateGateways({ ...input, httpRoutes: written }));
    for (const [index, route] of first.routes.entries())
      assert.equal(second.routes[index], route, route.name);
    const statusOf = (t: GatewayTranslation) => t.statuses.find((item) => item.name === 'r-cross');
    assert.equal(statusOf(second), statusOf(first));
    // A new generation is a new spec as far as the cache knows: translated again.
    const bumped = written.map((item) =>
      item.metadata?.name === 'r-local' ? { ...item, metadata: { ...item.metadata, generation: 2 } } : item,
    );
    const third = translateGateways({ ...input, httpRoutes: bumped }, cache);
    assert.notEqual(
      third.routes.find((route) => route.name === 'r-local'),
      second.routes.find((route) => route.name === 'r-local'),
    );
    assert.deepStrictEqual(third, translateGateways({ ...input, httpRoutes: bumped }));
  });
});

// ---- the property: over sequences of edits, the cached translation is the translation from scratch ----

const NAMESPACES = ['apps', 'other'] as const;
const HOSTS = ['a.test', 'b.test', 'x.a.test'] as const;

const backendArb = fc.record({
  service: fc.constantFrom('web', 'api'),
  // Cross-namespace refs: allowed only through a ReferenceGrant.
  namespace: fc.option(fc.constantFrom('apps', 'backends'), { nil: undefined }),
  port: fc.constantFrom(80, 8080),
  weight: fc.option(fc.constantFrom(0, 1, 3), { nil: undefined }),
});
const ruleArb = fc.record({
  // Rules without names, mostly (the conformance manifests' shape).
  named: fc.boolean(),
  path: fc.constantFrom('/', '/admin', '/api'),
  exact: fc.boolean(),
  backends: fc.array(backendArb, { minLength: 0, maxLength: 3 }),
});
const routeArb = fc.record({
  namespace: fc.constantFrom(...NAMESPACES),
  hostnames: fc.subarray([...HOSTS]),
  parents: fc.array(
    fc.record({ gateway: fc.nat({ max: 1 }), section: fc.option(fc.nat({ max: 1 }), { nil: undefined }) }),
    { minLength: 1, maxLength: 2 },
  ),
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 2 }),
  created: fc.nat({ max: 5 }),
});
const listenerArb = fc.record({
  hostname: fc.option(fc.constantFrom('a.test', '*.test', '*.a.test'), { nil: undefined }),
  from: fc.constantFrom('Same', 'All', 'Selector'),
  https: fc.boolean(),
});
const policyArb = fc.record({
  target: fc.oneof(
    fc.record({ kind: fc.constant('Gateway' as const), index: fc.nat({ max: 1 }) }),
    fc.record({ kind: fc.constant('HTTPRoute' as const), index: fc.nat({ max: 3 }) }),
  ),
  secret: fc.constantFrom('users', 'missing'),
  rate: fc.nat({ max: 2 }),
  created: fc.nat({ max: 2 }),
});
const editArb = fc.oneof(
  fc.record({
    kind: fc.constant('route' as const),
    index: fc.nat({ max: 3 }),
    route: fc.option(routeArb, { nil: null }),
  }),
  // The same route written again (a status write): a new object, the same spec.
  fc.record({ kind: fc.constant('rewrite' as const), index: fc.nat({ max: 3 }) }),
  fc.record({
    kind: fc.constant('gateway' as const),
    index: fc.nat({ max: 1 }),
    listeners: fc.option(fc.array(listenerArb, { minLength: 1, maxLength: 2 }), { nil: null }),
  }),
  fc.record({
    kind: fc.constant('service' as const),
    name: fc.constantFrom('apps/web', 'apps/api', 'backends/api', 'other/web'),
    port: fc.option(fc.constantFrom(80, 8080), { nil: null }),
    h2c: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('grant' as const),
    to: fc.option(fc.constantFrom('api', 'web', ''), { nil: null }),
    from: fc.constantFrom('apps', 'other'),
  }),
  fc.record({
    kind: fc.constant('policy' as const),
    index: fc.nat({ max: 1 }),
    policy: fc.option(policyArb, { nil: null }),
  }),
  fc.record({
    kind: fc.constant('labels' as const),
    namespace: fc.constantFrom(...NAMESPACES),
    team: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('secret' as const), users: fc.constantFrom('p', 'x', null) }),
  fc.record({
    kind: fc.constant('claims' as const),
    hosts: fc.subarray([...HOSTS]),
    file: fc.subarray([...HOSTS]),
  }),
);
type Edit = typeof editArb extends fc.Arbitrary<infer T> ? T : never;
type RouteShape = typeof routeArb extends fc.Arbitrary<infer T> ? T : never;
type ListenerShape = typeof listenerArb extends fc.Arbitrary<infer T> ? T : never;
type PolicyShape = typeof policyArb extends fc.Arbitrary<infer T> ? T : never;

function routeOf(index: number, shape: RouteShape): HttpRoute {
  return {
    metadata: { name: `route-${index}`, namespace: shape.namespace, creationTimestamp: time(shape.created) },
    spec: {
      parentRefs: shape.parents.map((parent) => ({
        name: `gw-${parent.gateway}`,
        namespace: 'apps',
        ...(parent.section === undefined ? {} : { sectionName: `l-${parent.section}` }),
      })),
      ...(shape.hostnames.length === 0 ? {} : { hostnames: shape.hostnames }),
      rules: shape.rules.map((rule, j) => ({
        ...(rule.named ? { name: `rule-${j}` } : {}),
        matches: [{ path: { type: rule.exact ? 'Exact' : 'PathPrefix', value: rule.path } }],
        backendRefs: rule.backends.map((backend) => ({
          name: backend.service,
          port: backend.port,
          ...(backend.namespace === undefined ? {} : { namespace: backend.namespace }),
          ...(backend.weight === undefined ? {} : { weight: backend.weight }),
        })),
      })),
    },
  } as HttpRoute;
}

function gatewayOf(index: number, listeners: readonly ListenerShape[]): Gateway {
  return {
    metadata: { name: `gw-${index}`, namespace: 'apps', creationTimestamp: time(index), generation: 1 },
    spec: {
      gatewayClassName: 'tollgate',
      listeners: listeners.map((listener, l) => ({
        name: `l-${l}`,
        port: listener.https ? 443 : 80,
        protocol: listener.https ? 'HTTPS' : 'HTTP',
        ...(listener.hostname === undefined ? {} : { hostname: listener.hostname }),
        ...(listener.https ? { tls: { certificateRefs: [{ name: 'cert' }] } } : {}),
        allowedRoutes: {
          namespaces: {
            from: listener.from,
            ...(listener.from === 'Selector' ? { selector: { matchLabels: { team: 'a' } } } : {}),
          },
        },
      })),
    },
  } as Gateway;
}

function policyOf(index: number, shape: PolicyShape): TollgatePolicy {
  return {
    metadata: { name: `policy-${index}`, namespace: 'apps', creationTimestamp: time(shape.created) },
    spec: {
      targetRefs: [
        {
          group: 'gateway.networking.k8s.io',
          kind: shape.target.kind,
          name: shape.target.kind === 'Gateway' ? `gw-${shape.target.index}` : `route-${shape.target.index}`,
        },
      ],
      rate_limit: 10 + shape.rate,
      authorization: { type: 'basic', basic: { secretRef: { name: shape.secret } } },
    },
  };
}

/** The world an edit changes: objects replaced, never changed in place (as the watches do). */
interface World {
  routes: Array<HttpRoute | null>;
  gateways: Array<Gateway | null>;
  policies: Array<TollgatePolicy | null>;
  services: Map<string, V1Service>;
  grants: ReferenceGrant[];
  namespaces: Map<string, Record<string, string>>;
  secrets: Map<string, V1Secret>;
  ingressClaims: AgedClaim[];
  fileHosts: string[];
}

function startWorld(): World {
  return {
    routes: [
      routeOf(0, {
        namespace: 'apps',
        hostnames: ['a.test'],
        parents: [{ gateway: 0, section: undefined }],
        rules: [
          {
            named: false,
            path: '/',
            exact: false,
            backends: [{ service: 'web', namespace: undefined, port: 80, weight: undefined }],
          },
        ],
        created: 1,
      }),
      null,
      null,
      null,
    ],
    gateways: [
      gatewayOf(0, [{ hostname: '*.test', from: 'All', https: false }]),
      gatewayOf(1, [{ hostname: undefined, from: 'Same', https: true }]),
    ],
    policies: [null, null],
    services: new Map([
      ['apps/web', service('apps', 'web', 80)],
      ['backends/api', service('backends', 'api', 8080)],
    ]),
    grants: [],
    namespaces: new Map([
      ['apps', { team: 'a' }],
      ['other', {}],
      ['backends', {}],
    ]),
    secrets: new Map([
      ['apps/cert', tlsSecret(0)],
      ['apps/users', usersSecret('p')],
    ]),
    ingressClaims: [],
    fileHosts: [],
  };
}

function applyEdit(world: World, change: Edit): World {
  switch (change.kind) {
    case 'route': {
      const routes = [...world.routes];
      routes[change.index] = change.route === null ? null : routeOf(change.index, change.route);
      return { ...world, routes };
    }
    case 'rewrite': {
      const routes = [...world.routes];
      const before = routes[change.index];
      routes[change.index] = before ? structuredClone(before) : null;
      return { ...world, routes };
    }
    case 'gateway': {
      const gateways = [...world.gateways];
      gateways[change.index] = change.listeners === null ? null : gatewayOf(change.index, change.listeners);
      return { ...world, gateways };
    }
    case 'service': {
      const services = new Map(world.services);
      const [namespace, name] = change.name.split('/') as [string, string];
      if (change.port === null) services.delete(change.name);
      else services.set(change.name, service(namespace, name, change.port, change.h2c));
      return { ...world, services };
    }
    case 'grant': {
      if (change.to === null) return { ...world, grants: [] };
      const object = grant(change.to === '' ? undefined : change.to);
      (object.spec?.from ?? [])[0] = {
        group: 'gateway.networking.k8s.io',
        kind: 'HTTPRoute',
        namespace: change.from,
      };
      return { ...world, grants: [object] };
    }
    case 'policy': {
      const policies = [...world.policies];
      policies[change.index] = change.policy === null ? null : policyOf(change.index, change.policy);
      return { ...world, policies };
    }
    case 'labels': {
      const namespaces = new Map(world.namespaces);
      namespaces.set(change.namespace, change.team ? { team: 'a' } : {});
      return { ...world, namespaces };
    }
    case 'secret': {
      const secrets = new Map(world.secrets);
      if (change.users === null) secrets.delete('apps/users');
      else secrets.set('apps/users', usersSecret(change.users));
      return { ...world, secrets };
    }
    case 'claims':
      return {
        ...world,
        ingressClaims:
          change.hosts.length === 0
            ? []
            : [{ namespace: 'team-z', ingress: 'team-z/web', hosts: change.hosts, created: 0 }],
        fileHosts: change.file,
      };
  }
}

function inputOfWorld(world: World): GatewayInput {
  const present = <T>(items: ReadonlyArray<T | null>) => items.filter((item): item is T => item !== null);
  return {
    className: 'tollgate',
    classes: [CLASS],
    gateways: present(world.gateways),
    httpRoutes: present(world.routes),
    grpcRoutes: [],
    grants: world.grants,
    policies: present(world.policies),
    namespaces: world.namespaces,
    services: world.services,
    secrets: world.secrets,
    fileHosts: world.fileHosts,
    ingressClaims: world.ingressClaims,
    addresses: null,
  };
}

describe('gateway translation cache (property): with the cache, the translation from scratch', () => {
  it(`over generated sequences of edits, at every step (seed ${SEED}, ${RUNS} runs)`, () => {
    fc.assert(
      fc.property(fc.array(editArb, { minLength: 1, maxLength: 12 }), (edits) => {
        const cache = new GatewayTranslationCache();
        let world = startWorld();
        translateGateways(inputOfWorld(world), cache);
        for (const [step, change] of edits.entries()) {
          world = applyEdit(world, change);
          const input = inputOfWorld(world);
          const cached = translateGateways(input, cache);
          assert.deepStrictEqual(cached, translateGateways(input), `step ${step}: ${JSON.stringify(change)}`);
        }
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });
});
