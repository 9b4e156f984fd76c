import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Secret, V1Service } from '@kubernetes/client-node';
import type { UpstreamsConfig } from '../../src/config/types.ts';
import type { Gateway, GatewayClass, HttpRoute } from '../../src/sources/kubernetes/gateway/objects.ts';
import { type GatewayInput, translateGateways } from '../../src/sources/kubernetes/gateway/translate.ts';
import {
  byCreation,
  hostOwners,
  ownedHosts,
  withClaimedHosts,
} from '../../src/sources/kubernetes/ownership.ts';
import { selfSigned } from '../helpers/certs.ts';
import { gatewayClassObject, gatewayObject, httpRouteObject } from '../helpers/fake-gateway-api.ts';
import { secret, service } from '../helpers/fake-kube-api.ts';

const json = <T>(value: unknown): T =>
  structuredClone((value as { toJSON?: () => unknown }).toJSON?.() ?? value) as T;

const pair = selfSigned('secure.test');

/** A route of `namespace` created at `iso`, naming `hostnames` through `gw` (one listener, or both). */
function routeAt(
  iso: string,
  name: string,
  namespace: string,
  hostnames: string[],
  options: { sectionName?: string; filters?: Array<Record<string, unknown>> } = {},
): HttpRoute {
  const object = json<HttpRoute>(
    httpRouteObject({
      name,
      namespace,
      parentRefs: [
        {
          name: 'gw',
          namespace: 'team-a',
          ...(options.sectionName ? { sectionName: options.sectionName } : {}),
        },
      ],
      hostnames,
      rules: [
        {
          ...(options.filters ? { filters: options.filters } : {}),
          backendRefs: [{ name: 'app', port: 80 }],
        },
      ],
    }),
  );
  return { ...object, metadata: { ...object.metadata, creationTimestamp: iso } } as HttpRoute;
}

function gateway(listeners: Array<Record<string, unknown>>): Gateway {
  return json<Gateway>(gatewayObject({ name: 'gw', namespace: 'team-a', listeners }));
}

const LISTENERS = [
  { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
  {
    name: 'https',
    port: 443,
    protocol: 'HTTPS',
    hostname: 'secure.test',
    allowedRoutes: { namespaces: { from: 'All' } },
    tls: { certificateRefs: [{ name: 'secure-tls' }] },
  },
];

function input(routes: HttpRoute[], extra: Partial<GatewayInput> = {}): GatewayInput {
  const services = ['team-a', 'team-b'].map((namespace) =>
    json<V1Service>(
      service({ name: 'app', namespace, ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
    ),
  );
  const tls = json<V1Secret>(
    secret({
      name: 'secure-tls',
      namespace: 'team-a',
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': pair.cert.toString(), 'tls.key': pair.key.toString() },
    }),
  );
  return {
    className: 'tollgate',
    classes: [json<GatewayClass>(gatewayClassObject())],
    gateways: [gateway(LISTENERS)],
    httpRoutes: routes,
    grpcRoutes: [],
    grants: [],
    policies: [],
    namespaces: new Map([
      ['team-a', {}],
      ['team-b', {}],
    ]),
    services: new Map(services.map((item) => [`${item.metadata?.namespace}/${item.metadata?.name}`, item])),
    secrets: new Map([['team-a/secure-tls', tls]]),
    fileHosts: [],
    ingressClaims: [],
    addresses: null,
    ...extra,
  };
}

/** `host route` for every path served. */
const served = (result: ReturnType<typeof translateGateways>) =>
  result.hosts.flatMap((host) => host.paths.map((path) => `${host.name} ${path.origin}`));
const claimsOf = (result: ReturnType<typeof translateGateways>) =>
  Object.fromEntries((result.claims ?? []).map((claim) => [claim.ingress, claim.hosts]));

describe('a route claims the hosts it names, not those it serves (docs/gateway-api.md#host-ownership)', () => {
  const owner = routeAt('2026-01-01T00:00:00Z', 'owner', 'team-a', ['a.test']);
  const newcomer = routeAt('2026-01-02T00:00:00Z', 'newcomer', 'team-b', ['a.test']);

  it('the oldest claim owns the host; the newer route of another namespace is left out', () => {
    const result = translateGateways(input([owner, newcomer]));
    assert.deepEqual(served(result), ['a.test httproute/team-a/owner']);
    assert.deepEqual(claimsOf(result), {
      'HTTPRoute team-a/owner': ['a.test'],
      'HTTPRoute team-b/newcomer': ['a.test'],
    });
  });

  it('every rule of the owner refused (an unsupported filter): it keeps its claim, the newcomer stays out', () => {
    const broken = routeAt('2026-01-01T00:00:00Z', 'owner', 'team-a', ['a.test'], {
      filters: [{ type: 'ExtensionRef' }],
    });
    const result = translateGateways(input([broken, newcomer]));
    assert.deepEqual(served(result), []);
    assert.deepEqual(claimsOf(result)['HTTPRoute team-a/owner'], ['a.test']);
    const left = result.routes.find((route) => route.name === 'newcomer');
    assert.match(left?.problems.join('; ') ?? '', /host a\.test belongs to namespace team-a/);
  });

  it("its listener's certificate Secret missing: the claim holds through the listener that cannot serve now", () => {
    const secure = routeAt('2026-01-01T00:00:00Z', 'secure', 'team-a', ['secure.test'], {
      sectionName: 'https',
    });
    const late = routeAt('2026-01-02T00:00:00Z', 'late', 'team-b', ['secure.test'], { sectionName: 'http' });
    const whole = translateGateways(input([secure, late]));
    assert.deepEqual(served(whole), ['secure.test httproute/team-a/secure']);
    const result = translateGateways(input([secure, late], { secrets: new Map() }));
    assert.deepEqual(served(result), []);
    assert.deepEqual(claimsOf(result)['HTTPRoute team-a/secure'], ['secure.test']);
  });

  it('no claim through a listener refused for its own shape, nor one that does not admit the route', () => {
    const badHostname = gateway([
      {
        name: 'http',
        port: 80,
        protocol: 'HTTP',
        hostname: '*bad*',
        allowedRoutes: { namespaces: { from: 'All' } },
      },
    ]);
    const result = translateGateways(input([owner], { gateways: [badHostname] }));
    assert.deepEqual(claimsOf(result)['HTTPRoute team-a/owner'], []);
    const sameOnly = gateway([{ name: 'http', port: 80, protocol: 'HTTP' }]);
    const foreign = translateGateways(input([newcomer], { gateways: [sameOnly] }));
    assert.deepEqual(claimsOf(foreign)['HTTPRoute team-b/newcomer'], []);
    // A hostname that meets no listener's hostname claims nothing through it.
    const elsewhere = routeAt('2026-01-01T00:00:00Z', 'elsewhere', 'team-a', ['other.test'], {
      sectionName: 'https',
    });
    assert.deepEqual(claimsOf(translateGateways(input([elsewhere])))['HTTPRoute team-a/elsewhere'], []);
  });
});

describe('withClaimedHosts: a host claimed but served by nobody is held closed', () => {
  const base: UpstreamsConfig = {
    hosts: [{ name: 'file.test', paths: [] }],
  } as unknown as UpstreamsConfig;

  it('adds `/` without a server for each unserved claimed host, labelled with its owner (the oldest claim)', () => {
    const claims = byCreation([
      { namespace: 'team-b', ingress: 'team-b/late', hosts: ['a.test', 'b.test'], created: 2 },
      {
        namespace: 'team-a',
        ingress: 'HTTPRoute team-a/owner',
        hosts: ['a.test', 'DEFAULT', 'file.test'],
        created: 1,
      },
      { namespace: 'team-c', ingress: 'team-c/served', hosts: ['c.test'], created: 3 },
    ]);
    const config = { ...base, hosts: [...base.hosts, { name: 'c.test', paths: [] }] } as UpstreamsConfig;
    const result = withClaimedHosts(config, claims);
    const added = result.hosts.slice(config.hosts.length);
    assert.deepEqual(
      added.map((host) => [
        host.name,
        host.paths.map((path) => [path.prefix, path.origin, path.servers.length, path.service]),
      ]),
      [
        ['a.test', [['/', 'httproute/team-a/owner', 0, null]]],
        ['b.test', [['/', 'ingress/team-b/late', 0, null]]],
      ],
    );
    // Served hosts, upstreams.yaml's and the default host are left alone; nothing to add: the same object.
    assert.equal(withClaimedHosts(config, []), config);
    assert.equal(
      withClaimedHosts(config, [{ namespace: 'x', ingress: 'x/y', hosts: ['DEFAULT', 'c.test'] }]),
      config,
    );
  });
});

describe("ownedHosts: a translation older than the other source's claims serves no host it lost", () => {
  it('keeps a host only where the namespace of its paths owns it by every claim now', () => {
    const host = (name: string, origin: string) =>
      ({ name, paths: [{ prefix: '/', origin }] }) as unknown as UpstreamsConfig['hosts'][number];
    // An Ingress translation made before the route claiming a.test (older) was seen.
    const fromIngress = [host('a.test', 'ingress/team-b/late'), host('b.test', 'ingress/team-b/late')];
    const owners = hostOwners(
      ['file.test'],
      byCreation([
        { namespace: 'team-b', ingress: 'team-b/late', hosts: ['a.test', 'b.test'], created: 2 },
        { namespace: 'team-a', ingress: 'HTTPRoute team-a/owner', hosts: ['a.test'], created: 1 },
      ]),
    );
    assert.deepEqual(
      ownedHosts(fromIngress, owners).map((item) => item.name),
      ['b.test'],
    );
    const fromRoutes = [
      host('a.test', 'httproute/team-a/owner'),
      host('file.test', 'httproute/team-a/owner'),
    ];
    assert.deepEqual(
      ownedHosts(fromRoutes, owners).map((item) => item.name),
      ['a.test'],
    );
    // Nothing lost: the same array.
    assert.equal(ownedHosts(fromIngress.slice(1), owners).length, 1);
  });

  it('a list like one wholly owned before checks the hosts that are new objects: one of another namespace is left out', () => {
    const host = (name: string, origin: string) =>
      ({ name, paths: [{ prefix: '/', origin }] }) as unknown as UpstreamsConfig['hosts'][number];
    const owners = hostOwners(
      [],
      [{ namespace: 'team-a', ingress: 'team-a/first', hosts: ['a.test', 'b.test', 'c.test'] }],
    );
    const first = [
      host('a.test', 'ingress/team-a/x'),
      host('b.test', 'ingress/team-a/x'),
      host('c.test', 'ingress/team-a/x'),
    ];
    assert.equal(ownedHosts(first, owners), first);
    // The same names and length, b.test now a new object whose path comes from team-b.
    const next = [first[0], host('b.test', 'ingress/team-b/y'), first[2]] as typeof first;
    assert.deepEqual(
      ownedHosts(next, owners).map((item) => item.name),
      ['a.test', 'c.test'],
    );
    // And back to team-a: the whole list again, the same array.
    const again = [first[0], host('b.test', 'ingress/team-a/z'), first[2]] as typeof first;
    assert.equal(ownedHosts(again, owners), again);
  });
});
