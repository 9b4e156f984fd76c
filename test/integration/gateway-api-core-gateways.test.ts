/**
 * Gateway-level core cases of the Gateway API conformance suite (kubernetes-sigs/gateway-api v1.6,
 * conformance/tests), run through the built process against the fake API server with the suite's own
 * manifests (the `.yaml` of each case, copied as written: only `{GATEWAY_CLASS_NAME}` is filled in)
 * and the expectations of its `.go` file: GatewayWithAttachedRoutes, GatewayInvalidRouteKind,
 * GatewayModifyListeners, GatewayNameMaximumLength, the four GatewaySecret*ReferenceGrant cases,
 * HTTPRouteServiceTypes and (extended) GatewayHTTPListenerIsolation and GatewayOptionalAddressValue. In a cluster each Gateway gets its own address; here every Gateway shares
 * Tollgate's two ports, so Gateways the suite creates side by side without a hostname (which one
 * deployment reports Conflicted, docs/gateway-api.md#listener-conflicts) are applied one after the
 * other, each deleted before the next.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';
import {
  gatewayClassObject,
  hasCondition,
  namespaceObject,
  routeParentConditions,
} from '../helpers/fake-gateway-api.ts';
import {
  type FakeKubeApi,
  type ResourceKind,
  type StoredObject,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import {
  applyBackendService,
  applyTlsSecret,
  CONFORMANCE_INFRA,
  manifests,
  SAME_NAMESPACE_GATEWAY,
  startGatewayTollgate,
} from '../helpers/gateway-conformance.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const INFRA = CONFORMANCE_INFRA;
const WEB = 'gateway-conformance-web-backend';
const APP = 'gateway-conformance-app-backend';
const SETTLE_MS = 10_000;

const RESOURCE_OF: Record<string, ResourceKind> = {
  Gateway: 'gateways',
  HTTPRoute: 'httproutes',
  ReferenceGrant: 'referencegrants',
  Service: 'services',
  EndpointSlice: 'endpointslices',
};

interface Condition {
  type: string;
  status: string;
  reason: string;
  observedGeneration?: number;
}
interface ListenerStatus {
  name: string;
  supportedKinds?: Array<{ group?: string; kind: string }>;
  attachedRoutes: number;
  conditions: Condition[];
}
/** What GatewayStatusMustHaveListeners compares: kinds, conditions (a reason only where given), count. */
interface ExpectedListener {
  name: string;
  supportedKinds: string[];
  conditions: Array<[type: string, status: 'True' | 'False', reason?: string]>;
  attachedRoutes: number;
}

// conformance/tests/gateway-with-attached-routes.yaml
const GATEWAY_WITH_ATTACHED_ROUTES = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gateway-with-one-attached-route
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes:
      kinds:
      - kind: HTTPRoute
      namespaces:
        from: Selector
        selector:
          matchLabels:
            kubernetes.io/metadata.name: gateway-conformance-infra
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: http-route-1
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - kind: Gateway
    name: gateway-with-one-attached-route
    namespace: gateway-conformance-infra
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gateway-with-two-attached-routes
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    hostname: "foo.example.com"
    allowedRoutes:
      kinds:
      - kind: HTTPRoute
      namespaces:
        from: Selector
        selector:
          matchLabels:
            kubernetes.io/metadata.name: gateway-conformance-infra
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: http-route-2
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - kind: Gateway
    name: gateway-with-two-attached-routes
    namespace: gateway-conformance-infra
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: http-route-3
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - kind: Gateway
    name: gateway-with-two-attached-routes
    namespace: gateway-conformance-infra
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: http-route-not-accepted
  namespace: gateway-conformance-infra
spec:
  hostnames:
  - "not-accepted.test.com"
  parentRefs:
  - kind: Gateway
    name: gateway-with-two-attached-routes
    namespace: gateway-conformance-infra
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: unresolved-gateway-with-one-attached-unresolved-route
  namespace: gateway-conformance-infra
  annotations:
    gateway-api/skip-this-for-readiness: "true"
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: tls
    port: 443
    protocol: HTTPS
    allowedRoutes:
      kinds:
      - kind: HTTPRoute
      namespaces:
        from: Selector
        selector:
          matchLabels:
            kubernetes.io/metadata.name: gateway-conformance-infra
    tls:
      certificateRefs:
      - group: ""
        kind: Secret
        name: does-not-exist
      mode: Terminate
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: http-route-4
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - kind: Gateway
    name: unresolved-gateway-with-one-attached-unresolved-route
    namespace: gateway-conformance-infra
    sectionName: tls
  rules:
  - backendRefs:
    - name: does-not-exist
      port: 8080
`;

// conformance/tests/gateway-invalid-route-kind.yaml, one Gateway at a time.
const GATEWAY_ONLY_INVALID_ROUTE_KIND = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gateway-only-invalid-route-kind
  namespace: gateway-conformance-infra
  annotations:
    gateway-api/skip-this-for-readiness: "true"
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
    - name: http
      port: 80
      protocol: HTTP
      allowedRoutes:
        namespaces:
          from: All
        kinds:
          - kind: InvalidRoute
`;
const GATEWAY_SUPPORTED_AND_INVALID_ROUTE_KIND = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gateway-supported-and-invalid-route-kind
  namespace: gateway-conformance-infra
  annotations:
    gateway-api/skip-this-for-readiness: "true"
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
    - name: http
      port: 80
      protocol: HTTP
      allowedRoutes:
        namespaces:
          from: All
        kinds:
          - kind: InvalidRoute
          - kind: HTTPRoute
`;

// conformance/tests/gateway-modify-listeners.yaml, one Gateway at a time (both have an HTTPS
// listener for secure.test.com).
const GATEWAY_ADD_LISTENER = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gateway-add-listener
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    hostname: "secure.test.com"
    allowedRoutes:
      namespaces:
        from: All
    tls:
      certificateRefs:
      - group: ""
        kind: Secret
        name: tls-validity-checks-certificate
        namespace: gateway-conformance-infra
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: http-route-1
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - kind: Gateway
    name: gateway-add-listener
    namespace: gateway-conformance-infra
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
`;
const GATEWAY_REMOVE_LISTENER = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gateway-remove-listener
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    hostname: "secure.test.com"
    allowedRoutes:
      namespaces:
        from: All
    tls:
      certificateRefs:
      - group: ""
        kind: Secret
        name: tls-validity-checks-certificate
        namespace: gateway-conformance-infra
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: All
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: http-route-2
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - kind: Gateway
    name: gateway-remove-listener
    namespace: gateway-conformance-infra
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
`;

// conformance/tests/gateway-name-maximum-length.yaml
const MAXIMUM_LENGTH_NAME = `gateway-name-maximum-length-${'a'.repeat(253 - 'gateway-name-maximum-length-'.length)}`;
const GATEWAY_NAME_MAXIMUM_LENGTH = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: ${MAXIMUM_LENGTH_NAME}
  namespace: gateway-conformance-infra
  annotations:
    gateway-api/skip-this-for-readiness: "true"
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
    - name: http
      port: 80
      protocol: HTTP
`;

/** The Gateway of the four conformance/tests/gateway-secret-*-reference-grant.yaml, by name. */
const secretGateway = (name: string) => `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: ${name}
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
    - name: https
      port: 443
      protocol: HTTPS
      allowedRoutes:
        namespaces:
          from: All
      tls:
        certificateRefs:
          - group: ""
            kind: Secret
            name: certificate
            namespace: gateway-conformance-web-backend
`;
const grant = (name: string, namespace: string, from: string, to: string) => `
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata:
  name: ${name}
  namespace: ${namespace}
spec:
  from:
${from}
  to:
${to}
`;
const FROM_GATEWAYS = `    - group: gateway.networking.k8s.io
      kind: Gateway
      namespace: gateway-conformance-infra`;
const TO_CERTIFICATE = `    - group: ""
      kind: Secret
      name: certificate`;

// conformance/tests/gateway-secret-invalid-reference-grant.yaml: grants that each miss by one field.
const INVALID_GRANTS = [
  grant('reference-grant-wrong-namespace', APP, FROM_GATEWAYS, TO_CERTIFICATE),
  grant(
    'reference-grant-wrong-from-group',
    WEB,
    FROM_GATEWAYS.replace('gateway.networking.k8s.io', 'not-the-group-youre-looking-for'),
    TO_CERTIFICATE,
  ),
  grant(
    'reference-grant-wrong-from-kind',
    WEB,
    FROM_GATEWAYS.replace('Gateway', 'HTTPRoute'),
    TO_CERTIFICATE,
  ),
  grant(
    'reference-grant-wrong-from-namespace',
    WEB,
    FROM_GATEWAYS.replace('gateway-conformance-infra', 'not-the-namespace-youre-looking-for'),
    TO_CERTIFICATE,
  ),
  grant(
    'reference-grant-wrong-to-group',
    WEB,
    FROM_GATEWAYS,
    `    - group: not-the-group-youre-looking-for
      kind: Secret
      name: not-the-certificate-youre-looking-for`,
  ),
  grant('reference-grant-wrong-to-kind', WEB, FROM_GATEWAYS, TO_CERTIFICATE.replace('Secret', 'Service')),
  grant(
    'reference-grant-wrong-to-name',
    WEB,
    FROM_GATEWAYS,
    TO_CERTIFICATE.replace('name: certificate', 'name: not-the-certificate-youre-looking-for'),
  ),
].join('---');

/**
 * conformance/tests/httproute-service-types.yaml. The EndpointSlices the suite fills in with the
 * pods of infra-backend-v1 (setupEndpointSlices), and the one the EndpointSlice controller writes for
 * the headless Service with a selector, point at infra-backend-v1's loopback port (`BACKEND_PORT`,
 * in place of targetPort 3000).
 */
const serviceTypes = (backendPort: number) => `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: service-types
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: same-namespace
  rules:
  - matches: [{path: {type: Exact, value: /manual-endpointslices}}]
    backendRefs: [{name: manual-endpointslices, port: 8080}]
  - matches: [{path: {type: Exact, value: /headless}}]
    backendRefs: [{name: headless, port: 8080}]
  - matches: [{path: {type: Exact, value: /headless-manual-endpointslices}}]
    backendRefs: [{name: headless-manual-endpointslices, port: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: manual-endpointslices
  namespace: gateway-conformance-infra
spec:
  ports:
  - name: first-port
    protocol: TCP
    port: 8080
    targetPort: ${backendPort}
---
${manualSlice('manual-endpointslices-ip4', 'manual-endpointslices', 'IPv4', backendPort, '127.0.0.1')}
---
${manualSlice('manual-endpointslices-ip6', 'manual-endpointslices', 'IPv6', backendPort)}
---
apiVersion: v1
kind: Service
metadata:
  name: headless
  namespace: gateway-conformance-infra
spec:
  clusterIP: None
  selector:
    app: infra-backend-v1
  ports:
  - name: first-port
    protocol: TCP
    port: 8080
    targetPort: ${backendPort}
---
${manualSlice('headless-abcde', 'headless', 'IPv4', backendPort, '127.0.0.1')}
---
apiVersion: v1
kind: Service
metadata:
  name: headless-manual-endpointslices
  namespace: gateway-conformance-infra
spec:
  clusterIP: None
  ports:
  - name: first-port
    protocol: TCP
    port: 8080
    targetPort: ${backendPort}
---
${manualSlice('headless-manual-endpointslices-ip4', 'headless-manual-endpointslices', 'IPv4', backendPort, '127.0.0.1')}
---
${manualSlice('headless-manual-endpointslices-ip6', 'headless-manual-endpointslices', 'IPv6', backendPort)}
`;
function manualSlice(
  name: string,
  service: string,
  addressType: string,
  port: number,
  address?: string,
): string {
  const endpoints =
    address === undefined
      ? ''
      : `
endpoints:
- addresses: ["${address}"]
  conditions: {ready: true, serving: true, terminating: false}
  targetRef: {kind: Pod, name: infra-backend-v1-pod, namespace: gateway-conformance-infra}`;
  return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ${name}
  namespace: gateway-conformance-infra
  labels:
    kubernetes.io/service-name: ${service}
addressType: ${addressType}
ports:
- name: first-port
  port: ${port}
  protocol: TCP${endpoints}`;
}

/**
 * conformance/tests/gateway-http-listener-isolation.yaml and
 * gateway-http-listener-isolation-with-hostname-intersection.yaml: one Gateway with four HTTP
 * listeners on port 80 (no hostname, `*.example.com`, `*.foo.example.com`, `abc.foo.example.com`), a
 * route attached to each by sectionName; in the second, every route names all four hostnames and
 * `bar.com`.
 */
const ISOLATION_LISTENERS: ReadonlyArray<[name: string, hostname: string | null]> = [
  ['empty-hostname', null],
  ['wildcard-example-com', '*.example.com'],
  ['wildcard-foo-example-com', '*.foo.example.com'],
  ['abc-foo-example-com', 'abc.foo.example.com'],
];
function listenerIsolation(gateway: string, intersection: boolean): string {
  const suffix = intersection ? '-with-hostname-intersection' : '';
  const listeners = ISOLATION_LISTENERS.map(
    ([name, hostname]) => `
  - name: ${name}
    port: 80
    protocol: HTTP${hostname === null ? '' : `\n    hostname: "${hostname}"`}
    allowedRoutes:
      namespaces:
        from: All`,
  ).join('');
  const routes = ISOLATION_LISTENERS.map(
    ([name]) => `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: attaches-to-${name}${suffix}
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: ${gateway}
    namespace: gateway-conformance-infra
    sectionName: ${name}${
      intersection
        ? `
  hostnames:
  - "bar.com"
  - "*.example.com"
  - "*.foo.example.com"
  - "abc.foo.example.com"`
        : ''
    }
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /${name}
    backendRefs:
    - name: infra-backend-v1
      port: 8080
`,
  ).join('');
  return `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: ${gateway}
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:${listeners}
${routes}`;
}

/** The objects of a manifest file, as the suite applies them (its class name filled in). */
/** The common name of the certificate served on `port` for `servername`. */
function servedCommonName(port: number, servername: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false }, () => {
      const subject = socket.getPeerCertificate().subject as { CN?: string } | undefined;
      socket.destroy();
      resolve(String(subject?.CN ?? ''));
    });
    socket.setTimeout(10_000, () => socket.destroy(new Error('handshake timed out')));
    socket.on('error', reject);
  });
}

describe('Gateway API core Gateway cases with the suite’s manifests, through the built process', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let volume: SecretVolume;
  const fallback = selfSigned('default.test');
  const suiteCertificate = selfSigned('secure.test.com');
  const applied: StoredObject[] = [];

  const apply = (...objects: StoredObject[]) => {
    for (const object of objects) {
      api.applyRaw(object);
      applied.push(object);
    }
  };
  const remove = (object: StoredObject) => {
    const resource = RESOURCE_OF[object.kind] as ResourceKind;
    if (api.get(resource, object.metadata.namespace, object.metadata.name))
      api.delete(resource, object.metadata.namespace, object.metadata.name);
  };
  /** Deletes what a case applied and waits until Tollgate no longer reports its Gateways. */
  const cleanUp = async () => {
    const objects = applied.splice(0).reverse();
    for (const object of objects) remove(object);
    await waitFor(
      async () =>
        (await request(`${tollgate.proxyUrl}/`, { headers: { host: 'cleanup.test' } })).status === 404,
      SETTLE_MS,
    );
  };
  const gatewayOf = (name: string) => api.get('gateways', INFRA, name);
  const gatewayStatus = (name: string) =>
    (gatewayOf(name)?.status ?? {}) as { conditions?: Condition[]; listeners?: ListenerStatus[] };
  const latestConditions = (name: string) => {
    const gateway = gatewayOf(name);
    const conditions = gatewayStatus(name).conditions ?? [];
    return (
      conditions.length > 0 &&
      conditions.every((condition) => condition.observedGeneration === gateway?.metadata.generation)
    );
  };
  /**
   * GatewayStatusMustHaveListeners: the Gateway's conditions of its generation, and exactly these
   * listeners, each as expected (conditions by type).
   */
  const listenersMatch = (name: string, expected: readonly ExpectedListener[]) => {
    if (!latestConditions(name)) return false;
    const listeners = gatewayStatus(name).listeners ?? [];
    if (listeners.length !== expected.length) return false;
    return expected.every((want) => {
      const got = listeners.find((listener) => listener.name === want.name);
      if (got === undefined || got.attachedRoutes !== want.attachedRoutes) return false;
      // The expected kinds among those reported (an implementation may support more); none expected:
      // none reported.
      const kinds = (got.supportedKinds ?? []).map(
        (kind) => `${kind.group ?? 'gateway.networking.k8s.io'}/${kind.kind}`,
      );
      if (want.supportedKinds.length === 0 && kinds.length > 0) return false;
      if (!want.supportedKinds.every((kind) => kinds.includes(`gateway.networking.k8s.io/${kind}`)))
        return false;
      return want.conditions.every(([type, status, reason]) =>
        hasCondition(got.conditions, type, status, reason),
      );
    });
  };
  const waitListeners = async (name: string, expected: readonly ExpectedListener[]) => {
    try {
      await api.waitFor(() => listenersMatch(name, expected), `listeners of ${name}`, SETTLE_MS);
    } catch {
      assert.fail(`listeners of ${name}: ${JSON.stringify(gatewayStatus(name).listeners)}`);
    }
  };
  /** GatewayMustHaveLatestConditions: every Gateway condition carries the current generation. */
  const waitLatestConditions = async (name: string) => {
    try {
      await api.waitFor(() => latestConditions(name), `latest conditions of ${name}`, SETTLE_MS);
    } catch {
      assert.fail(`conditions of ${name}: ${JSON.stringify(gatewayOf(name)?.status)}`);
    }
  };
  const waitRouteCondition = async (
    route: string,
    gateway: string,
    type: string,
    status: 'True' | 'False',
    reason?: string,
    sectionName?: string,
  ) => {
    try {
      await api.waitFor(
        () =>
          hasCondition(
            routeParentConditions(api.get('httproutes', INFRA, route), gateway, sectionName),
            type,
            status,
            reason,
          ),
        `${route}: ${type}=${status}`,
        SETTLE_MS,
      );
    } catch {
      assert.fail(`status of ${route}: ${JSON.stringify(api.get('httproutes', INFRA, route)?.status)}`);
    }
  };
  const expectBackend = async (host: string, path: string, backend: string) => {
    let last = '';
    try {
      await waitFor(async () => {
        const res = await request(`${tollgate.proxyUrl}${path}`, { headers: { host } });
        last = res.status === 200 ? String(res.json().server) : `status ${res.status}`;
        return last === backend;
      }, SETTLE_MS);
    } catch {
      assert.fail(`${host}${path}: expected ${backend}, got ${last}`);
    }
  };
  const expectServedName = async (servername: string, commonName: string) => {
    let last = '';
    try {
      await waitFor(async () => {
        last = await servedCommonName(tollgate.tlsPort as number, servername).catch(
          (error: Error) => error.message,
        );
        return last === commonName;
      }, SETTLE_MS);
    } catch {
      assert.fail(`certificate for ${servername}: expected ${commonName}, got ${last}`);
    }
  };
  const serviceFor = (name: string) =>
    applyBackendService(api, { name, namespace: INFRA, port: (upstreams.get(name) as Upstream).port });

  before(async () => {
    upstreams.set('infra-backend-v1', await startUpstream({ name: 'infra-backend-v1' }));
    api = await startFakeKubeApi();
    // conformance/base/manifests.yaml: the namespaces (with the label the API server adds), the
    // backend, the suite's Secrets.
    for (const [namespace, role] of [
      [INFRA, 'infra'],
      [WEB, 'backend'],
      [APP, 'backend'],
    ] as const)
      api.applyRaw(
        namespaceObject(namespace, { 'gateway-conformance': role, 'kubernetes.io/metadata.name': namespace }),
      );
    api.applyRaw(gatewayClassObject());
    serviceFor('infra-backend-v1');
    for (const [name, namespace] of [
      ['tls-validity-checks-certificate', INFRA],
      ['certificate', WEB],
    ] as const)
      applyTlsSecret(api, { name, namespace, certificate: suiteCertificate });
    volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-core-'));
    tollgate = await startGatewayTollgate(api, {
      dir,
      namespace: INFRA,
      tls: volume,
      kubernetes: { publish_address: ['203.0.113.9'] },
      upstreams: {
        'cleanup.test': {
          paths: { '/never': { servers: [(upstreams.get('infra-backend-v1') as Upstream).address] } },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    volume?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const HTTP_ROUTE = ['HTTPRoute'];

  it('GatewayWithAttachedRoutes: attachedRoutes 1 and 2 on accepted listeners, 1 on an unresolved HTTPS listener; a mismatched hostname is NoMatchingListenerHostname', async () => {
    apply(...manifests(GATEWAY_WITH_ATTACHED_ROUTES));
    try {
      const accepted: ExpectedListener['conditions'] = [
        ['Accepted', 'True'],
        ['ResolvedRefs', 'True'],
      ];
      await waitListeners('gateway-with-one-attached-route', [
        { name: 'http', supportedKinds: HTTP_ROUTE, conditions: accepted, attachedRoutes: 1 },
      ]);
      await waitListeners('gateway-with-two-attached-routes', [
        { name: 'http', supportedKinds: HTTP_ROUTE, conditions: accepted, attachedRoutes: 2 },
      ]);
      await waitRouteCondition(
        'http-route-not-accepted',
        'gateway-with-two-attached-routes',
        'Accepted',
        'False',
        'NoMatchingListenerHostname',
      );
      await waitListeners('unresolved-gateway-with-one-attached-unresolved-route', [
        {
          name: 'tls',
          supportedKinds: HTTP_ROUTE,
          conditions: [
            ['Programmed', 'False'],
            ['ResolvedRefs', 'False'],
          ],
          attachedRoutes: 1,
        },
      ]);
      await waitRouteCondition(
        'http-route-4',
        'unresolved-gateway-with-one-attached-unresolved-route',
        'ResolvedRefs',
        'False',
        undefined,
        'tls',
      );
      // The routes serve, as the listeners report them attached.
      await expectBackend('foo.example.com', '/', 'infra-backend-v1');
    } finally {
      await cleanUp();
    }
  });

  it('GatewayInvalidRouteKind: ResolvedRefs False InvalidRouteKinds; supportedKinds empty, or HTTPRoute beside the invalid kind', async () => {
    apply(...manifests(GATEWAY_ONLY_INVALID_ROUTE_KIND));
    try {
      await waitListeners('gateway-only-invalid-route-kind', [
        {
          name: 'http',
          supportedKinds: [],
          conditions: [['ResolvedRefs', 'False', 'InvalidRouteKinds']],
          attachedRoutes: 0,
        },
      ]);
    } finally {
      await cleanUp();
    }
    apply(...manifests(GATEWAY_SUPPORTED_AND_INVALID_ROUTE_KIND));
    try {
      await waitListeners('gateway-supported-and-invalid-route-kind', [
        {
          name: 'http',
          supportedKinds: HTTP_ROUTE,
          conditions: [['ResolvedRefs', 'False', 'InvalidRouteKinds']],
          attachedRoutes: 0,
        },
      ]);
    } finally {
      await cleanUp();
    }
  });

  it('GatewayModifyListeners: a listener added serves its route (attachedRoutes 1 on both); a listener removed stops serving', async () => {
    const accepted: ExpectedListener['conditions'] = [
      ['Accepted', 'True'],
      ['ResolvedRefs', 'True'],
    ];
    const [addGateway, addRoute] = manifests(GATEWAY_ADD_LISTENER) as [StoredObject, StoredObject];
    apply(addGateway, addRoute);
    try {
      await waitLatestConditions('gateway-add-listener');
      await waitListeners('gateway-add-listener', [
        { name: 'https', supportedKinds: HTTP_ROUTE, conditions: accepted, attachedRoutes: 1 },
      ]);
      const added = structuredClone(addGateway) as StoredObject & { spec: { listeners: unknown[] } };
      added.spec.listeners.push({
        name: 'http',
        port: 80,
        protocol: 'HTTP',
        hostname: 'data.test.com',
        allowedRoutes: { namespaces: { from: 'All' } },
      });
      api.applyRaw(added);
      await waitListeners('gateway-add-listener', [
        { name: 'https', supportedKinds: HTTP_ROUTE, conditions: accepted, attachedRoutes: 1 },
        { name: 'http', supportedKinds: HTTP_ROUTE, conditions: accepted, attachedRoutes: 1 },
      ]);
      await waitLatestConditions('gateway-add-listener');
      assert.equal(gatewayOf('gateway-add-listener')?.metadata.generation, 2);
      await expectBackend('data.test.com', '/', 'infra-backend-v1');
    } finally {
      await cleanUp();
    }

    const [removeGateway, removeRoute] = manifests(GATEWAY_REMOVE_LISTENER) as [StoredObject, StoredObject];
    apply(removeGateway, removeRoute);
    try {
      await waitLatestConditions('gateway-remove-listener');
      await waitListeners('gateway-remove-listener', [
        { name: 'https', supportedKinds: HTTP_ROUTE, conditions: accepted, attachedRoutes: 1 },
        { name: 'http', supportedKinds: HTTP_ROUTE, conditions: accepted, attachedRoutes: 1 },
      ]);
      await expectServedName('secure.test.com', 'secure.test.com');
      const removed = structuredClone(removeGateway) as StoredObject & {
        spec: { listeners: Array<{ name: string }> };
      };
      assert.equal(removed.spec.listeners.length, 2);
      removed.spec.listeners = removed.spec.listeners.filter((listener) => listener.name === 'http');
      api.applyRaw(removed);
      await waitListeners('gateway-remove-listener', [
        { name: 'http', supportedKinds: HTTP_ROUTE, conditions: accepted, attachedRoutes: 1 },
      ]);
      await waitLatestConditions('gateway-remove-listener');
      assert.equal(gatewayOf('gateway-remove-listener')?.metadata.generation, 2);
      // The HTTPS listener's certificate is no longer served for its hostname.
      await expectServedName('secure.test.com', 'default.test');
    } finally {
      await cleanUp();
    }
  });

  it('GatewayNameMaximumLength: a Gateway with a 253-character name gets conditions of its generation', async () => {
    assert.equal(MAXIMUM_LENGTH_NAME.length, 253);
    apply(...manifests(GATEWAY_NAME_MAXIMUM_LENGTH));
    try {
      await waitLatestConditions(MAXIMUM_LENGTH_NAME);
    } finally {
      await cleanUp();
    }
  });

  it('GatewaySecretReferenceGrantAllInNamespace and GatewaySecretReferenceGrantSpecific: a grant of every Secret or of the one named programs the listener', async () => {
    const programmed: ExpectedListener = {
      name: 'https',
      supportedKinds: HTTP_ROUTE,
      conditions: [
        ['Programmed', 'True', 'Programmed'],
        ['ResolvedRefs', 'True'],
      ],
      attachedRoutes: 0,
    };
    apply(
      ...manifests(
        `${secretGateway('gateway-secret-reference-grant-all-in-namespace')}---${grant(
          'reference-grant-all-in-namespace',
          WEB,
          FROM_GATEWAYS,
          `    - group: ""
      kind: Secret`,
        )}`,
      ),
    );
    try {
      await waitListeners('gateway-secret-reference-grant-all-in-namespace', [programmed]);
    } finally {
      await cleanUp();
    }
    apply(
      ...manifests(
        `${secretGateway('gateway-secret-reference-grant-specific')}---${grant(
          'reference-grant-specific',
          WEB,
          FROM_GATEWAYS,
          TO_CERTIFICATE,
        )}`,
      ),
    );
    try {
      await waitListeners('gateway-secret-reference-grant-specific', [programmed]);
    } finally {
      await cleanUp();
    }
  });

  it('GatewaySecretMissingReferenceGrant and GatewaySecretInvalidReferenceGrant: without a grant, or with grants that each miss by one field, ResolvedRefs False RefNotPermitted', async () => {
    const refused: ExpectedListener = {
      name: 'https',
      supportedKinds: HTTP_ROUTE,
      conditions: [['ResolvedRefs', 'False', 'RefNotPermitted']],
      attachedRoutes: 0,
    };
    apply(...manifests(secretGateway('gateway-secret-missing-reference-grant')));
    try {
      await waitListeners('gateway-secret-missing-reference-grant', [refused]);
    } finally {
      await cleanUp();
    }
    // The grants first, so a Gateway status written before Tollgate read them cannot pass the check.
    apply(...manifests(INVALID_GRANTS));
    apply(...manifests(secretGateway('gateway-secret-invalid-reference-grant')));
    try {
      await waitListeners('gateway-secret-invalid-reference-grant', [refused]);
    } finally {
      await cleanUp();
    }
  });

  it('GatewayHTTPListenerIsolation: a request is served only by the routes of the most specific listener matching its host, with and without route hostnames', async () => {
    // The suite's table: each host, each path; the listener the host belongs to serves its own path only.
    const cases: Array<[host: string, path: string, expected: string]> = [];
    const owner: Record<string, string> = {
      'bar.com': 'empty-hostname',
      'bar.example.com': 'wildcard-example-com',
      'bar.foo.example.com': 'wildcard-foo-example-com',
      'abc.foo.example.com': 'abc-foo-example-com',
    };
    for (const [host, listener] of Object.entries(owner))
      for (const [path] of ISOLATION_LISTENERS)
        cases.push([host, `/${path}`, path === listener ? 'infra-backend-v1' : 'status 404']);
    for (const [gateway, intersection] of [
      ['http-listener-isolation', false],
      ['http-listener-isolation-with-hostname-intersection', true],
    ] as const) {
      apply(...manifests(listenerIsolation(gateway, intersection)));
      try {
        const suffix = intersection ? '-with-hostname-intersection' : '';
        for (const [listener] of ISOLATION_LISTENERS) {
          await waitRouteCondition(
            `attaches-to-${listener}${suffix}`,
            gateway,
            'Accepted',
            'True',
            undefined,
            listener,
          );
          await waitRouteCondition(
            `attaches-to-${listener}${suffix}`,
            gateway,
            'ResolvedRefs',
            'True',
            undefined,
            listener,
          );
        }
        // The served ones first: once they answer, the table is live, and a 404 is the isolation's.
        const served = cases.filter(([, , expected]) => expected !== 'status 404');
        const isolated = cases.filter(([, , expected]) => expected === 'status 404');
        for (const [host, path, expected] of [...served, ...isolated])
          await expectBackend(host, path, expected);
      } finally {
        await cleanUp();
      }
    }
  });

  it('GatewayOptionalAddressValue: a Gateway asking for an IPAddress without a value gets conditions of its generation and the published address', async () => {
    // conformance/tests/gateway-optional-address-value.yaml
    apply(
      ...manifests(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gateway-without-address-value
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  addresses:
  - type: "IPAddress"
  listeners:
  - name: http
    port: 8080
    protocol: HTTP
`),
    );
    try {
      await waitLatestConditions('gateway-without-address-value');
      const status = gatewayOf('gateway-without-address-value')?.status as
        | { addresses?: unknown[] }
        | undefined;
      const addresses = status?.addresses;
      assert.deepEqual(addresses, [{ type: 'IPAddress', value: '203.0.113.9' }]);
    } finally {
      await cleanUp();
    }
  });

  it('HTTPRouteServiceTypes: Services with manual EndpointSlices, headless, and headless with manual EndpointSlices all serve', async () => {
    const sameNamespace = manifests(SAME_NAMESPACE_GATEWAY);
    apply(...sameNamespace, ...manifests(serviceTypes((upstreams.get('infra-backend-v1') as Upstream).port)));
    try {
      await waitRouteCondition('service-types', 'same-namespace', 'Accepted', 'True');
      await waitRouteCondition('service-types', 'same-namespace', 'ResolvedRefs', 'True');
      for (const path of ['/manual-endpointslices', '/headless-manual-endpointslices', '/headless'])
        await expectBackend('example.test', path, 'infra-backend-v1');
    } finally {
      await cleanUp();
    }
  });
});
