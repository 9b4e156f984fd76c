/**
 * Gateway-level cases of the Gateway API conformance suite (kubernetes-sigs/gateway-api v1.6,
 * conformance/tests), ported with their intent and run through the built process against the fake
 * API server: GatewayListenerUnsupportedProtocol (gateway-invalid-listeners-unsupported-protocol),
 * GatewayInvalidParametersRef (gateway-invalid-parameters-ref) and a GatewayClass's parametersRef,
 * GatewayClassObservedGenerationBump, and HTTPRouteHTTPSListener (a hostname-less HTTPS listener's
 * own certificate for every name nothing more specific claims).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';
import {
  gatewayClassObject,
  gatewayObject,
  hasCondition,
  httpRouteObject,
  namespaceObject,
} from '../helpers/fake-gateway-api.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const INFRA = 'gateway-conformance-infra';
const SETTLE_MS = 10_000;

interface Condition {
  type: string;
  status: string;
  reason: string;
  observedGeneration?: number;
}
interface ListenerStatus {
  name: string;
  supportedKinds?: unknown[];
  attachedRoutes: number;
  conditions: Condition[];
}

/** A self-signed certificate for several DNS names (as the suite's tls-validity-checks-certificate). */
function certificateFor(names: readonly string[]): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-gw-cert-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '2',
        '-subj',
        `/CN=${names[0]}`,
        '-addext',
        `subjectAltName=${names.map((name) => `DNS:${name}`).join(',')}`,
      ],
      { stdio: 'ignore' },
    );
    return {
      cert: readFileSync(join(dir, 'cert.pem'), 'utf8'),
      key: readFileSync(join(dir, 'key.pem'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** GET / over TLS to `servername`, verifying the served certificate against `ca` only. */
function verifiedGet(port: number, host: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, servername: host, headers: { host }, ca, agent: false },
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

describe('Gateway API Gateway-level conformance cases through the built process', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let volume: SecretVolume;
  const fallback = selfSigned('default.test');
  const suiteCertificate = certificateFor(['example.org', 'unknown-example.org', 'second-example.org']);

  const gatewayStatus = (name: string) =>
    (api.get('gateways', INFRA, name)?.status ?? {}) as {
      conditions?: Condition[];
      listeners?: ListenerStatus[];
    };
  const classConditions = (name: string) =>
    ((api.get('gatewayclasses', '', name)?.status ?? {}) as { conditions?: Condition[] }).conditions;
  const waitStatus = async (what: string, check: () => boolean, describe: () => unknown) => {
    try {
      await api.waitFor(check, what, SETTLE_MS);
    } catch {
      assert.fail(`${what}: ${JSON.stringify(describe())}`);
    }
  };
  const serviceFor = (name: string) => {
    const port = (upstreams.get(name) as Upstream).port;
    api.apply(service({ name, namespace: INFRA, ports: [{ name: 'http', port: 8080, targetPort: port }] }));
    api.apply(
      endpointSlice({
        service: name,
        namespace: INFRA,
        ports: [{ name: 'http', port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
  };

  before(async () => {
    for (const name of ['infra-backend-v1', 'infra-backend-v2'])
      upstreams.set(name, await startUpstream({ name }));
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(INFRA, { 'gateway-conformance': 'infra' }));
    api.applyRaw(gatewayClassObject());
    serviceFor('infra-backend-v1');
    serviceFor('infra-backend-v2');
    volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-gateways-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
        kubernetes: {
          kubeconfig: api.writeKubeconfig(dir, INFRA),
          gateway_class: 'tollgate',
          publish_address: ['203.0.113.9'],
        },
      },
      upstreams: { upstreams: {} },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    volume?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('GatewayListenerUnsupportedProtocol: no valid listener is Accepted=False ListenersNotValid; some valid is Accepted=True ListenersNotValid', async () => {
    api.applyRaw(
      gatewayObject({
        name: 'gateway-only-unsupported-protocols',
        namespace: INFRA,
        listeners: [{ name: 'invalid', port: 1111, protocol: 'INVALID' }],
      }),
    );
    api.applyRaw(
      gatewayObject({
        name: 'gateway-supported-and-unsupported-protocols',
        namespace: INFRA,
        listeners: [
          { name: 'http', port: 80, protocol: 'HTTP' },
          { name: 'invalid', port: 1111, protocol: 'INVALID' },
        ],
      }),
    );
    await waitStatus(
      'only-unsupported Gateway not accepted',
      () =>
        hasCondition(
          gatewayStatus('gateway-only-unsupported-protocols').conditions,
          'Accepted',
          'False',
          'ListenersNotValid',
        ),
      () => gatewayStatus('gateway-only-unsupported-protocols'),
    );
    const only = gatewayStatus('gateway-only-unsupported-protocols');
    assert.equal(only.conditions?.find((c) => c.type === 'Accepted')?.observedGeneration, 1);
    const invalid = only.listeners?.find((listener) => listener.name === 'invalid');
    assert.deepEqual(invalid?.supportedKinds, []);
    assert.equal(invalid?.attachedRoutes, 0);
    assert.ok(hasCondition(invalid?.conditions, 'Accepted', 'False', 'UnsupportedProtocol'));

    await waitStatus(
      'mixed Gateway accepted with ListenersNotValid',
      () =>
        hasCondition(
          gatewayStatus('gateway-supported-and-unsupported-protocols').conditions,
          'Accepted',
          'True',
          'ListenersNotValid',
        ),
      () => gatewayStatus('gateway-supported-and-unsupported-protocols'),
    );
    const mixed = gatewayStatus('gateway-supported-and-unsupported-protocols').listeners ?? [];
    const http = mixed.find((listener) => listener.name === 'http');
    assert.ok(hasCondition(http?.conditions, 'Accepted', 'True', 'Accepted'));
    assert.ok(
      (http?.supportedKinds ?? []).some(
        (kind) => (kind as { kind: string }).kind === 'HTTPRoute',
        'the valid listener supports HTTPRoute',
      ),
    );
    const bad = mixed.find((listener) => listener.name === 'invalid');
    assert.deepEqual(bad?.supportedKinds, []);
    assert.ok(hasCondition(bad?.conditions, 'Accepted', 'False', 'UnsupportedProtocol'));
    api.delete('gateways', INFRA, 'gateway-only-unsupported-protocols');
    api.delete('gateways', INFRA, 'gateway-supported-and-unsupported-protocols');
  });

  it('GatewayInvalidParametersRef: an infrastructure.parametersRef Tollgate cannot resolve is Accepted=False InvalidParameters, and its routes are not served', async () => {
    const gateway = gatewayObject({
      name: 'gateway-invalid-parameters-ref',
      namespace: INFRA,
      listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }],
    });
    (gateway.spec as Record<string, unknown>).infrastructure = {
      parametersRef: { group: 'invalid.io', kind: 'InvalidParameters', name: 'invalid' },
    };
    api.applyRaw(gateway);
    api.applyRaw(
      httpRouteObject({
        name: 'behind-invalid-parameters',
        namespace: INFRA,
        parentRefs: [{ name: 'gateway-invalid-parameters-ref' }],
        rules: [{ backendRefs: [{ name: 'infra-backend-v1', port: 8080 }] }],
      }),
    );
    await waitStatus(
      'Gateway InvalidParameters',
      () =>
        hasCondition(
          gatewayStatus('gateway-invalid-parameters-ref').conditions,
          'Accepted',
          'False',
          'InvalidParameters',
        ),
      () => gatewayStatus('gateway-invalid-parameters-ref'),
    );
    assert.ok(
      hasCondition(gatewayStatus('gateway-invalid-parameters-ref').conditions, 'Programmed', 'False'),
    );
    assert.equal((await request(`${tollgate.proxyUrl}/`, { headers: { host: 'any.example' } })).status, 404);
    api.delete('httproutes', INFRA, 'behind-invalid-parameters');
    api.delete('gateways', INFRA, 'gateway-invalid-parameters-ref');
  });

  it("GatewayClassObservedGenerationBump: every class of Tollgate's controllerName gets a status with its generation; a parametersRef makes it InvalidParameters", async () => {
    const second = gatewayClassObject('gatewayclass-observed-generation-bump');
    const spec = { ...(second.spec as Record<string, unknown>), description: 'old' };
    api.applyRaw({ ...second, spec });
    await waitStatus(
      'second class accepted at generation 1',
      () =>
        (classConditions('gatewayclass-observed-generation-bump') ?? []).some(
          (c) => c.type === 'Accepted' && c.status === 'True' && c.observedGeneration === 1,
        ),
      () => classConditions('gatewayclass-observed-generation-bump'),
    );
    api.applyRaw({ ...second, spec: { ...spec, description: 'new' } });
    assert.equal(
      api.get('gatewayclasses', '', 'gatewayclass-observed-generation-bump')?.metadata.generation,
      2,
    );
    await waitStatus(
      'second class observedGeneration 2',
      () =>
        (classConditions('gatewayclass-observed-generation-bump') ?? []).some(
          (c) => c.type === 'Accepted' && c.status === 'True' && c.observedGeneration === 2,
        ),
      () => classConditions('gatewayclass-observed-generation-bump'),
    );
    // A class naming parameters Tollgate cannot understand: Accepted=False, InvalidParameters.
    api.applyRaw({
      ...second,
      spec: {
        ...spec,
        parametersRef: { group: 'example.com', kind: 'Config', name: 'nope' },
      },
    });
    await waitStatus(
      'class InvalidParameters',
      () =>
        hasCondition(
          classConditions('gatewayclass-observed-generation-bump'),
          'Accepted',
          'False',
          'InvalidParameters',
        ),
      () => classConditions('gatewayclass-observed-generation-bump'),
    );
    // The configured class is untouched and keeps serving.
    assert.ok(hasCondition(classConditions('tollgate'), 'Accepted', 'True'));
    api.delete('gatewayclasses', '', 'gatewayclass-observed-generation-bump');
  });

  it("HTTPRouteHTTPSListener: a hostname-less HTTPS listener presents its own certificate for names no route claims (404), a route's host answers", async () => {
    api.apply(
      secret({
        name: 'tls-validity-checks-certificate',
        namespace: INFRA,
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': suiteCertificate.cert, 'tls.key': suiteCertificate.key },
      }),
    );
    const https = (name: string, hostname?: string) => ({
      name,
      port: 443,
      protocol: 'HTTPS',
      ...(hostname === undefined ? {} : { hostname }),
      allowedRoutes: { namespaces: { from: 'Same' } },
      tls: {
        certificateRefs: [{ group: '', kind: 'Secret', name: 'tls-validity-checks-certificate' }],
      },
    });
    api.applyRaw(
      gatewayObject({
        name: 'same-namespace-with-https-listener',
        namespace: INFRA,
        listeners: [https('https'), https('https-with-hostname', 'second-example.org')],
      }),
    );
    api.applyRaw(
      httpRouteObject({
        name: 'httproute-https-test',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace-with-https-listener' }],
        hostnames: ['example.org'],
        rules: [{ backendRefs: [{ name: 'infra-backend-v1', port: 8080 }] }],
      }),
    );
    api.applyRaw(
      httpRouteObject({
        name: 'httproute-https-test-no-hostname',
        namespace: INFRA,
        parentRefs: [{ name: 'same-namespace-with-https-listener', sectionName: 'https-with-hostname' }],
        rules: [{ backendRefs: [{ name: 'infra-backend-v2', port: 8080 }] }],
      }),
    );
    const port = tollgate.tlsPort as number;
    const cases: Array<[string, number, string | null]> = [
      ['example.org', 200, 'infra-backend-v1'],
      ['unknown-example.org', 404, null],
      ['second-example.org', 200, 'infra-backend-v2'],
    ];
    for (const [host, status, backend] of cases) {
      let last = '';
      try {
        await waitFor(async () => {
          try {
            const res = await verifiedGet(port, host, suiteCertificate.cert);
            last = `${res.status} ${res.body.slice(0, 120)}`;
            if (res.status !== status) return false;
            return backend === null || String(JSON.parse(res.body).server) === backend;
          } catch (error) {
            last = (error as Error).message;
            return false;
          }
        }, SETTLE_MS);
      } catch {
        assert.fail(`https://${host}/: expected ${status} ${backend ?? ''}, got ${last}`);
      }
    }
    api.delete('httproutes', INFRA, 'httproute-https-test');
    api.delete('httproutes', INFRA, 'httproute-https-test-no-hostname');
    api.delete('gateways', INFRA, 'same-namespace-with-https-listener');
  });
});
