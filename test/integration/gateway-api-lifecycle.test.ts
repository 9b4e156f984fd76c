/**
 * The Gateway API source over time and beside the other sources, through the built process:
 * observedGeneration bumps (GatewayObservedGenerationBump, HTTPRouteObservedGenerationBump), other
 * controllers' status entries kept, the tollgate_gateway_routes gauge, changes live within 1 s and an
 * API outage that keeps serving, HTTPS listeners by SNI and GatewayInvalidTLSConfiguration, host
 * ownership across upstreams.yaml, Ingresses and routes, and a GRPCRoute.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';
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
  ingress,
  ingressClass,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { type EchoReply, type EchoServer, echoClientClass, startEchoServer } from '../helpers/grpc.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const NS = 'apps';
const OTHER = 'team-b';
const LIVE_MS = 1_000;
const SETTLE_MS = 10_000;

async function servedFingerprint(port: number, servername: string): Promise<string> {
  const socket = tls.connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false });
  socket.setTimeout(10_000, () => socket.destroy(new Error('TLS handshake timed out')));
  await once(socket, 'secureConnect');
  const fingerprint = socket.getPeerCertificate().fingerprint256;
  socket.destroy();
  return fingerprint;
}

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

describe('Gateway API lifecycle, TLS, ownership and gRPC through the built process', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  let web: Upstream;
  let other: Upstream;
  let echo: EchoServer;
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let volume: SecretVolume;
  const fallback = selfSigned('default.test');
  const secure = selfSigned('secure.test');

  const get = (host: string, path = '/') => request(`${tollgate.proxyUrl}${path}`, { headers: { host } });
  const serverOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  const expectServer = async (host: string, path: string, expected: string, limitMs = SETTLE_MS) => {
    let last = '';
    const started = Date.now();
    try {
      await waitFor(async () => {
        last = serverOf(await get(host, path));
        return last === expected;
      }, limitMs);
    } catch {
      assert.fail(`${host}${path}: expected ${expected} within ${limitMs} ms, got ${last}`);
    }
    return Date.now() - started;
  };
  const serviceFor = (name: string, namespace: string, port: number) => {
    api.apply(service({ name, namespace, ports: [{ name: 'http', port: 80, targetPort: port }] }));
    api.apply(
      endpointSlice({
        service: name,
        namespace,
        ports: [{ name: 'http', port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
  };
  const route = (name: string, namespace: string, hostnames: string[], backend: string, parent = 'gw') =>
    httpRouteObject({
      name,
      namespace,
      parentRefs: [{ name: parent, namespace: NS }],
      hostnames,
      rules: [{ backendRefs: [{ name: backend, port: 80 }] }],
    });
  const metric = async (series: string) => {
    const line = (await tollgate.metrics()).split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? null : Number(line.slice(series.length + 1));
  };

  before(async () => {
    web = await startUpstream({ name: 'web' });
    other = await startUpstream({ name: 'other' });
    echo = await startEchoServer();
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(NS));
    api.applyRaw(namespaceObject(OTHER));
    api.applyRaw(gatewayClassObject());
    api.apply(ingressClass());
    api.applyRaw(
      gatewayObject({
        name: 'gw',
        namespace: NS,
        listeners: [
          { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
          {
            name: 'https',
            port: 443,
            protocol: 'HTTPS',
            hostname: 'secure.test',
            tls: { certificateRefs: [{ name: 'secure-tls' }] },
          },
        ],
      }),
    );
    api.apply(
      secret({
        name: 'secure-tls',
        namespace: NS,
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': secure.cert.toString(), 'tls.key': secure.key.toString() },
      }),
    );
    serviceFor('web', NS, web.port);
    serviceFor('other', OTHER, other.port);
    api.apply(
      service({ name: 'echo', namespace: NS, ports: [{ name: 'grpc', port: 50051, targetPort: echo.port }] }),
    );
    api.apply(
      endpointSlice({
        service: 'echo',
        namespace: NS,
        ports: [{ name: 'grpc', port: echo.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-lifecycle-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        http2_cleartext: true,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
        kubernetes: {
          kubeconfig: api.writeKubeconfig(dir, NS),
          gateway_class: 'tollgate',
          ingress_class: 'tollgate',
          publish_address: ['203.0.113.9'],
        },
      },
      upstreams: { upstreams: { 'file.test': { paths: { '/': { servers: [web.address] } } } } },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await web?.close();
    await other?.close();
    await echo?.close();
    volume?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a route created, changed and deleted is live within 1 s each time; the gauge follows it', async () => {
    api.applyRaw(route('live', NS, ['live.test'], 'web'));
    await expectServer('live.test', '/', 'web');
    api.applyRaw(
      httpRouteObject({
        name: 'live',
        namespace: NS,
        parentRefs: [{ name: 'gw', namespace: NS }],
        hostnames: ['live.test'],
        rules: [{ backendRefs: [{ name: 'other', namespace: OTHER, port: 80 }] }],
      }),
    );
    // Another namespace's Service without a ReferenceGrant: 500, within 1 s.
    await expectServer('live.test', '/', 'status 500', LIVE_MS);
    api.applyRaw(route('live', NS, ['live.test'], 'web'));
    await expectServer('live.test', '/', 'web', LIVE_MS);
    assert.equal(
      await metric('tollgate_gateway_routes{kind="HTTPRoute",namespace="apps",name="live",accepted="true"}'),
      1,
    );
    api.delete('httproutes', NS, 'live');
    await expectServer('live.test', '/', 'status 404', LIVE_MS);
    await waitFor(
      async () =>
        (await metric(
          'tollgate_gateway_routes{kind="HTTPRoute",namespace="apps",name="live",accepted="true"}',
        )) === null,
      SETTLE_MS,
    );
  });

  it('a rejected route that is fixed moves to accepted="true" on the gauge and gets a Served Event', async () => {
    const series = (accepted: string) =>
      `tollgate_gateway_routes{kind="HTTPRoute",namespace="apps",name="mended",accepted="${accepted}"}`;
    api.applyRaw(
      httpRouteObject({
        name: 'mended',
        namespace: NS,
        parentRefs: [{ name: 'gw', namespace: NS }],
        hostnames: ['mended.test'],
        rules: [
          {
            matches: [{ path: { type: 'RegularExpression', value: '.*' } }],
            backendRefs: [{ name: 'web', port: 80 }],
          },
        ],
      }),
    );
    await waitFor(async () => (await metric(series('false'))) === 1, SETTLE_MS);
    api.applyRaw(route('mended', NS, ['mended.test'], 'web'));
    await expectServer('mended.test', '/', 'web', LIVE_MS);
    await waitFor(async () => (await metric(series('true'))) === 1, SETTLE_MS);
    assert.equal(await metric(series('false')), null, 'the old label set is gone');
    await api.waitFor(
      () => api.events.some((event) => event.involvedObject.name === 'mended' && event.reason === 'Served'),
      'a Served Event',
      SETTLE_MS,
    );
    api.delete('httproutes', NS, 'mended');
    await waitFor(async () => (await metric(series('true'))) === null, SETTLE_MS);
  });

  it('GatewayObservedGenerationBump and HTTPRouteObservedGenerationBump: conditions carry the new generation', async () => {
    api.applyRaw(route('bump', NS, ['bump.test'], 'web'));
    await api.waitFor(
      () =>
        (routeParentConditions(api.get('httproutes', NS, 'bump'), 'gw') ?? []).some(
          (c) => c.type === 'Accepted' && c.observedGeneration === 1,
        ),
      'generation 1',
      SETTLE_MS,
    );
    api.applyRaw(route('bump', NS, ['bump.test', 'bump2.test'], 'web'));
    assert.equal(api.get('httproutes', NS, 'bump')?.metadata.generation, 2);
    await api.waitFor(
      () =>
        (routeParentConditions(api.get('httproutes', NS, 'bump'), 'gw') ?? []).every(
          (c) => c.observedGeneration === 2,
        ),
      'route generation 2',
      SETTLE_MS,
    );
    const gateway = api.get('gateways', NS, 'gw') as NonNullable<ReturnType<FakeKubeApi['get']>>;
    const spec = structuredClone(gateway.spec) as { listeners: Array<Record<string, unknown>> };
    (spec.listeners[0] as Record<string, unknown>).allowedRoutes = {
      namespaces: { from: 'All' },
      kinds: [{ kind: 'HTTPRoute' }, { kind: 'GRPCRoute' }],
    };
    api.applyRaw({ ...gateway, spec });
    await api.waitFor(
      () => {
        const status = api.get('gateways', NS, 'gw')?.status as
          | { conditions: Array<{ observedGeneration: number }> }
          | undefined;
        return status?.conditions.every((c) => c.observedGeneration === 2) === true;
      },
      'gateway generation 2',
      SETTLE_MS,
    );
    api.delete('httproutes', NS, 'bump');
  });

  it("another controller's entry in status.parents is kept; only Tollgate's own is written", async () => {
    const shared = route('shared', NS, ['shared.test'], 'web');
    (shared.spec as { parentRefs: unknown[] }).parentRefs.push({ name: 'elsewhere', namespace: NS });
    api.applyRaw(shared);
    api.setStatus('httproutes', NS, 'shared', {
      parents: [
        {
          parentRef: {
            group: 'gateway.networking.k8s.io',
            kind: 'Gateway',
            name: 'elsewhere',
            namespace: NS,
          },
          controllerName: 'example.com/other-controller',
          conditions: [
            {
              type: 'Accepted',
              status: 'True',
              reason: 'Accepted',
              message: 'theirs',
              lastTransitionTime: '2026-01-01T00:00:00Z',
            },
          ],
        },
      ],
    });
    await api.waitFor(
      () => routeParentConditions(api.get('httproutes', NS, 'shared'), 'gw') !== undefined,
      'our entry',
      SETTLE_MS,
    );
    const parents = (
      (api.get('httproutes', NS, 'shared')?.status ?? { parents: [] }) as {
        parents: Array<{ controllerName: string }>;
      }
    ).parents;
    assert.deepEqual(parents.map((p) => p.controllerName).sort(), [
      'example.com/other-controller',
      'tollgate.io/gateway-controller',
    ]);
    // No write when nothing changed: an unrelated change elsewhere leaves this route's status alone.
    const writes = api.statusWrites.filter((w) => w.name === 'shared').length;
    api.applyRaw(route('unrelated', NS, ['unrelated.test'], 'web'));
    await expectServer('unrelated.test', '/', 'web');
    await api.waitFor(
      () => routeParentConditions(api.get('httproutes', NS, 'unrelated'), 'gw') !== undefined,
      'unrelated status',
      SETTLE_MS,
    );
    assert.equal(api.statusWrites.filter((w) => w.name === 'shared').length, writes);
    api.delete('httproutes', NS, 'shared');
    api.delete('httproutes', NS, 'unrelated');
  });

  it('an API outage keeps the routes serving; changes apply again once it is back', async () => {
    api.applyRaw(route('steady', NS, ['steady.test'], 'web'));
    await expectServer('steady.test', '/', 'web');
    await api.stop();
    for (let i = 0; i < 5; i++) assert.equal(serverOf(await get('steady.test', '/')), 'web');
    await api.restart();
    api.delete('httproutes', NS, 'steady');
    await expectServer('steady.test', '/', 'status 404', 30_000);
  });

  it('HTTPS listener: its certificate by SNI for the hosts routes get through it; GatewayInvalidTLSConfiguration', async () => {
    api.applyRaw(
      httpRouteObject({
        name: 'secure',
        namespace: NS,
        parentRefs: [{ name: 'gw', sectionName: 'https' }],
        rules: [{ backendRefs: [{ name: 'web', port: 80 }] }],
      }),
    );
    const port = tollgate.tlsPort as number;
    await waitFor(
      async () => (await servedFingerprint(port, 'secure.test')) === secure.fingerprint256,
      SETTLE_MS,
    );
    await waitFor(async () => (await httpsGet(port, 'secure.test')).status === 200, SETTLE_MS);
    assert.equal(await servedFingerprint(port, 'other.test'), fallback.fingerprint256);
    // Attached only through an HTTPS listener: plain HTTP is redirected, never served.
    const plain = await get('secure.test', '/x?y=1');
    assert.equal(plain.status, 301);
    assert.equal(plain.headers.location, 'https://secure.test/x?y=1');
    const listener = (cert: Record<string, unknown>, name = 'https') => ({
      name,
      port: 443,
      protocol: 'HTTPS',
      tls: { certificateRefs: [cert] },
    });
    api.apply(
      secret({
        name: 'malformed',
        namespace: NS,
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': 'not a certificate', 'tls.key': 'nor a key' },
      }),
    );
    const cases: Array<[string, Record<string, unknown>]> = [
      [
        'gateway-certificate-nonexistent-secret',
        { group: '', kind: 'Secret', name: 'nonexistent-certificate' },
      ],
      [
        'gateway-certificate-unsupported-group',
        { group: 'wrong.group.company.io', kind: 'Secret', name: 'secure-tls' },
      ],
      ['gateway-certificate-unsupported-kind', { group: '', kind: 'WrongKind', name: 'secure-tls' }],
      ['gateway-certificate-malformed-secret', { group: '', kind: 'Secret', name: 'malformed' }],
    ];
    for (const [name, ref] of cases)
      api.applyRaw(gatewayObject({ name, namespace: NS, listeners: [listener(ref)] }));
    for (const [name] of cases)
      await api.waitFor(
        () => {
          const status = api.get('gateways', NS, name)?.status as
            | { listeners?: Array<{ attachedRoutes: number; conditions: never[] }> }
            | undefined;
          const first = status?.listeners?.[0];
          return (
            first !== undefined &&
            first.attachedRoutes === 0 &&
            hasCondition(first.conditions, 'ResolvedRefs', 'False', 'InvalidCertificateRef')
          );
        },
        `${name} InvalidCertificateRef`,
        SETTLE_MS,
      );
    await api.waitFor(
      () =>
        api.events.some(
          (event) =>
            event.involvedObject.kind === 'Gateway' &&
            event.involvedObject.name === 'gateway-certificate-nonexistent-secret' &&
            event.reason === 'ListenerNotServed',
        ),
      'a ListenerNotServed Event',
      SETTLE_MS,
    );
    // GatewaySecretReferenceGrantSpecific: another namespace's Secret only with a ReferenceGrant.
    api.apply(
      secret({
        name: 'shared-tls',
        namespace: OTHER,
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': secure.cert.toString(), 'tls.key': secure.key.toString() },
      }),
    );
    api.applyRaw(
      gatewayObject({
        name: 'cross-cert',
        namespace: NS,
        listeners: [listener({ name: 'shared-tls', namespace: OTHER })],
      }),
    );
    const listenerConditions = () =>
      ((
        api.get('gateways', NS, 'cross-cert')?.status as
          | { listeners?: Array<{ conditions: never[] }> }
          | undefined
      )?.listeners?.[0]?.conditions ?? []) as Array<{ type: string; status: string; reason: string }>;
    await api.waitFor(
      () => hasCondition(listenerConditions(), 'ResolvedRefs', 'False', 'RefNotPermitted'),
      'RefNotPermitted',
      SETTLE_MS,
    );
    api.applyRaw(
      referenceGrantObject({
        name: 'certs-for-apps',
        namespace: OTHER,
        from: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: NS }],
        to: [{ group: '', kind: 'Secret', name: 'shared-tls' }],
      }),
    );
    await api.waitFor(
      () => hasCondition(listenerConditions(), 'ResolvedRefs', 'True'),
      'ResolvedRefs with the grant',
      SETTLE_MS,
    );
    api.delete('httproutes', NS, 'secure');
  });

  it('host ownership: a host of upstreams.yaml or of an Ingress takes no route; the oldest route gives a host to its namespace', async () => {
    api.apply(
      ingress({
        name: 'shop',
        namespace: NS,
        rules: [{ host: 'ingress.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await expectServer('ingress.test', '/', 'web');
    api.applyRaw(route('on-file-host', OTHER, ['file.test'], 'other'));
    api.applyRaw(route('on-ingress-host', OTHER, ['ingress.test'], 'other'));
    api.applyRaw(route('owner', NS, ['owned.test'], 'web'));
    await expectServer('owned.test', '/', 'web');
    api.applyRaw(route('late', OTHER, ['owned.test'], 'other'));
    await api.waitFor(
      () =>
        ['on-file-host', 'on-ingress-host', 'late'].every((name) =>
          api.events.some((e) => e.involvedObject.name === name && e.type === 'Warning'),
        ),
      'Events for the routes left out',
      SETTLE_MS,
    );
    assert.equal(serverOf(await get('file.test', '/')), 'web');
    assert.equal(serverOf(await get('ingress.test', '/')), 'web');
    assert.equal(serverOf(await get('owned.test', '/')), 'web');
    assert.match(
      api.events.find((e) => e.involvedObject.name === 'late')?.message ?? '',
      /belongs to namespace apps/,
    );
    // The other way round: a host a route claimed first is not given to a newer Ingress of another namespace.
    api.apply(
      ingress({
        name: 'intruder',
        namespace: OTHER,
        rules: [{ host: 'owned.test', paths: [{ service: 'other', port: 80 }] }],
      }),
    );
    await api.waitFor(
      () =>
        api.events.some(
          (e) =>
            e.involvedObject.name === 'intruder' &&
            /claimed first by the HTTPRoute apps\/owner/.test(e.message),
        ),
      'the newer Ingress reported',
      SETTLE_MS,
    );
    assert.equal(serverOf(await get('owned.test', '/')), 'web');
    api.delete('ingresses', OTHER, 'intruder');
    for (const [namespace, name] of [
      [OTHER, 'on-file-host'],
      [OTHER, 'on-ingress-host'],
      [NS, 'owner'],
      [OTHER, 'late'],
    ] as const)
      api.delete('httproutes', namespace, name);
    api.delete('ingresses', NS, 'shop');
  });

  it('GRPCRoute: service and method matches forwarded over h2c', async () => {
    api.applyRaw(
      httpRouteObject({
        kind: 'GRPCRoute',
        name: 'echo',
        namespace: NS,
        parentRefs: [{ name: 'gw', sectionName: 'http' }],
        hostnames: ['grpc.test'],
        rules: [
          {
            matches: [{ method: { service: 'tollgate.test.Echo', method: 'Unary' } }],
            backendRefs: [{ name: 'echo', port: 50051 }],
          },
        ],
      }),
    );
    await api.waitFor(
      () =>
        hasCondition(
          routeParentConditions(api.get('grpcroutes', NS, 'echo'), 'gw', 'http'),
          'Accepted',
          'True',
        ),
      'GRPCRoute accepted',
      SETTLE_MS,
    );
    const Echo = echoClientClass();
    const client = new Echo(`127.0.0.1:${tollgate.proxyPort}`, grpc.credentials.createInsecure(), {
      'grpc.default_authority': 'grpc.test',
    });
    try {
      const unary = () =>
        new Promise<EchoReply>((resolve, reject) =>
          client.Unary({ message: 'hello' }, (error: grpc.ServiceError | null, reply: EchoReply) =>
            error ? reject(error) : resolve(reply),
          ),
        );
      let reply: EchoReply | null = null;
      await waitFor(async () => {
        reply = await unary();
        return true;
      }, SETTLE_MS);
      assert.equal((reply as unknown as EchoReply).message, 'hello');
      // Another method of the service has no rule: UNIMPLEMENTED (Tollgate's 404 as gRPC).
      const streamed = await new Promise<grpc.ServiceError | null>((resolve) => {
        const call = client.ServerStream({ message: 'x', count: 1 });
        call.on('data', () => {});
        call.on('error', (error: grpc.ServiceError) => resolve(error));
        call.on('end', () => resolve(null));
      });
      assert.equal(streamed?.code, grpc.status.UNIMPLEMENTED);
    } finally {
      client.close();
    }
    api.delete('grpcroutes', NS, 'echo');
  });

  it('without the GRPCRoute and TollgatePolicy CRDs installed, HTTPRoutes are served all the same', async () => {
    const bare = await startFakeKubeApi();
    const bareDir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-bare-'));
    let process: Tollgate | null = null;
    try {
      bare.withoutResource('grpcroutes');
      bare.withoutResource('tollgatepolicies');
      bare.applyRaw(namespaceObject(NS));
      bare.applyRaw(gatewayClassObject());
      bare.applyRaw(
        gatewayObject({
          name: 'gw',
          namespace: NS,
          listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }],
        }),
      );
      bare.apply(
        service({ name: 'web', namespace: NS, ports: [{ name: 'http', port: 80, targetPort: web.port }] }),
      );
      bare.apply(
        endpointSlice({
          service: 'web',
          namespace: NS,
          ports: [{ name: 'http', port: web.port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
      bare.applyRaw(route('plain', NS, ['plain.test'], 'web'));
      process = await startTollgate({
        main: {
          access_log: false,
          kubernetes: { kubeconfig: bare.writeKubeconfig(bareDir, NS), gateway_class: 'tollgate' },
        },
        upstreams: { upstreams: { 'file.test': { paths: { '/': { servers: [web.address] } } } } },
        env: { KUBECONFIG: '' },
      });
      const proxy = process.proxyUrl;
      await waitFor(
        async () => serverOf(await request(`${proxy}/`, { headers: { host: 'plain.test' } })) === 'web',
        SETTLE_MS,
      );
    } finally {
      await process?.stop();
      await bare.stop();
      await rm(bareDir, { recursive: true, force: true });
    }
  });
});
