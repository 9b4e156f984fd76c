/**
 * Gateway API cases ported from the official conformance suite (kubernetes-sigs/gateway-api,
 * conformance/tests, HTTP core profile), run through the built process against the fake API server.
 * Each case applies its manifests, checks the responses and status the suite checks, and deletes
 * them again: Tollgate serves every Gateway on its own listeners, so cases that would each get their
 * own Gateway address in a cluster must not overlap here. docs/gateway-api.md lists which pass.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  gatewayClassObject,
  gatewayObject,
  hasCondition,
  httpRouteObject,
  namespaceObject,
  referenceGrantObject,
  routeParentConditions,
} from '../helpers/fake-gateway-api.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  type ResourceKind,
  type StoredObject,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const INFRA = 'gateway-conformance-infra';
const WEB = 'gateway-conformance-web-backend';
const APP = 'gateway-conformance-app-backend';
/** The suite waits "eventually"; Tollgate promises changes within 1 s, on a loaded machine more. */
const SETTLE_MS = 10_000;

const RESOURCE_OF: Record<string, ResourceKind> = {
  Gateway: 'gateways',
  HTTPRoute: 'httproutes',
  GRPCRoute: 'grpcroutes',
  ReferenceGrant: 'referencegrants',
  TollgatePolicy: 'tollgatepolicies',
  Secret: 'secrets',
};

describe('Gateway API conformance cases (HTTP core profile) through the built process', () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;

  const get = (host: string, path = '/', headers: Record<string, string> = {}, method = 'GET') =>
    request(`${tollgate.proxyUrl}${path}`, { method, headers: { host, ...headers } });
  const backendOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  /** Waits until host+path answers from `expected` (a backend name or `status N`). */
  const expectBackend = async (
    host: string,
    path: string,
    expected: string,
    headers: Record<string, string> = {},
    method = 'GET',
  ) => {
    let last = '';
    try {
      await waitFor(async () => {
        last = backendOf(await get(host, path, headers, method));
        return last === expected;
      }, SETTLE_MS);
    } catch {
      assert.fail(`${method} ${host}${path} ${JSON.stringify(headers)}: expected ${expected}, got ${last}`);
    }
  };
  const applied: StoredObject[] = [];
  const apply = (...objects: StoredObject[]) => {
    for (const object of objects) {
      api.applyRaw(object);
      applied.push(object);
    }
  };
  /** Deletes what a case applied and waits until the table no longer serves its routes. */
  const cleanUp = async () => {
    for (const object of applied.splice(0).reverse()) {
      const resource = RESOURCE_OF[object.kind] as ResourceKind;
      if (api.get(resource, object.metadata.namespace, object.metadata.name))
        api.delete(resource, object.metadata.namespace, object.metadata.name);
    }
    await waitFor(async () => (await get('cleanup.test', '/')).status === 404, SETTLE_MS);
  };
  const stored = (resource: ResourceKind, namespace: string, name: string) =>
    api.get(resource, namespace, name);
  const statusOf = (resource: ResourceKind, namespace: string, name: string): unknown =>
    stored(resource, namespace, name)?.status ?? {};
  /** Waits until Tollgate wrote a route parent status satisfying `check`. */
  const routeStatus = async (
    namespace: string,
    name: string,
    gateway: string,
    check: (conditions: NonNullable<ReturnType<typeof routeParentConditions>>) => boolean,
    section?: string,
    kind: ResourceKind = 'httproutes',
  ) => {
    try {
      await api.waitFor(
        () => {
          const conditions = routeParentConditions(stored(kind, namespace, name), gateway, section);
          return conditions !== undefined && check(conditions);
        },
        'route status',
        SETTLE_MS,
      );
    } catch {
      assert.fail(
        `status of ${namespace}/${name} for ${gateway}: ${JSON.stringify(stored(kind, namespace, name)?.status)}`,
      );
    }
  };
  const serviceFor = (name: string, namespace: string, pod: string) => {
    const port = (upstreams.get(pod) as Upstream).port;
    api.apply(service({ name, namespace, ports: [{ name: 'http', port: 8080, targetPort: port }] }));
    api.apply(
      endpointSlice({
        service: name,
        namespace,
        ports: [{ name: 'http', port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
  };

  before(async () => {
    for (const name of [
      'infra-backend-v1',
      'infra-backend-v2',
      'infra-backend-v3',
      'web-backend',
      'app-backend',
    ])
      upstreams.set(name, await startUpstream({ name }));
    api = await startFakeKubeApi();
    // conformance/base/manifests.yaml: three namespaces, three Gateways, the backends.
    api.applyRaw(namespaceObject(INFRA, { 'gateway-conformance': 'infra' }));
    api.applyRaw(namespaceObject(WEB, { 'gateway-conformance': 'backend' }));
    api.applyRaw(namespaceObject(APP, { 'gateway-conformance': 'backend' }));
    api.applyRaw(gatewayClassObject());
    // Another controller's class: none of its Gateways is ours.
    api.applyRaw(gatewayClassObject('other', 'example.com/other-controller'));
    const http = (from: Record<string, unknown>) => ({
      name: 'http',
      port: 80,
      protocol: 'HTTP',
      allowedRoutes: { namespaces: from },
    });
    // Of the base Gateways only same-namespace: all-namespaces and backend-namespaces share its port
    // and (no) hostname, so one deployment would refuse them as Conflicted; they are served one
    // deployment each in gateway-api-gateways.test.ts (kubernetes.gateway_names).
    api.applyRaw(
      gatewayObject({ name: 'same-namespace', namespace: INFRA, listeners: [http({ from: 'Same' })] }),
    );
    api.applyRaw(
      gatewayObject({
        name: 'not-ours',
        namespace: INFRA,
        className: 'other',
        listeners: [http({ from: 'All' })],
      }),
    );
    for (const version of ['v1', 'v2', 'v3'])
      serviceFor(`infra-backend-${version}`, INFRA, `infra-backend-${version}`);
    serviceFor('web-backend', WEB, 'web-backend');
    serviceFor('app-backend', APP, 'app-backend');
    serviceFor('app-backend-v2', APP, 'app-backend');
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        kubernetes: {
          kubeconfig: api.writeKubeconfig(dir, INFRA),
          gateway_class: 'tollgate',
          publish_address: ['203.0.113.9'],
        },
      },
      upstreams: {
        upstreams: {
          'file.test': { paths: { '/': { servers: [(upstreams.get('app-backend') as Upstream).address] } } },
          'cleanup.test': {
            paths: { '/never': { servers: [(upstreams.get('app-backend') as Upstream).address] } },
          },
        },
      },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("GatewayClass of tollgate.io/gateway-controller is Accepted; another controller's class is left alone", async () => {
    await api.waitFor(
      () =>
        hasCondition(
          (statusOf('gatewayclasses', '', 'tollgate') as { conditions?: never[] })?.conditions,
          'Accepted',
          'True',
        ),
      'GatewayClass accepted',
      SETTLE_MS,
    );
    assert.equal(stored('gatewayclasses', '', 'other')?.status, undefined);
    assert.equal(stored('gateways', INFRA, 'not-ours')?.status, undefined);
  });

  it('Gateway status: Accepted, Programmed, addresses from publish_address, listeners with supportedKinds', async () => {
    await api.waitFor(
      () =>
        hasCondition(
          (statusOf('gateways', INFRA, 'same-namespace') as { conditions?: never[] })?.conditions,
          'Programmed',
          'True',
        ),
      'Gateway programmed',
      SETTLE_MS,
    );
    const status = statusOf('gateways', INFRA, 'same-namespace') as {
      conditions: Array<{ type: string; status: string; reason: string; observedGeneration: number }>;
      addresses: unknown;
      listeners: Array<{
        name: string;
        attachedRoutes: number;
        supportedKinds: unknown;
        conditions: never[];
      }>;
    };
    assert.ok(hasCondition(status.conditions, 'Accepted', 'True', 'Accepted'));
    assert.deepEqual(status.addresses, [{ type: 'IPAddress', value: '203.0.113.9' }]);
    assert.equal(status.conditions[0]?.observedGeneration, 1);
    const listener = status.listeners[0];
    assert.equal(listener?.name, 'http');
    assert.equal(listener?.attachedRoutes, 0);
    assert.ok(hasCondition(listener?.conditions, 'ResolvedRefs', 'True'));
    assert.deepEqual(listener?.supportedKinds, [
      { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute' },
      { group: 'gateway.networking.k8s.io', kind: 'GRPCRoute' },
    ]);
  });

  it('HTTPRouteSimpleSameNamespace: a route reaches its backend; Accepted and ResolvedRefs are True', async () => {
    apply(
      httpRouteObject({
        name: 'gateway-conformance-infra-test',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace' }],
        rules: [{ backendRefs: [{ name: 'infra-backend-v1', port: 8080 }] }],
      }),
    );
    await expectBackend('any.example', '/', 'infra-backend-v1');
    await routeStatus(
      INFRA,
      'gateway-conformance-infra-test',
      'same-namespace',
      (c) =>
        hasCondition(c, 'Accepted', 'True', 'Accepted') &&
        hasCondition(c, 'ResolvedRefs', 'True', 'ResolvedRefs'),
    );
    const parents = (
      statusOf('httproutes', INFRA, 'gateway-conformance-infra-test') as {
        parents: Array<Record<string, unknown>>;
      }
    ).parents;
    assert.equal(parents[0]?.controllerName, 'tollgate.io/gateway-controller');
    await api.waitFor(
      () =>
        (
          statusOf('gateways', INFRA, 'same-namespace') as {
            listeners: Array<{ attachedRoutes: number }>;
          }
        ).listeners[0]?.attachedRoutes === 1,
      'attachedRoutes 1',
      SETTLE_MS,
    );
    await cleanUp();
  });

  it('HTTPRouteMatching: path prefixes on segment boundaries, and header matches', async () => {
    apply(
      httpRouteObject({
        name: 'matching',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace' }],
        rules: [
          {
            matches: [
              { path: { type: 'PathPrefix', value: '/' } },
              { headers: [{ name: 'version', value: 'one' }] },
            ],
            backendRefs: [{ name: 'infra-backend-v1', port: 8080 }],
          },
          {
            matches: [
              { path: { type: 'PathPrefix', value: '/v2' } },
              { headers: [{ name: 'version', value: 'two' }] },
            ],
            backendRefs: [{ name: 'infra-backend-v2', port: 8080 }],
          },
        ],
      }),
    );
    const cases: Array<[string, Record<string, string>, string]> = [
      ['/', {}, 'infra-backend-v1'],
      ['/example', {}, 'infra-backend-v1'],
      ['/', { Version: 'one' }, 'infra-backend-v1'],
      ['/v2', {}, 'infra-backend-v2'],
      ['/v2/example', {}, 'infra-backend-v2'],
      ['/', { Version: 'two' }, 'infra-backend-v2'],
      ['/v2/', {}, 'infra-backend-v2'],
      ['/v2example', {}, 'infra-backend-v1'],
      ['/foo/v2/example', {}, 'infra-backend-v1'],
    ];
    for (const [path, headers, backend] of cases) await expectBackend('any.example', path, backend, headers);
    await cleanUp();
  });

  it('HTTPRouteInvalidCrossNamespaceParentRef: a route of another namespace is NotAllowedByListeners on a Same listener', async () => {
    apply(
      httpRouteObject({
        name: 'invalid-cross-namespace-parent-ref',
        namespace: WEB,
        parentRefs: [{ name: 'same-namespace', namespace: INFRA }],
        rules: [{ backendRefs: [{ name: 'web-backend', port: 8080 }] }],
      }),
    );
    await routeStatus(WEB, 'invalid-cross-namespace-parent-ref', 'same-namespace', (c) =>
      hasCondition(c, 'Accepted', 'False', 'NotAllowedByListeners'),
    );
    assert.equal((await get('any.example', '/')).status, 404);
    await cleanUp();
  });

  it('HTTPRouteInvalidCrossNamespaceBackendRef, then HTTPRouteReferenceGrant: 500 RefNotPermitted until a grant allows it, and again once it is deleted', async () => {
    const route = httpRouteObject({
      name: 'reference-grant',
      namespace: INFRA,
      parentRefs: [{ name: 'same-namespace' }],
      rules: [{ backendRefs: [{ name: 'web-backend', namespace: WEB, port: 8080 }] }],
    });
    apply(route);
    await routeStatus(
      INFRA,
      'reference-grant',
      'same-namespace',
      (c) =>
        hasCondition(c, 'Accepted', 'True') && hasCondition(c, 'ResolvedRefs', 'False', 'RefNotPermitted'),
    );
    await expectBackend('any.example', '/', 'status 500');
    const grant = referenceGrantObject({
      name: 'reference-grant',
      namespace: WEB,
      from: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', namespace: INFRA }],
      to: [{ group: '', kind: 'Service', name: 'web-backend' }],
    });
    apply(grant);
    await expectBackend('any.example', '/', 'web-backend');
    await routeStatus(INFRA, 'reference-grant', 'same-namespace', (c) =>
      hasCondition(c, 'ResolvedRefs', 'True'),
    );
    // Kong KIC once kept serving after the grant went: deleting it revokes at once.
    api.delete('referencegrants', WEB, 'reference-grant');
    await expectBackend('any.example', '/', 'status 500');
    await cleanUp();
  });

  it('HTTPRouteInvalidBackendRefUnknownKind and HTTPRouteInvalidNonExistentBackendRef: 500, InvalidKind / BackendNotFound', async () => {
    apply(
      httpRouteObject({
        name: 'invalid-backend-ref-unknown-kind',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace' }],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/v2' } }],
            backendRefs: [
              { group: 'unknownkind.example.com', kind: 'NonExistent', name: 'infra-backend-v1', port: 8080 },
            ],
          },
        ],
      }),
      httpRouteObject({
        name: 'invalid-nonexistent-backend-ref',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace' }],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/v3' } }],
            backendRefs: [{ name: 'nonexistent', port: 8080 }],
          },
        ],
      }),
    );
    await routeStatus(
      INFRA,
      'invalid-backend-ref-unknown-kind',
      'same-namespace',
      (c) => hasCondition(c, 'Accepted', 'True') && hasCondition(c, 'ResolvedRefs', 'False', 'InvalidKind'),
    );
    await routeStatus(
      INFRA,
      'invalid-nonexistent-backend-ref',
      'same-namespace',
      (c) =>
        hasCondition(c, 'Accepted', 'True') && hasCondition(c, 'ResolvedRefs', 'False', 'BackendNotFound'),
    );
    await expectBackend('any.example', '/v2', 'status 500');
    await expectBackend('any.example', '/v3', 'status 500');
    await cleanUp();
  });

  it('HTTPRouteDisallowedKind: a TLSRoute-only listener leaves an HTTPRoute NotAllowedByListeners with 0 attachedRoutes', async () => {
    apply(
      gatewayObject({
        name: 'tlsroutes-only',
        namespace: INFRA,
        listeners: [
          {
            name: 'tls',
            port: 443,
            protocol: 'TLS',
            tls: { mode: 'Passthrough' },
            allowedRoutes: { namespaces: { from: 'Same' }, kinds: [{ kind: 'TLSRoute' }] },
          },
        ],
      }),
      httpRouteObject({
        name: 'disallowed-kind',
        namespace: INFRA,
        parentRefs: [{ name: 'tlsroutes-only', namespace: INFRA }],
        rules: [{ backendRefs: [{ name: 'infra-backend-v1', port: 8080 }] }],
      }),
    );
    await routeStatus(
      INFRA,
      'disallowed-kind',
      'tlsroutes-only',
      (c) =>
        hasCondition(c, 'Accepted', 'False', 'NotAllowedByListeners') &&
        hasCondition(c, 'ResolvedRefs', 'True'),
    );
    const gateway = statusOf('gateways', INFRA, 'tlsroutes-only') as {
      listeners: Array<{ attachedRoutes: number; conditions: never[] }>;
    };
    assert.equal(gateway.listeners[0]?.attachedRoutes, 0);
    assert.ok(hasCondition(gateway.listeners[0]?.conditions, 'ResolvedRefs', 'False', 'InvalidRouteKinds'));
    assert.equal((await get('any.example', '/')).status, 404);
    await cleanUp();
  });

  it('HTTPRouteListenerHostnameMatching: listener hostnames, exact and wildcard, pick the route', async () => {
    const listener = (name: string, hostname: string) => ({
      name,
      port: 80,
      protocol: 'HTTP',
      hostname,
      allowedRoutes: { namespaces: { from: 'Same' } },
    });
    const route = (name: string, backend: string, sections: string[]) =>
      httpRouteObject({
        name,
        namespace: INFRA,
        parentRefs: sections.map((sectionName) => ({
          name: 'httproute-listener-hostname-matching',
          namespace: INFRA,
          sectionName,
        })),
        rules: [{ backendRefs: [{ name: backend, port: 8080 }] }],
      });
    apply(
      gatewayObject({
        name: 'httproute-listener-hostname-matching',
        namespace: INFRA,
        listeners: [
          listener('listener-1', 'bar.com'),
          listener('listener-2', 'foo.bar.com'),
          listener('listener-3', '*.bar.com'),
          listener('listener-4', '*.foo.com'),
        ],
      }),
      route('backend-v1', 'infra-backend-v1', ['listener-1']),
      route('backend-v2', 'infra-backend-v2', ['listener-2']),
      route('backend-v3', 'infra-backend-v3', ['listener-3', 'listener-4']),
    );
    await expectBackend('bar.com', '/', 'infra-backend-v1');
    await expectBackend('foo.bar.com', '/', 'infra-backend-v2');
    await expectBackend('baz.bar.com', '/', 'infra-backend-v3');
    await expectBackend('boo.bar.com', '/', 'infra-backend-v3');
    await expectBackend('multiple.prefixes.bar.com', '/', 'infra-backend-v3');
    await expectBackend('multiple.prefixes.foo.com', '/', 'infra-backend-v3');
    await expectBackend('foo.com', '/', 'status 404');
    await expectBackend('no.matching.host', '/', 'status 404');
    await cleanUp();
  });

  it('HTTPRouteHostnameIntersection: route and listener hostnames intersect; none in common is NoMatchingListenerHostname', async () => {
    apply(
      gatewayObject({
        name: 'httproute-hostname-intersection',
        namespace: INFRA,
        listeners: [
          {
            name: 'listener-1',
            port: 80,
            protocol: 'HTTP',
            hostname: 'very.specific.com',
            allowedRoutes: { namespaces: { from: 'Same' } },
          },
          {
            name: 'listener-2',
            port: 80,
            protocol: 'HTTP',
            hostname: '*.wildcard.io',
            allowedRoutes: { namespaces: { from: 'Same' } },
          },
          {
            name: 'listener-3',
            port: 80,
            protocol: 'HTTP',
            hostname: '*.anotherwildcard.io',
            allowedRoutes: { namespaces: { from: 'Same' } },
          },
        ],
      }),
      httpRouteObject({
        name: 'specific-host-matches-listener-specific-host',
        namespace: INFRA,
        parentRefs: [{ name: 'httproute-hostname-intersection', namespace: INFRA }],
        hostnames: ['non.matching.com', '*.nonmatchingwildcard.io', 'very.specific.com'],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/s1' } }],
            backendRefs: [{ name: 'infra-backend-v1', port: 8080 }],
          },
        ],
      }),
      httpRouteObject({
        name: 'specific-host-matches-listener-wildcard-host',
        namespace: INFRA,
        parentRefs: [{ name: 'httproute-hostname-intersection', namespace: INFRA }],
        hostnames: [
          'non.matching.com',
          'wildcard.io',
          'foo.wildcard.io',
          'bar.wildcard.io',
          'foo.bar.wildcard.io',
        ],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/s2' } }],
            backendRefs: [{ name: 'infra-backend-v2', port: 8080 }],
          },
        ],
      }),
      httpRouteObject({
        name: 'wildcard-host-matches-listener-specific-host',
        namespace: INFRA,
        parentRefs: [{ name: 'httproute-hostname-intersection', namespace: INFRA }],
        hostnames: ['non.matching.com', '*.specific.com'],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/s3' } }],
            backendRefs: [{ name: 'infra-backend-v3', port: 8080 }],
          },
        ],
      }),
      httpRouteObject({
        name: 'wildcard-host-matches-listener-wildcard-host',
        namespace: INFRA,
        parentRefs: [{ name: 'httproute-hostname-intersection', namespace: INFRA }],
        hostnames: ['*.anotherwildcard.io'],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/s4' } }],
            backendRefs: [{ name: 'infra-backend-v1', port: 8080 }],
          },
        ],
      }),
      httpRouteObject({
        name: 'no-intersecting-hosts',
        namespace: INFRA,
        parentRefs: [{ name: 'httproute-hostname-intersection', namespace: INFRA }],
        hostnames: ['specific.but.wrong.com', 'wildcard.io'],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/s5' } }],
            backendRefs: [{ name: 'infra-backend-v2', port: 8080 }],
          },
        ],
      }),
    );
    await expectBackend('very.specific.com', '/s1', 'infra-backend-v1');
    await expectBackend('non.matching.com', '/s1', 'status 404');
    await expectBackend('foo.nonmatchingwildcard.io', '/s1', 'status 404');
    await expectBackend('foo.wildcard.io', '/s2', 'infra-backend-v2');
    await expectBackend('bar.wildcard.io', '/s2', 'infra-backend-v2');
    await expectBackend('foo.bar.wildcard.io', '/s2', 'infra-backend-v2');
    await expectBackend('wildcard.io', '/s2', 'status 404');
    await expectBackend('very.specific.com', '/s3', 'infra-backend-v3');
    await expectBackend('anotherwildcard.io', '/s4', 'status 404');
    await expectBackend('foo.anotherwildcard.io', '/s4', 'infra-backend-v1');
    await expectBackend('foo.bar.anotherwildcard.io', '/s4', 'infra-backend-v1');
    await expectBackend('specific.but.wrong.com', '/s5', 'status 404');
    await routeStatus(INFRA, 'no-intersecting-hosts', 'httproute-hostname-intersection', (c) =>
      hasCondition(c, 'Accepted', 'False', 'NoMatchingListenerHostname'),
    );
    await cleanUp();
  });

  it('HTTPRouteInvalidParentRefNotMatchingSectionName and HTTPRouteInvalidParentRefNotMatchingListenerPort: NoMatchingParent', async () => {
    apply(
      httpRouteObject({
        name: 'invalid-parent-ref-section',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace', sectionName: 'nonexistent' }],
        rules: [{ backendRefs: [{ name: 'infra-backend-v1', port: 8080 }] }],
      }),
      httpRouteObject({
        name: 'invalid-parent-ref-port',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace', port: 81 }],
        rules: [{ backendRefs: [{ name: 'infra-backend-v1', port: 8080 }] }],
      }),
    );
    await routeStatus(
      INFRA,
      'invalid-parent-ref-section',
      'same-namespace',
      (c) => hasCondition(c, 'Accepted', 'False', 'NoMatchingParent'),
      'nonexistent',
    );
    await api.waitFor(
      () => {
        const parents =
          (
            (stored('httproutes', INFRA, 'invalid-parent-ref-port')?.status ?? {}) as {
              parents?: Array<{ parentRef: { port?: number }; conditions: never[] }>;
            }
          ).parents ?? [];
        return parents.some(
          (parent) =>
            parent.parentRef.port === 81 &&
            hasCondition(parent.conditions, 'Accepted', 'False', 'NoMatchingParent'),
        );
      },
      'NoMatchingParent for the port',
      SETTLE_MS,
    );
    assert.equal((await get('any.example', '/')).status, 404);
    await cleanUp();
  });

  it('HTTPRoutePartiallyInvalidViaInvalidReferenceGrant: the rule without a grant answers 500, its sibling serves', async () => {
    apply(
      referenceGrantObject({
        name: 'invalid-reference-grant',
        namespace: APP,
        from: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', namespace: INFRA }],
        to: [{ group: '', kind: 'Service', name: 'app-backend' }],
      }),
      httpRouteObject({
        name: 'invalid-reference-grant',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace' }],
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/v2' } }],
            backendRefs: [{ name: 'app-backend-v2', namespace: APP, port: 8080 }],
          },
          { backendRefs: [{ name: 'app-backend', namespace: APP, port: 8080 }] },
        ],
      }),
    );
    await routeStatus(
      INFRA,
      'invalid-reference-grant',
      'same-namespace',
      (c) =>
        hasCondition(c, 'Accepted', 'True') && hasCondition(c, 'ResolvedRefs', 'False', 'RefNotPermitted'),
    );
    await expectBackend('any.example', '/v2', 'status 500');
    await expectBackend('any.example', '/', 'app-backend');
    await cleanUp();
  });
});
