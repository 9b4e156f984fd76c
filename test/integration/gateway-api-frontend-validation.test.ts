/**
 * The frontend client-certificate validation cases of the Gateway API conformance suite
 * (kubernetes-sigs/gateway-api v1.6, conformance/tests/gateway-with-clientcertificate-validation*,
 * gateway-invalid-default-frontend-client-certificate-validation and
 * gateway-with-invalid-clientcertificate-validation), run through the built process against the fake
 * API server with the suite's manifests (only `{GATEWAY_CLASS_NAME}` filled in) and the expectations
 * of each `.go` file. The suite reaches the Gateway's listeners on ports 443 and 8443; Tollgate serves
 * every HTTPS listener on its one TLS port (docs/gateway-api.md#ports), so the request for
 * `second-example.org` reaches the port-8443 listener by its hostname (SNI), and the one for
 * `example.org` the hostname-less port-443 listener. A request "fails" as the suite's does: a TLS or
 * HTTP error, the server's certificate checked against the listener's own.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasOpenssl, type IssuedCertificate, SecretVolume, selfSigned, TestCa } from '../helpers/certs.ts';
import { gatewayClassObject, hasCondition, namespaceObject } from '../helpers/fake-gateway-api.ts';
import {
  configMap,
  type FakeKubeApi,
  type ResourceKind,
  type StoredObject,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import {
  applyBackendService,
  applyTlsSecret,
  CONFORMANCE_INFRA,
  httpsGet,
  manifests,
  startGatewayTollgate,
} from '../helpers/gateway-conformance.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const INFRA = CONFORMANCE_INFRA;
const WEB = 'gateway-conformance-web-backend';
const SETTLE_MS = 10_000;

const RESOURCE_OF: Record<string, ResourceKind> = { Gateway: 'gateways', HTTPRoute: 'httproutes' };

interface Condition {
  type: string;
  status: string;
  reason: string;
  observedGeneration?: number;
}

/** The two HTTPS listeners both frontend cases give their Gateway, and their two routes. */
const twoListeners = (gateway: string, routePrefix: string) => `
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    allowedRoutes:
      namespaces:
        from: Same
    tls:
      certificateRefs:
      - group: ""
        kind: Secret
        name: tls-validity-checks-certificate
        namespace: gateway-conformance-infra
  - name: https-with-hostname
    port: 8443
    hostname: second-example.org
    protocol: HTTPS
    allowedRoutes:
      namespaces:
        from: Same
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
  name: ${routePrefix}
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: ${gateway}
  hostnames:
  - example.org
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: ${routePrefix}-no-hostname
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: ${gateway}
    sectionName: https-with-hostname
  rules:
  - backendRefs:
    - name: infra-backend-v2
      port: 8080
`;

// conformance/tests/gateway-with-clientcertificate-validation.yaml
const CLIENT_VALIDATION_DEFAULT = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: client-validation-default
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs:
          - kind: ConfigMap
            group: ""
            name: tls-validity-checks-ca-certificate
      perPort:
      - port: 8443
        tls:
          validation:
            caCertificateRefs:
            - kind: ConfigMap
              group: ""
              name: tls-validity-checks-per-port-ca-certificate
${twoListeners('client-validation-default', 'client-certificate-validation-https-test')}`;

// conformance/tests/gateway-with-clientcertificate-validation-insecure-fallback.yaml
const CLIENT_VALIDATION_INSECURE_FALLBACK = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: client-validation-insecure-fallback
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  tls:
    frontend:
      default:
        validation:
          mode: AllowInsecureFallback
          caCertificateRefs:
          - kind: ConfigMap
            group: ""
            name: tls-validity-checks-ca-certificate
      perPort:
      - port: 8443
        tls:
          validation:
            mode: AllowInsecureFallback
            caCertificateRefs:
            - kind: ConfigMap
              group: ""
              name: tls-validity-checks-per-port-ca-certificate
${twoListeners('client-validation-insecure-fallback', 'client-cert-validation-insecure-fallback-test')}`;

// conformance/tests/gateway-invalid-default-frontend-client-certificate-validation.yaml
const INVALID_DEFAULT = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: invalid-default-client-validation-config
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs:
          - kind: ConfigMap
            group: ""
            name: does-not-exist
      perPort:
      - port: 80
        tls:
          validation:
            caCertificateRefs:
            - kind: ConfigMap
              group: ""
              name: tls-validity-checks-per-port-ca-certificate
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    allowedRoutes:
      namespaces:
        from: Same
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
        from: Same
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: invalid-default-client-validation-config
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: invalid-default-client-validation-config
  hostnames:
  - example.org
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
`;

// conformance/tests/gateway-with-invalid-clientcertificate-validation.yaml
const listenerOn = (name: string, port: number, hostname?: string) => `
  - name: ${name}
    port: ${port}${hostname === undefined ? '' : `\n    hostname: ${hostname}`}
    protocol: HTTPS
    allowedRoutes:
      namespaces:
        from: Same
    tls:
      certificateRefs:
      - group: ""
        kind: Secret
        name: tls-validity-checks-certificate
        namespace: gateway-conformance-infra`;
const INVALID_VALIDATION = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gateway-with-invalid-client-cert-validation
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs:
          - kind: ConfigMap
            group: ""
            name: tls-validity-checks-ca-certificate
      perPort:
      - port: 7443
        tls:
          validation:
            caCertificateRefs:
            - kind: ConfigMap
              group: ""
              name: non-exisitng-cm
      - port: 8443
        tls:
          validation:
            caCertificateRefs:
            - kind: Service
              group: ""
              name: infra-backend-v2
      - port: 6443
        tls:
          validation:
            caCertificateRefs:
            - kind: ConfigMap
              group: ""
              name: web-backend-cm
              namespace: gateway-conformance-web-backend
  listeners:${listenerOn('https', 443)}${listenerOn('https-unresolved', 7443, 'first-example.org')}${listenerOn(
    'https-invalid-kind',
    8443,
    'second-example.org',
  )}${listenerOn('https-grant-missing', 6443, 'fourth-example.org')}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: misconfigured-client-certificate-validation-https-test
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: client-validation-invalid
  hostnames:
  - example.org
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
`;

/**
 * GET / over TLS to `servername`, the server's certificate verified against `serverCa` (the
 * listener's own certificate, as the suite passes it), with a client certificate or none. Resolves
 * with the backend that answered, or `status N`; rejects when the request fails.
 */
function tlsGet(
  port: number,
  servername: string,
  serverCa: Buffer,
  client?: IssuedCertificate,
): Promise<string> {
  return httpsGet(port, servername, {
    ca: serverCa,
    // The chain is checked against `serverCa`; the suite's certificate names its hosts, this one
    // only example.org.
    checkServerIdentity: () => undefined,
    ...(client === undefined ? {} : { cert: client.cert, key: client.key }),
  }).then(({ status, body }) => (status === 200 ? String(JSON.parse(body).server) : `status ${status}`));
}

describe('Gateway API frontend client-certificate validation cases with the suite’s manifests, through the built process', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let volume: SecretVolume;
  let ca: TestCa;
  let perPortCa: TestCa;
  /** tls-validity-checks-client-certificate and tls-validity-checks-per-port-client-certificate. */
  let clientCertificate: IssuedCertificate;
  let perPortClientCertificate: IssuedCertificate;
  const fallback = selfSigned('default.test');
  const serverCertificate = selfSigned('example.org', { ip: false });
  const applied: StoredObject[] = [];

  const apply = (text: string) => {
    for (const object of manifests(text)) {
      api.applyRaw(object);
      applied.push(object);
    }
  };
  const cleanUp = async () => {
    for (const object of applied.splice(0).reverse()) {
      const resource = RESOURCE_OF[object.kind] as ResourceKind;
      if (api.get(resource, object.metadata.namespace, object.metadata.name))
        api.delete(resource, object.metadata.namespace, object.metadata.name);
    }
    await waitFor(
      async () =>
        (await request(`${tollgate.proxyUrl}/`, { headers: { host: 'cleanup.test' } })).status === 404,
      SETTLE_MS,
    );
  };
  const gatewayStatus = (name: string) =>
    (api.get('gateways', INFRA, name)?.status ?? {}) as {
      conditions?: Condition[];
      listeners?: Array<{ name: string; conditions: Condition[] }>;
    };
  /** GatewayListenerMustHaveConditions: the listener has each condition (reason where given). */
  const waitListenerConditions = async (
    gateway: string,
    listener: string,
    expected: Array<[type: string, status: 'True' | 'False', reason?: string]>,
  ) => {
    const conditions = () =>
      gatewayStatus(gateway).listeners?.find((item) => item.name === listener)?.conditions;
    try {
      await api.waitFor(
        () => expected.every(([type, status, reason]) => hasCondition(conditions(), type, status, reason)),
        `conditions of listener ${listener}`,
        SETTLE_MS,
      );
    } catch {
      assert.fail(`listener ${gateway}/${listener}: ${JSON.stringify(conditions())}`);
    }
  };
  const expectBackend = async (servername: string, backend: string, client?: IssuedCertificate) => {
    let last = '';
    try {
      await waitFor(async () => {
        last = await tlsGet(tollgate.tlsPort as number, servername, serverCertificate.cert, client).catch(
          (error: Error) => error.message,
        );
        return last === backend;
      }, SETTLE_MS);
    } catch {
      assert.fail(`https://${servername}/: expected ${backend}, got ${last}`);
    }
  };
  /** MakeTLSRequestAndExpectEventuallyConsistentFailureResponse: the request fails (no answer). */
  const expectFailure = async (servername: string, client?: IssuedCertificate) => {
    let last = '';
    try {
      await waitFor(async () => {
        try {
          last = await tlsGet(tollgate.tlsPort as number, servername, serverCertificate.cert, client);
          return false;
        } catch {
          return true;
        }
      }, SETTLE_MS);
    } catch {
      assert.fail(`https://${servername}/: expected the request to fail, got ${last}`);
    }
  };
  const serviceFor = (name: string) =>
    applyBackendService(api, { name, namespace: INFRA, port: (upstreams.get(name) as Upstream).port });

  before(async () => {
    ca = new TestCa('tls-validity-checks-ca');
    perPortCa = new TestCa('tls-validity-checks-per-port-ca');
    clientCertificate = ca.issue('client');
    perPortClientCertificate = perPortCa.issue('per-port-client');
    for (const name of ['infra-backend-v1', 'infra-backend-v2'])
      upstreams.set(name, await startUpstream({ name }));
    api = await startFakeKubeApi();
    // conformance/base/manifests.yaml: the namespaces, the backends, the suite's certificates.
    api.applyRaw(namespaceObject(INFRA, { 'gateway-conformance': 'infra' }));
    api.applyRaw(namespaceObject(WEB, { 'gateway-conformance': 'backend' }));
    api.applyRaw(gatewayClassObject());
    serviceFor('infra-backend-v1');
    serviceFor('infra-backend-v2');
    applyTlsSecret(api, {
      name: 'tls-validity-checks-certificate',
      namespace: INFRA,
      certificate: serverCertificate,
    });
    api.apply(
      configMap({
        name: 'tls-validity-checks-ca-certificate',
        namespace: INFRA,
        data: { 'ca.crt': ca.cert.toString() },
      }),
    );
    api.apply(
      configMap({
        name: 'tls-validity-checks-per-port-ca-certificate',
        namespace: INFRA,
        data: { 'ca.crt': perPortCa.cert.toString() },
      }),
    );
    api.apply(configMap({ name: 'web-backend-cm', namespace: WEB, data: { 'ca.crt': ca.cert.toString() } }));
    volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-frontend-'));
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
    ca?.remove();
    perPortCa?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('GatewayFrontendClientCertificateValidation: the default CA on the port-443 listener, the perPort CA on the port-8443 one; the other CA’s client is refused', async () => {
    apply(CLIENT_VALIDATION_DEFAULT);
    try {
      // Validate default configuration.
      await expectBackend('example.org', 'infra-backend-v1', clientCertificate);
      await expectFailure('example.org', perPortClientCertificate);
      await expectFailure('example.org');
      // Validate per port configuration.
      await expectBackend('second-example.org', 'infra-backend-v2', perPortClientCertificate);
      await expectFailure('second-example.org', clientCertificate);
      assert.equal(
        gatewayStatus('client-validation-default').conditions?.some(
          (item) => item.type === 'InsecureFrontendValidationMode',
        ),
        false,
        'no InsecureFrontendValidationMode condition without AllowInsecureFallback',
      );
    } finally {
      await cleanUp();
    }
  });

  it('GatewayFrontendClientCertificateValidationInsecureFallback: InsecureFrontendValidationMode True; any client, with a matching, another or no certificate, passes', async () => {
    apply(CLIENT_VALIDATION_INSECURE_FALLBACK);
    try {
      await api
        .waitFor(
          () =>
            hasCondition(
              gatewayStatus('client-validation-insecure-fallback').conditions,
              'InsecureFrontendValidationMode',
              'True',
              'ConfigurationChanged',
            ),
          'InsecureFrontendValidationMode',
          SETTLE_MS,
        )
        .catch(() => assert.fail(JSON.stringify(gatewayStatus('client-validation-insecure-fallback'))));
      for (const client of [clientCertificate, perPortClientCertificate, undefined])
        await expectBackend('example.org', 'infra-backend-v1', client);
      for (const client of [perPortClientCertificate, clientCertificate, undefined])
        await expectBackend('second-example.org', 'infra-backend-v2', client);
    } finally {
      await cleanUp();
    }
  });

  it('GatewayFrontendInvalidDefaultClientCertificateValidation: an unresolvable default CA leaves the HTTP listener serving and the HTTPS listener NoValidCACertificate, not served', async () => {
    apply(INVALID_DEFAULT);
    try {
      await waitListenerConditions('invalid-default-client-validation-config', 'http', [
        ['ResolvedRefs', 'True'],
        ['Accepted', 'True'],
        ['Programmed', 'True'],
      ]);
      let last = '';
      await waitFor(async () => {
        const res = await request(`${tollgate.proxyUrl}/`, { headers: { host: 'example.org' } });
        last = res.status === 200 ? String(res.json().server) : `status ${res.status}`;
        return last === 'infra-backend-v1';
      }, SETTLE_MS).catch(() => assert.fail(`http://example.org/: ${last}`));
      await waitListenerConditions('invalid-default-client-validation-config', 'https', [
        ['ResolvedRefs', 'False', 'InvalidCACertificateRef'],
        ['Accepted', 'False', 'NoValidCACertificate'],
        ['Programmed', 'False'],
      ]);
      await expectFailure('example.org');
    } finally {
      await cleanUp();
    }
  });

  it('GatewayInvalidFrontendClientCertificateValidation: each invalid perPort validation (missing, wrong kind, no grant) refuses its own listener only', async () => {
    apply(INVALID_VALIDATION);
    try {
      const gateway = 'gateway-with-invalid-client-cert-validation';
      await waitListenerConditions(gateway, 'https', [
        ['ResolvedRefs', 'True'],
        ['Accepted', 'True'],
        ['Programmed', 'True'],
      ]);
      for (const [listener, reason] of [
        ['https-unresolved', 'InvalidCACertificateRef'],
        ['https-invalid-kind', 'InvalidCACertificateKind'],
        ['https-grant-missing', 'RefNotPermitted'],
      ] as const)
        await waitListenerConditions(gateway, listener, [
          ['ResolvedRefs', 'False', reason],
          ['Accepted', 'False', 'NoValidCACertificate'],
          ['Programmed', 'False'],
        ]);
    } finally {
      await cleanUp();
    }
  });
});
