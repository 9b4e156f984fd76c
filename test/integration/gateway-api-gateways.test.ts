/**
 * Gateway-level cases of the Gateway API conformance suite (kubernetes-sigs/gateway-api v1.6,
 * conformance/tests), ported with their intent and run through the built process against the fake
 * API server: GatewayListenerUnsupportedProtocol (gateway-invalid-listeners-unsupported-protocol),
 * GatewayInvalidParametersRef (gateway-invalid-parameters-ref) and a GatewayClass's parametersRef,
 * GatewayClassObservedGenerationBump, HTTPRouteHTTPSListener (a hostname-less HTTPS listener's
 * own certificate for every name nothing more specific claims), listener conflicts between Gateways
 * sharing a port, and with one deployment per Gateway (kubernetes.gateway_names)
 * HTTPRouteMultipleGateways and HTTPRouteCrossNamespace.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
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
  tollgatePolicyObject,
} from '../helpers/fake-gateway-api.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import {
  applyBackendService,
  applyTlsSecret,
  CONFORMANCE_INFRA,
  httpsGet,
  startGatewayTollgate,
} from '../helpers/gateway-conformance.ts';
import { request, startTollgates, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const INFRA = CONFORMANCE_INFRA;
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
  return httpsGet(port, host, { ca });
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
  const serviceFor = (name: string) =>
    applyBackendService(api, { name, namespace: INFRA, port: (upstreams.get(name) as Upstream).port });

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
    tollgate = await startGatewayTollgate(api, {
      dir,
      namespace: INFRA,
      tls: volume,
      kubernetes: { publish_address: ['203.0.113.9'] },
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
    applyTlsSecret(api, {
      name: 'tls-validity-checks-certificate',
      namespace: INFRA,
      certificate: suiteCertificate,
    });
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

  it('two Gateways sharing a port never mix: the newer listener is Conflicted (HostnameConflict, ProtocolConflict) and its routes are not attached', async () => {
    const gateway = (name: string, listener: Record<string, unknown>) =>
      gatewayObject({ name, namespace: INFRA, listeners: [listener] });
    const route = (name: string, parent: string, backend: string) =>
      httpRouteObject({
        name,
        namespace: INFRA,
        parentRefs: [{ name: parent }],
        rules: [{ backendRefs: [{ name: backend, port: 8080 }] }],
      });
    // The same name order as creation order: a tie in creationTimestamp is broken by name.
    api.applyRaw(gateway('conflict-a-older', { name: 'http', port: 80, protocol: 'HTTP' }));
    api.applyRaw(route('to-older', 'conflict-a-older', 'infra-backend-v1'));
    await waitStatus(
      'older listener attached',
      () => gatewayStatus('conflict-a-older').listeners?.[0]?.attachedRoutes === 1,
      () => gatewayStatus('conflict-a-older'),
    );
    api.applyRaw(gateway('conflict-b-newer', { name: 'web', port: 80, protocol: 'HTTP' }));
    api.applyRaw(route('to-newer', 'conflict-b-newer', 'infra-backend-v2'));
    applyTlsSecret(api, { name: 'protocol-conflict-cert', namespace: INFRA, certificate: suiteCertificate });
    api.applyRaw(
      gateway('conflict-c-protocol', {
        name: 'tls-on-80',
        port: 80,
        protocol: 'HTTPS',
        hostname: 'tls-on-80.example',
        tls: { certificateRefs: [{ name: 'protocol-conflict-cert' }] },
      }),
    );
    await waitStatus(
      'newer listener HostnameConflict',
      () =>
        hasCondition(
          gatewayStatus('conflict-b-newer').listeners?.[0]?.conditions,
          'Conflicted',
          'True',
          'HostnameConflict',
        ),
      () => gatewayStatus('conflict-b-newer'),
    );
    const newer = gatewayStatus('conflict-b-newer');
    assert.ok(hasCondition(newer.listeners?.[0]?.conditions, 'Programmed', 'False'));
    assert.equal(newer.listeners?.[0]?.attachedRoutes, 0);
    assert.ok(hasCondition(newer.conditions, 'Accepted', 'False', 'ListenersNotValid'));
    await waitStatus(
      'protocol conflict',
      () =>
        hasCondition(
          gatewayStatus('conflict-c-protocol').listeners?.[0]?.conditions,
          'Conflicted',
          'True',
          'ProtocolConflict',
        ),
      () => gatewayStatus('conflict-c-protocol'),
    );
    const older = gatewayStatus('conflict-a-older');
    assert.ok(hasCondition(older.listeners?.[0]?.conditions, 'Conflicted', 'False', 'NoConflicts'));
    assert.ok(hasCondition(older.listeners?.[0]?.conditions, 'Programmed', 'True'));
    await waitStatus(
      'the route of the newer Gateway is not accepted',
      () =>
        (
          (
            (api.get('httproutes', INFRA, 'to-newer')?.status ?? {}) as {
              parents?: Array<{ conditions: Condition[] }>;
            }
          ).parents ?? []
        ).some((parent) => hasCondition(parent.conditions, 'Accepted', 'False')),
      () => api.get('httproutes', INFRA, 'to-newer')?.status,
    );
    // Only the older Gateway's route answers, on the one shared port, however often it is asked.
    for (let i = 0; i < 5; i++) {
      const res = await request(`${tollgate.proxyUrl}/`, { headers: { host: 'any.example' } });
      assert.equal(res.status, 200);
      assert.equal(res.json().server, 'infra-backend-v1');
    }
    // The older goes: the newer is no longer conflicted and serves its own route.
    api.delete('httproutes', INFRA, 'to-older');
    api.delete('gateways', INFRA, 'conflict-a-older');
    await waitFor(async () => {
      const res = await request(`${tollgate.proxyUrl}/`, { headers: { host: 'any.example' } });
      return res.status === 200 && res.json().server === 'infra-backend-v2';
    }, SETTLE_MS);
    api.delete('httproutes', INFRA, 'to-newer');
    api.delete('gateways', INFRA, 'conflict-b-newer');
    api.delete('gateways', INFRA, 'conflict-c-protocol');
  });

  // Last: it takes the configured class away from every other case of this process.
  it('the configured GatewayClass with a parametersRef: InvalidParameters, a Warning Event, nothing of it served (fail closed)', async () => {
    api.applyRaw(
      gatewayObject({
        name: 'served-until-refused',
        namespace: INFRA,
        listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }],
      }),
    );
    api.applyRaw(
      httpRouteObject({
        name: 'served-until-refused',
        namespace: INFRA,
        parentRefs: [{ name: 'served-until-refused' }],
        rules: [{ backendRefs: [{ name: 'infra-backend-v1', port: 8080 }] }],
      }),
    );
    const status = async () =>
      (await request(`${tollgate.proxyUrl}/`, { headers: { host: 'any.example' } })).status;
    await waitFor(async () => (await status()) === 200, SETTLE_MS);
    const own = gatewayClassObject();
    api.applyRaw({
      ...own,
      spec: { ...(own.spec as object), parametersRef: { group: 'example.com', kind: 'Config', name: 'x' } },
    });
    await waitStatus(
      'configured class InvalidParameters',
      () => hasCondition(classConditions('tollgate'), 'Accepted', 'False', 'InvalidParameters'),
      () => classConditions('tollgate'),
    );
    await waitFor(async () => (await status()) === 404, SETTLE_MS);
    await api.waitFor(
      () =>
        api.events.some(
          (event) =>
            event.involvedObject.kind === 'GatewayClass' &&
            event.involvedObject.name === 'tollgate' &&
            event.reason === 'InvalidParameters',
        ),
      'an InvalidParameters Event',
      SETTLE_MS,
    );
    api.applyRaw(gatewayClassObject());
    await waitFor(async () => (await status()) === 200, SETTLE_MS);
    api.delete('httproutes', INFRA, 'served-until-refused');
    api.delete('gateways', INFRA, 'served-until-refused');
  });
});

describe('one deployment per Gateway (kubernetes.gateway_names): HTTPRouteMultipleGateways and HTTPRouteCrossNamespace', () => {
  const WEB = 'gateway-conformance-web-backend';
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  const deployments = new Map<string, Tollgate>();

  const answer = async (gateway: string, path: string) => {
    const res = await request(`${(deployments.get(gateway) as Tollgate).proxyUrl}${path}`, {
      headers: { host: 'any.example' },
    });
    return res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  };
  const expectAnswer = async (gateway: string, path: string, expected: string) => {
    let last = '';
    try {
      await waitFor(async () => {
        last = await answer(gateway, path);
        return last === expected;
      }, SETTLE_MS);
    } catch {
      assert.fail(`${gateway} ${path}: expected ${expected}, got ${last}`);
    }
  };
  const parentsOf = (namespace: string, name: string) =>
    (
      (api.get('httproutes', namespace, name)?.status ?? {}) as {
        parents?: Array<{ parentRef: { name: string }; controllerName: string; conditions: Condition[] }>;
      }
    ).parents ?? [];

  before(async () => {
    for (const name of ['infra-backend-v1', 'infra-backend-v2', 'infra-backend-v3', 'web-backend'])
      upstreams.set(name, await startUpstream({ name }));
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(INFRA, { 'gateway-conformance': 'infra' }));
    api.applyRaw(namespaceObject(WEB, { 'gateway-conformance': 'backend' }));
    api.applyRaw(gatewayClassObject());
    const http = (namespaces: Record<string, unknown>) => ({
      name: 'http',
      port: 80,
      protocol: 'HTTP',
      allowedRoutes: { namespaces },
    });
    // conformance/base/manifests.yaml: three Gateways on port 80 without hostname.
    api.applyRaw(
      gatewayObject({ name: 'same-namespace', namespace: INFRA, listeners: [http({ from: 'Same' })] }),
    );
    api.applyRaw(
      gatewayObject({ name: 'all-namespaces', namespace: INFRA, listeners: [http({ from: 'All' })] }),
    );
    api.applyRaw(
      gatewayObject({
        name: 'backend-namespaces',
        namespace: INFRA,
        listeners: [
          http({ from: 'Selector', selector: { matchLabels: { 'gateway-conformance': 'backend' } } }),
        ],
      }),
    );
    for (const [name, namespace] of [
      ['infra-backend-v1', INFRA],
      ['infra-backend-v2', INFRA],
      ['infra-backend-v3', INFRA],
      ['web-backend', WEB],
    ] as const) {
      applyBackendService(api, { name, namespace, port: (upstreams.get(name) as Upstream).port });
    }
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-names-'));
    const kubeconfig = api.writeKubeconfig(dir, INFRA);
    const started = await startTollgates(
      ...['same-namespace', 'all-namespaces', 'backend-namespaces'].map((name) => ({
        main: {
          access_log: false,
          kubernetes: {
            kubeconfig,
            gateway_class: 'tollgate',
            gateway_names: [`${INFRA}/${name}`],
            publish_address: ['203.0.113.9'],
          },
        },
        upstreams: { upstreams: {} },
        env: { KUBECONFIG: '' },
      })),
    );
    for (const [index, name] of ['same-namespace', 'all-namespaces', 'backend-namespaces'].entries())
      deployments.set(name, started[index] as Tollgate);
  });

  after(async () => {
    await Promise.all([...deployments.values()].map((process) => process.stop()));
    await api?.stop();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('each deployment accepts its own Gateway only; none is Conflicted', async () => {
    for (const name of deployments.keys())
      await api.waitFor(
        () =>
          hasCondition(
            ((api.get('gateways', INFRA, name)?.status ?? {}) as { listeners?: ListenerStatus[] })
              .listeners?.[0]?.conditions,
            'Conflicted',
            'False',
          ),
        `${name} not conflicted`,
        SETTLE_MS,
      );
  });

  it('HTTPRouteMultipleGateways: a shared route on both, a dedicated route on each, never the other one', async () => {
    const route = (name: string, parents: string[], prefix: string, backend: string) =>
      httpRouteObject({
        name,
        namespace: INFRA,
        parentRefs: parents.map((parent) => ({ name: parent })),
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: prefix } }],
            backendRefs: [{ name: backend, port: 8080 }],
          },
        ],
      });
    api.applyRaw(
      route(
        'multiple-gateways-shared-route',
        ['same-namespace', 'all-namespaces'],
        '/shared',
        'infra-backend-v1',
      ),
    );
    api.applyRaw(route('same-namespace-dedicated-route', ['same-namespace'], '/', 'infra-backend-v2'));
    api.applyRaw(route('all-namespaces-dedicated-route', ['all-namespaces'], '/', 'infra-backend-v3'));
    await expectAnswer('same-namespace', '/shared', 'infra-backend-v1');
    await expectAnswer('same-namespace', '/', 'infra-backend-v2');
    await expectAnswer('all-namespaces', '/shared', 'infra-backend-v1');
    await expectAnswer('all-namespaces', '/', 'infra-backend-v3');
    // backend-namespaces' deployment serves none of them (no route names its Gateway).
    await expectAnswer('backend-namespaces', '/', 'status 404');
    // The shared route: each deployment writes its own parent, and keeps the other's.
    await api.waitFor(
      () => {
        const parents = parentsOf(INFRA, 'multiple-gateways-shared-route');
        return ['same-namespace', 'all-namespaces'].every((gateway) =>
          parents.some(
            (parent) =>
              parent.parentRef.name === gateway &&
              parent.controllerName === 'tollgate.io/gateway-controller' &&
              hasCondition(parent.conditions, 'Accepted', 'True'),
          ),
        );
      },
      'both parents of the shared route accepted',
      SETTLE_MS,
    );
    for (const name of ['same-namespace-dedicated-route', 'all-namespaces-dedicated-route'])
      await api.waitFor(
        () =>
          parentsOf(INFRA, name).length === 1 &&
          hasCondition(parentsOf(INFRA, name)[0]?.conditions, 'Accepted', 'True'),
        `${name} accepted`,
        SETTLE_MS,
      );
    for (let i = 0; i < 3; i++) {
      assert.equal(await answer('same-namespace', '/'), 'infra-backend-v2');
      assert.equal(await answer('all-namespaces', '/'), 'infra-backend-v3');
    }
    // A policy on a route of all-namespaces: that deployment reports on it; same-namespace's, which
    // cannot see the route attached, leaves its status alone (no TargetNotFound fight).
    api.applyRaw(
      tollgatePolicyObject({
        name: 'limit-all-namespaces',
        namespace: INFRA,
        spec: {
          targetRefs: [
            { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'all-namespaces-dedicated-route' },
          ],
          rate_limit: 1000,
        },
      }),
    );
    const policyConditions = () =>
      (
        (api.get('tollgatepolicies', INFRA, 'limit-all-namespaces')?.status ?? {}) as {
          conditions?: Condition[];
        }
      ).conditions;
    await api.waitFor(
      () => hasCondition(policyConditions(), 'Accepted', 'True'),
      'policy accepted',
      SETTLE_MS,
    );
    // Make same-namespace's deployment translate again, then look: still Accepted.
    api.applyRaw(route('same-namespace-extra', ['same-namespace'], '/extra', 'infra-backend-v1'));
    await expectAnswer('same-namespace', '/extra', 'infra-backend-v1');
    await (deployments.get('same-namespace') as Tollgate).metrics();
    assert.ok(hasCondition(policyConditions(), 'Accepted', 'True'), JSON.stringify(policyConditions()));
    api.delete('tollgatepolicies', INFRA, 'limit-all-namespaces');
    api.delete('httproutes', INFRA, 'same-namespace-extra');
    for (const name of [
      'multiple-gateways-shared-route',
      'same-namespace-dedicated-route',
      'all-namespaces-dedicated-route',
    ])
      api.delete('httproutes', INFRA, name);
  });

  it('HTTPRouteCrossNamespace: a route of a selected namespace attaches to backend-namespaces', async () => {
    api.applyRaw(
      httpRouteObject({
        name: 'cross-namespace',
        namespace: WEB,
        parentRefs: [{ name: 'backend-namespaces', namespace: INFRA }],
        rules: [{ backendRefs: [{ name: 'web-backend', port: 8080 }] }],
      }),
    );
    await expectAnswer('backend-namespaces', '/', 'web-backend');
    await api.waitFor(
      () => hasCondition(parentsOf(WEB, 'cross-namespace')[0]?.conditions, 'Accepted', 'True'),
      'cross-namespace accepted',
      SETTLE_MS,
    );
    await expectAnswer('same-namespace', '/', 'status 404');
    api.delete('httproutes', WEB, 'cross-namespace');
  });
});
