/**
 * A host is claimed by what a route names, not by what it serves now (docs/gateway-api.md#host-ownership),
 * through the built process: when the owner route is broken for a moment (a refused filter, its
 * listener's certificate Secret deleted) its host answers 503, the newer route of another namespace
 * naming the same host never answers there, and the owner serves again once fixed.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
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
import { testScope } from '../helpers/scope.ts';
import { request, type SimpleResponse, type Tollgate, waitFor } from '../helpers/tollgate.ts';

const OWNER = 'team-a';
const OTHER = 'team-b';
const SETTLE_MS = 10_000;

function httpsGet(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        servername: host,
        headers: { host },
        rejectUnauthorized: false,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('Gateway API: a broken owner route keeps its host (built process, fake API)', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let api: FakeKubeApi;
  let tollgate: Tollgate;
  const certificate = selfSigned('a.test');
  const fallback = selfSigned('default.test');

  const get = (host: string, path = '/'): Promise<SimpleResponse> =>
    request(`${tollgate.proxyUrl}${path}`, { headers: { host } });
  const serverOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  /**
   * Waits until `host` answers as `expected` says, failing at once if the other namespace's backend
   * ever answers there meanwhile: the host must never pass through its hands.
   */
  const settledWithoutOther = async (host: string, expected: (res: SimpleResponse) => boolean) => {
    let last = '';
    let other = false;
    await waitFor(
      async () => {
        const res = await get(host);
        last = `${res.status} ${res.body}`;
        other ||= serverOf(res) === 'team-b';
        return expected(res);
      },
      SETTLE_MS,
      () => (other ? `${host} was answered by team-b's backend: ${last}` : null),
    ).catch((error: Error) => assert.fail(`${host}: ${error.message} (last: ${last})`));
  };
  /** Asks `host` a few more times: the other namespace's backend still never answers. */
  const neverOther = async (host: string, times = 20) => {
    for (let i = 0; i < times; i += 1) {
      const res = await get(host);
      assert.notEqual(serverOf(res), 'team-b', `${host} was answered by team-b's backend`);
      assert.equal(res.status, 503, `${host}: ${res.status} ${res.body}`);
    }
  };
  const serviceFor = (namespace: string, pod: { port: number }) => {
    api.apply(service({ name: 'app', namespace, ports: [{ name: 'http', port: 80, targetPort: pod.port }] }));
    api.apply(
      endpointSlice({
        service: 'app',
        namespace,
        ports: [{ name: 'http', port: pod.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
  };
  const route = (
    name: string,
    namespace: string,
    hostnames: string[],
    options: { sectionName?: string; filters?: Array<Record<string, unknown>> } = {},
  ) =>
    httpRouteObject({
      name,
      namespace,
      parentRefs: [
        {
          name: 'gw',
          namespace: OWNER,
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
    });
  /** The Events of a route that say another namespace holds the host. */
  const refusedFor = (name: string, host: string) =>
    api.waitFor(
      () =>
        api.events.some(
          (e) =>
            e.involvedObject.name === name &&
            e.type === 'Warning' &&
            e.message.includes(`host ${host} belongs to namespace ${OWNER}`),
        ),
      `${name} left out of ${host}`,
      SETTLE_MS,
    );

  before(async () => {
    const teamA = await scope.upstream({ name: 'team-a' });
    const teamB = await scope.upstream({ name: 'team-b' });
    api = scope.keep(await startFakeKubeApi());
    api.applyRaw(namespaceObject(OWNER));
    api.applyRaw(namespaceObject(OTHER));
    api.applyRaw(gatewayClassObject());
    api.applyRaw(
      gatewayObject({
        name: 'gw',
        namespace: OWNER,
        listeners: [
          { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
          {
            name: 'https',
            port: 443,
            protocol: 'HTTPS',
            hostname: 'secure-a.test',
            tls: { certificateRefs: [{ name: 'a-tls' }] },
          },
        ],
      }),
    );
    serviceFor(OWNER, teamA);
    serviceFor(OTHER, teamB);
    const volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    scope.keep({ close: async () => volume.remove() });
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-claims-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    tollgate = await scope.tollgate({
      main: {
        access_log: false,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, OWNER), gateway_class: 'tollgate' },
      },
      upstreams: { upstreams: { 'file.test': { paths: { '/': { servers: [teamA.address] } } } } },
      env: { KUBECONFIG: '' },
    });
  });

  it("a refused filter on the owner's route: its host answers 503, never the newer route of another namespace; fixed, it serves again", async () => {
    api.applyRaw(route('owner', OWNER, ['a.test']));
    await settledWithoutOther('a.test', (res) => serverOf(res) === 'team-a');
    api.applyRaw(route('newcomer', OTHER, ['a.test'], { sectionName: 'http' }));
    await refusedFor('newcomer', 'a.test');
    assert.equal(serverOf(await get('a.test')), 'team-a');

    // Every rule of the owner refused: it serves nothing, and still holds a.test.
    api.applyRaw(route('owner', OWNER, ['a.test'], { filters: [{ type: 'ExtensionRef' }] }));
    await api.waitFor(
      () => {
        const stored = api.get('httproutes', OWNER, 'owner');
        const parents = (stored?.status as { parents?: Array<{ conditions: never[] }> } | undefined)?.parents;
        return (parents ?? []).some((parent) =>
          hasCondition(parent.conditions, 'Accepted', 'False', 'UnsupportedValue'),
        );
      },
      'the owner route refused',
      SETTLE_MS,
    );
    await settledWithoutOther('a.test', (res) => res.status === 503);
    await neverOther('a.test');

    api.applyRaw(route('owner', OWNER, ['a.test']));
    await settledWithoutOther('a.test', (res) => serverOf(res) === 'team-a');
    api.delete('httproutes', OTHER, 'newcomer');
    api.delete('httproutes', OWNER, 'owner');
  });

  it("the owner's listener loses its certificate Secret: its host answers 503 over HTTP and HTTPS, never another namespace's route; the Secret back, it serves again", async () => {
    const tlsSecret = () =>
      secret({
        name: 'a-tls',
        namespace: OWNER,
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': certificate.cert.toString(), 'tls.key': certificate.key.toString() },
      });
    api.apply(tlsSecret());
    const port = tollgate.tlsPort as number;
    api.applyRaw(route('secure-owner', OWNER, ['secure-a.test'], { sectionName: 'https' }));
    await waitFor(async () => (await httpsGet(port, 'secure-a.test')).status === 200, SETTLE_MS);
    // Attached through the HTTPS listener only: plain HTTP is redirected.
    await settledWithoutOther('secure-a.test', (res) => res.status === 301);
    api.applyRaw(route('secure-newcomer', OTHER, ['secure-a.test'], { sectionName: 'http' }));
    await refusedFor('secure-newcomer', 'secure-a.test');

    api.delete('secrets', OWNER, 'a-tls');
    await api.waitFor(
      () => {
        const status = api.get('gateways', OWNER, 'gw')?.status as
          | { listeners?: Array<{ name: string; conditions: never[] }> }
          | undefined;
        const https = status?.listeners?.find((listener) => listener.name === 'https');
        return hasCondition(https?.conditions, 'ResolvedRefs', 'False', 'InvalidCertificateRef');
      },
      'the HTTPS listener without its certificate',
      SETTLE_MS,
    );
    await settledWithoutOther('secure-a.test', (res) => res.status === 503);
    await neverOther('secure-a.test');
    const overTls = await httpsGet(port, 'secure-a.test');
    assert.equal(overTls.status, 503, overTls.body);

    api.apply(tlsSecret());
    await waitFor(async () => (await httpsGet(port, 'secure-a.test')).status === 200, SETTLE_MS);
    await settledWithoutOther('secure-a.test', (res) => res.status === 301);
  });
});
