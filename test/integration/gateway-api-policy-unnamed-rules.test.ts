/**
 * What Tollgate reports is what it enforces (docs/gateway-api.md#tollgatepolicy), through the built
 * process against the fake API server, with routes shaped as the Gateway API's own guides write them
 * (gateway-api.sigs.k8s.io/guides/http-routing and /guides/traffic-splitting): their rules have no
 * `name`. A policy on the Gateway, on one of its listeners or on the route protects every such rule
 * (401 without credentials, 200 with them) and is Accepted; one that cannot be built closes them
 * (503) and is not. Also two Gateway conformance points: a local answer to HEAD carries no body and
 * no JSON content type, and a listener that is not programmed still counts the routes attached to it.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http2 from 'node:http2';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';
import {
  gatewayClassObject,
  gatewayObject,
  hasCondition,
  httpRouteObject,
  namespaceObject,
  routeParentConditions,
  tollgatePolicyObject,
} from '../helpers/fake-gateway-api.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  type ResourceKind,
  type StoredObject,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

// The guides' objects name no namespace: they live in `default`.
const NS = 'default';
const SETTLE_MS = 10_000;
const ALICE = `Basic ${Buffer.from('alice:wonderland').toString('base64')}`;

/** The guide's Gateway: one HTTP listener named `http`. */
const exampleGateway = () =>
  gatewayObject({
    name: 'example-gateway',
    namespace: NS,
    listeners: [{ name: 'http', protocol: 'HTTP', port: 80 }],
  });

/** http-routing guide: foo-route sends foo.example.com/login to foo-svc (one rule, no name). */
const fooLoginRoute = () =>
  httpRouteObject({
    name: 'foo-route',
    namespace: NS,
    parentRefs: [{ name: 'example-gateway' }],
    hostnames: ['foo.example.com'],
    rules: [
      {
        matches: [{ path: { type: 'PathPrefix', value: '/login' } }],
        backendRefs: [{ name: 'foo-svc', port: 8080 }],
      },
    ],
  });

/** http-routing guide: bar-route, `env: canary` to bar-svc-canary, everything else to bar-svc (no names, no matches on the second). */
const barRoute = () =>
  httpRouteObject({
    name: 'bar-route',
    namespace: NS,
    parentRefs: [{ name: 'example-gateway' }],
    hostnames: ['bar.example.com'],
    rules: [
      {
        matches: [{ headers: [{ type: 'Exact', name: 'env', value: 'canary' }] }],
        backendRefs: [{ name: 'bar-svc-canary', port: 8080 }],
      },
      { backendRefs: [{ name: 'bar-svc', port: 8080 }] },
    ],
  });

/** traffic-splitting guide: foo-route, one rule without matches or name, 90/10 between two versions. */
const fooSplitRoute = () =>
  httpRouteObject({
    name: 'foo-route',
    namespace: NS,
    parentRefs: [{ name: 'example-gateway' }],
    hostnames: ['foo.example.com'],
    rules: [
      {
        backendRefs: [
          { name: 'foo-v1', port: 8080, weight: 90 },
          { name: 'foo-v2', port: 8080, weight: 10 },
        ],
      },
    ],
  });

const target = (kind: 'Gateway' | 'HTTPRoute' | 'GRPCRoute', name: string, sectionName?: string) => ({
  group: 'gateway.networking.k8s.io',
  kind,
  name,
  ...(sectionName ? { sectionName } : {}),
});

/** A HEAD request on its own connection, read byte for byte: what the wire carries, body included. */
function rawHead(port: number, host: string, path: string, headers: string[] = []): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      text += chunk;
    });
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
    socket.write(
      `HEAD ${path} HTTP/1.1\r\nHost: ${host}\r\n${headers.map((line) => `${line}\r\n`).join('')}Connection: close\r\n\r\n`,
    );
  });
}

/** Asserts a raw HEAD answer: this status, nothing after the header block, no Content-Type. */
function assertBodilessHead(raw: string, status: number): void {
  assert.match(raw, new RegExp(`^HTTP/1\\.1 ${status} `), raw);
  const end = raw.indexOf('\r\n\r\n');
  assert.ok(end > 0, raw);
  assert.equal(raw.slice(end + 4), '', `bytes after the headers of a HEAD answer: ${JSON.stringify(raw)}`);
  assert.doesNotMatch(raw.slice(0, end), /^content-type:/im, raw);
}

describe('TollgatePolicy on rules without a name (the Gateway API guides’ routes)', () => {
  const upstreams: Record<string, Upstream> = {};
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;

  const get = (host: string, path = '/', headers: Record<string, string> = {}) =>
    request(`${tollgate.proxyUrl}${path}`, { headers: { host, ...headers } });
  /** Waits for `status` (and, for Tollgate's own answers, its error code when given). */
  const expectStatus = async (
    host: string,
    path: string,
    status: number,
    headers: Record<string, string> = {},
    error?: string,
  ) => {
    let last: SimpleResponse | null = null;
    try {
      await waitFor(async () => {
        last = await get(host, path, headers);
        return last.status === status && (error === undefined || last.json().error === error);
      }, SETTLE_MS);
    } catch {
      const seen = last as SimpleResponse | null;
      assert.fail(`${host}${path}: expected ${status}, got ${seen?.status} ${seen?.body}`);
    }
    return last as unknown as SimpleResponse;
  };
  const conditionsOf = (resource: ResourceKind, name: string) =>
    ((api.get(resource, NS, name)?.status as { conditions?: never[] } | undefined)?.conditions ??
      []) as Array<{ type: string; status: string; reason: string; message: string }>;
  const policyStatus = async (name: string, status: 'True' | 'False', reason: string) => {
    try {
      await api.waitFor(
        () => hasCondition(conditionsOf('tollgatepolicies', name), 'Accepted', status, reason),
        `policy ${name}`,
        SETTLE_MS,
      );
    } catch {
      assert.fail(`policy ${name}: ${JSON.stringify(conditionsOf('tollgatepolicies', name))}`);
    }
  };
  const applied: Array<[ResourceKind, string]> = [];
  const apply = (resource: ResourceKind, object: StoredObject) => {
    api.applyRaw(object);
    applied.push([resource, object.metadata.name]);
  };
  const cleanUp = async () => {
    for (const [resource, name] of applied.splice(0).reverse())
      if (api.get(resource, NS, name)) api.delete(resource, NS, name);
    await waitFor(
      async () =>
        (await get('foo.example.com', '/login')).status === 404 &&
        (await get('bar.example.com', '/')).status === 404,
      SETTLE_MS,
    );
  };
  const basicPolicy = (name: string, targets: Array<ReturnType<typeof target>>, secretName = 'users') =>
    tollgatePolicyObject({
      name,
      namespace: NS,
      spec: {
        targetRefs: targets,
        authorization: { type: 'basic', basic: { secretRef: { name: secretName } } },
      },
    });
  /** 401 without credentials and 200 with them, from the backend named. */
  const protectedBy = async (
    host: string,
    path: string,
    backend: string,
    headers: Record<string, string> = {},
  ) => {
    const refused = await expectStatus(host, path, 401, headers);
    assert.match(String(refused.headers['www-authenticate']), /^Basic realm=/);
    const passed = await get(host, path, { ...headers, authorization: ALICE });
    assert.equal(passed.status, 200, `${host}${path} with credentials: ${passed.status} ${passed.body}`);
    assert.equal(passed.json<{ server: string }>().server, backend);
  };

  before(async () => {
    for (const name of ['foo-svc', 'bar-svc', 'bar-svc-canary', 'foo-v1', 'foo-v2'])
      upstreams[name] = await startUpstream({ name });
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(NS));
    api.applyRaw(gatewayClassObject());
    api.applyRaw(exampleGateway());
    for (const [name, upstream] of Object.entries(upstreams)) {
      api.apply(
        service({ name, namespace: NS, ports: [{ name: 'http', port: 8080, targetPort: upstream.port }] }),
      );
      api.apply(
        endpointSlice({
          service: name,
          namespace: NS,
          ports: [{ name: 'http', port: upstream.port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
    }
    api.apply(secret({ name: 'users', namespace: NS, data: { auth: `alice:${bcryptOf('wonderland')}\n` } }));
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-unnamed-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        // gRPC clients speak HTTP/2 with prior knowledge on the plain port.
        http2_cleartext: true,
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, NS), gateway_class: 'tollgate' },
      },
      upstreams: {
        upstreams: { 'file.test': { paths: { '/': { servers: [upstreams['foo-svc']?.address] } } } },
      },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    for (const upstream of Object.values(upstreams)) await upstream.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a Gateway-level basic policy protects every unnamed rule of the http-routing guide and is Accepted', async () => {
    apply('httproutes', fooLoginRoute());
    apply('httproutes', barRoute());
    await expectStatus('foo.example.com', '/login', 200);
    await expectStatus('bar.example.com', '/', 200);
    apply('tollgatepolicies', basicPolicy('gateway-auth', [target('Gateway', 'example-gateway')]));
    await protectedBy('foo.example.com', '/login', 'foo-svc');
    await protectedBy('bar.example.com', '/', 'bar-svc');
    await protectedBy('bar.example.com', '/', 'bar-svc-canary', { env: 'canary' });
    await policyStatus('gateway-auth', 'True', 'Accepted');
    // A local 401 to HEAD: the challenge, and neither a body nor a JSON content type.
    const raw = await rawHead(tollgate.proxyPort, 'foo.example.com', '/login');
    assertBodilessHead(raw, 401);
    assert.match(raw, /^www-authenticate: Basic realm=/im);
    await cleanUp();
  });

  it('a listener-level policy (Gateway + sectionName) protects the unnamed rules routed through it', async () => {
    apply('httproutes', barRoute());
    await expectStatus('bar.example.com', '/', 200);
    apply('tollgatepolicies', basicPolicy('listener-auth', [target('Gateway', 'example-gateway', 'http')]));
    await protectedBy('bar.example.com', '/', 'bar-svc');
    await protectedBy('bar.example.com', '/', 'bar-svc-canary', { env: 'canary' });
    await policyStatus('listener-auth', 'True', 'Accepted');
    await cleanUp();
  });

  it('a route-level policy protects the traffic-splitting guide’s one unnamed rule, on both weighted backends', async () => {
    apply('httproutes', fooSplitRoute());
    await expectStatus('foo.example.com', '/login', 200);
    apply('tollgatepolicies', basicPolicy('route-auth', [target('HTTPRoute', 'foo-route')]));
    await expectStatus('foo.example.com', '/', 401);
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      assert.equal((await get('foo.example.com', `/${i}`)).status, 401, 'every request without credentials');
      const passed = await get('foo.example.com', `/${i}`, { authorization: ALICE });
      assert.equal(passed.status, 200);
      seen.add(passed.json<{ server: string }>().server);
    }
    assert.ok(seen.has('foo-v1'), `the 90% backend answered: ${[...seen]}`);
    await policyStatus('route-auth', 'True', 'Accepted');
    await cleanUp();
  });

  it('a policy that cannot be built (its Secret is missing) closes the unnamed rules with 503 and is not Accepted', async () => {
    apply('httproutes', barRoute());
    await expectStatus('bar.example.com', '/', 200);
    apply('tollgatepolicies', basicPolicy('not-yet', [target('HTTPRoute', 'bar-route')], 'no-such-users'));
    await expectStatus('bar.example.com', '/', 503, {}, 'auth_misconfigured');
    await expectStatus('bar.example.com', '/', 503, { env: 'canary' }, 'auth_misconfigured');
    await policyStatus('not-yet', 'False', 'Invalid');
    assertBodilessHead(await rawHead(tollgate.proxyPort, 'bar.example.com', '/'), 503);
    // The Secret appears: the policy is in force and Accepted.
    api.apply(
      secret({ name: 'no-such-users', namespace: NS, data: { auth: `alice:${bcryptOf('wonderland')}\n` } }),
    );
    applied.push(['secrets', 'no-such-users']);
    await protectedBy('bar.example.com', '/', 'bar-svc');
    await policyStatus('not-yet', 'True', 'Accepted');
    await cleanUp();
  });

  it('a route-level policy protects the grpc-routing guide’s GRPCRoute (an unnamed rule with a method match)', async () => {
    apply(
      'grpcroutes',
      httpRouteObject({
        kind: 'GRPCRoute',
        name: 'foo-route',
        namespace: NS,
        parentRefs: [{ name: 'example-gateway' }],
        hostnames: ['foo.example.com'],
        rules: [
          {
            matches: [{ method: { service: 'com.example.User', method: 'Login' } }],
            backendRefs: [{ name: 'foo-svc', port: 8080 }],
          },
        ],
      }),
    );
    apply('tollgatepolicies', basicPolicy('grpc-auth', [target('GRPCRoute', 'foo-route')]));
    /** A gRPC call over h2c, as a client sends it: the grpc-status Tollgate or the upstream gave. */
    const call = (headers: Record<string, string> = {}) =>
      new Promise<string | undefined>((resolve, reject) => {
        const session = http2.connect(`http://127.0.0.1:${tollgate.proxyPort}`);
        session.on('error', reject);
        const stream = session.request({
          ':method': 'POST',
          ':path': '/com.example.User/Login',
          ':authority': 'foo.example.com',
          'content-type': 'application/grpc',
          te: 'trailers',
          ...headers,
        });
        let status: string | undefined;
        stream.on('response', (response) => {
          status = response['grpc-status'] as string | undefined;
        });
        stream.on('trailers', (trailers) => {
          status ??= trailers['grpc-status'] as string | undefined;
        });
        stream.on('error', reject);
        stream.on('close', () => {
          session.close();
          resolve(status);
        });
        stream.resume();
        stream.end(Buffer.alloc(5));
      });
    await policyStatus('grpc-auth', 'True', 'Accepted');
    await waitFor(async () => (await call()) === '16', SETTLE_MS);
    assert.notEqual(
      await call({ authorization: ALICE }),
      '16',
      'with credentials the call passes authentication',
    );
    await cleanUp();
  });

  it('HEAD to a host nothing serves: 404 with no body and no JSON content type (GET keeps its JSON body)', async () => {
    assertBodilessHead(await rawHead(tollgate.proxyPort, 'nowhere.example.com', '/'), 404);
    // The same over HTTP/2: HEADERS that end the stream, no DATA, no content type.
    const h2 = await new Promise<{ headers: http2.IncomingHttpHeaders; bytes: number }>((resolve, reject) => {
      const session = http2.connect(`http://127.0.0.1:${tollgate.proxyPort}`);
      session.on('error', reject);
      const stream = session.request({
        ':method': 'HEAD',
        ':path': '/',
        ':authority': 'nowhere.example.com',
      });
      let headers: http2.IncomingHttpHeaders = {};
      let bytes = 0;
      stream.on('response', (response) => {
        headers = response;
      });
      stream.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
      });
      stream.on('error', reject);
      stream.on('close', () => {
        session.close();
        resolve({ headers, bytes });
      });
      stream.end();
    });
    assert.equal(h2.headers[':status'], 404);
    assert.equal(h2.headers['content-type'], undefined);
    assert.equal(h2.bytes, 0);
    const got = await get('nowhere.example.com', '/');
    assert.equal(got.status, 404);
    assert.match(String(got.headers['content-type']), /^application\/json/);
    assert.equal(got.json().error, 'not_found');
  });

  it('a listener whose certificate Secret is missing counts the routes attached to it (attachedRoutes), and they are Accepted', async () => {
    apply(
      'gateways',
      gatewayObject({
        name: 'unresolved-gateway',
        namespace: NS,
        listeners: [
          {
            name: 'https',
            protocol: 'HTTPS',
            port: 443,
            hostname: 'secure.example.com',
            tls: { certificateRefs: [{ group: '', kind: 'Secret', name: 'no-such-certificate' }] },
          },
        ],
      }),
    );
    apply(
      'httproutes',
      httpRouteObject({
        name: 'secure-route',
        namespace: NS,
        parentRefs: [{ name: 'unresolved-gateway' }],
        rules: [{ backendRefs: [{ name: 'foo-svc', port: 8080 }] }],
      }),
    );
    type ListenerStatus = {
      attachedRoutes: number;
      conditions: Array<{ type: string; status: string; reason: string }>;
    };
    const listener = () =>
      (api.get('gateways', NS, 'unresolved-gateway')?.status as { listeners?: ListenerStatus[] } | undefined)
        ?.listeners?.[0];
    try {
      await api.waitFor(() => listener()?.attachedRoutes === 1, 'attachedRoutes 1', SETTLE_MS);
    } catch {
      assert.fail(`listener status: ${JSON.stringify(listener())}`);
    }
    assert.ok(hasCondition(listener()?.conditions, 'Programmed', 'False', 'Invalid'));
    assert.ok(hasCondition(listener()?.conditions, 'ResolvedRefs', 'False', 'InvalidCertificateRef'));
    // Attached, not refused: the route's parent status says so (GatewayWithAttachedRoutes), not
    // NotAllowedByListeners, a listener that would not have it.
    const parent = () =>
      routeParentConditions(api.get('httproutes', NS, 'secure-route'), 'unresolved-gateway');
    try {
      await api.waitFor(
        () => hasCondition(parent(), 'Accepted', 'True', 'Accepted'),
        'route Accepted',
        SETTLE_MS,
      );
    } catch {
      assert.fail(`route parent status: ${JSON.stringify(parent())}`);
    }
    await cleanUp();
  });
});
