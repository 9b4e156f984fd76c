/**
 * The shared set-up of the Gateway API conformance ports (test/integration/gateway-api-*.test.ts):
 * the suite's manifests as written, a backend Service with its EndpointSlice, the wait for a route
 * the controller accepted, and Tollgate started against the fake API server.
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import { parseAllDocuments } from 'yaml';
import type { SecretVolume } from './certs.ts';
import { hasCondition, routeParentConditions } from './fake-gateway-api.ts';
import { endpointSlice, type FakeKubeApi, type StoredObject, secret, service } from './fake-kube-api.ts';
import { startTollgate, type Tollgate } from './tollgate.ts';

/** The suite's infrastructure namespace (conformance/base/manifests.yaml). */
export const CONFORMANCE_INFRA = 'gateway-conformance-infra';

/** conformance/base/manifests.yaml: the Gateway `same-namespace` most cases attach to. */
export const SAME_NAMESPACE_GATEWAY = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: same-namespace
  namespace: gateway-conformance-infra
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: Same
`;

/** A suite manifest file's objects, with `{GATEWAY_CLASS_NAME}` filled in as the suite does. */
export function manifests(text: string, gatewayClass = 'tollgate'): StoredObject[] {
  return parseAllDocuments(text.replaceAll('{GATEWAY_CLASS_NAME}', gatewayClass)).map(
    (document) => document.toJS() as StoredObject,
  );
}

/**
 * A backend as the suite deploys it: Service `name` (port 8080 unless given) and an EndpointSlice
 * with one loopback endpoint on `port`, where the test's upstream listens.
 */
export function applyBackendService(
  api: FakeKubeApi,
  spec: { name: string; namespace: string; port: number; servicePort?: number },
): void {
  const { name, namespace, port } = spec;
  api.apply(
    service({ name, namespace, ports: [{ name: 'http', port: spec.servicePort ?? 8080, targetPort: port }] }),
  );
  api.apply(
    endpointSlice({
      service: name,
      namespace,
      ports: [{ name: 'http', port }],
      endpoints: [{ ip: '127.0.0.1' }],
    }),
  );
}

/** A `kubernetes.io/tls` Secret holding `certificate`, as the suite's Secrets for HTTPS listeners. */
export function applyTlsSecret(
  api: FakeKubeApi,
  spec: { name: string; namespace: string; certificate: { cert: Buffer | string; key: Buffer | string } },
): void {
  api.apply(
    secret({
      name: spec.name,
      namespace: spec.namespace,
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': spec.certificate.cert.toString(), 'tls.key': spec.certificate.key.toString() },
    }),
  );
}

/**
 * GET / over TLS to Tollgate's TLS listener on loopback `port`, with SNI and Host `servername`;
 * `tls` adds the client's TLS options (the CA to verify against, a client certificate). Rejects when
 * the handshake or the request fails.
 */
export function httpsGet(
  port: number,
  servername: string,
  tls: Pick<https.RequestOptions, 'ca' | 'cert' | 'key' | 'checkServerIdentity'>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, servername, headers: { host: servername }, agent: false, ...tls },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
}

/**
 * Waits until Tollgate wrote Accepted=True and ResolvedRefs=True for the route's parent `gateway`;
 * fails with the route's status when it did not within `timeoutMs`.
 */
export async function waitRouteAccepted(
  api: FakeKubeApi,
  spec: { namespace: string; route: string; gateway: string; timeoutMs: number },
): Promise<void> {
  const { namespace, route, gateway } = spec;
  try {
    await api.waitFor(
      () => {
        const conditions = routeParentConditions(api.get('httproutes', namespace, route), gateway);
        return (
          hasCondition(conditions, 'Accepted', 'True') && hasCondition(conditions, 'ResolvedRefs', 'True')
        );
      },
      `${route} accepted`,
      spec.timeoutMs,
    );
  } catch {
    assert.fail(`${route}: ${JSON.stringify(api.get('httproutes', namespace, route)?.status)}`);
  }
}

/**
 * Tollgate started as the Gateway API controller of class `tollgate`, reading the fake API server
 * through a kubeconfig written into `dir`; `main` and `kubernetes` add keys, `upstreams` is the
 * static table (none by default). With `tls`, a TLS listener on loopback whose default certificate
 * is the volume's `tls.crt`/`tls.key`.
 */
export function startGatewayTollgate(
  api: FakeKubeApi,
  spec: {
    dir: string;
    namespace: string;
    main?: Record<string, unknown>;
    tls?: SecretVolume;
    kubernetes?: Record<string, unknown>;
    upstreams?: Record<string, unknown>;
  },
): Promise<Tollgate> {
  return startTollgate({
    main: {
      access_log: false,
      ...(spec.tls
        ? {
            proxy_address_tls: '127.0.0.1:0',
            tls_certificate: spec.tls.path('tls.crt'),
            tls_key_file: spec.tls.path('tls.key'),
          }
        : {}),
      ...spec.main,
      kubernetes: {
        kubeconfig: api.writeKubeconfig(spec.dir, spec.namespace),
        gateway_class: 'tollgate',
        ...spec.kubernetes,
      },
    },
    upstreams: { upstreams: spec.upstreams ?? {} },
    env: { KUBECONFIG: '' },
  });
}
