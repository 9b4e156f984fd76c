import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { type AuthService, nonLoopbackAddress, startOauth2Proxy } from '../helpers/auth-services.ts';
import { hasOpenssl, selfSigned } from '../helpers/certs.ts';
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
import { type ProtocolUpstream, type SeenRequest, startProtocolUpstream } from '../helpers/tls-upstream.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import {
  type BlackholeAddress,
  blackholeAddress,
  startUpstream,
  type Upstream,
} from '../helpers/upstream.ts';

/**
 * The ingress-nginx backend annotations (docs/ingress.md#backend-annotations, #canary-ingresses)
 * through the built process and the fake API server: backend-protocol with real TLS, h2c and gRPC
 * upstreams, proxy-ssl-*, timeouts, upstream-vhost, redirects, auth-signin variables, canaries.
 */

const SETTLE_MS = 15_000;
const NGINX = 'nginx.ingress.kubernetes.io/';
const Echo = echoClientClass();

describe('Ingress backend annotations through the built process (fake API server)', {
  skip: !hasOpenssl(),
}, () => {
  const plain = new Map<string, Upstream>();
  let tlsPod: ProtocolUpstream;
  let h2Pod: ProtocolUpstream;
  let h2cPod: ProtocolUpstream;
  let grpcPod: EchoServer;
  let oauth2: AuthService;
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  const podCert = selfSigned('pod.apps.svc');
  const clientCert = selfSigned('tollgate-client', { ip: false });
  let mtlsPod: ProtocolUpstream;
  let blackhole: BlackholeAddress;

  const get = (host: string, path = '/', headers: Record<string, string> = {}): Promise<SimpleResponse> =>
    request(`${tollgate.proxyUrl}${path}`, { headers: { host, ...headers } });
  const serverOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status} ${res.body}`;
  const settled = async (
    host: string,
    path: string,
    expected: (res: SimpleResponse) => boolean,
    headers = {},
    timed: (ms: number) => void = () => {},
  ) => {
    let last: SimpleResponse | null = null;
    try {
      await waitFor(async () => {
        const started = performance.now();
        last = await get(host, path, headers);
        timed(performance.now() - started);
        return expected(last);
      }, SETTLE_MS);
    } catch {
      const seen = last as SimpleResponse | null;
      assert.fail(`${host}${path} not as expected (last: ${seen?.status} ${seen?.body})`);
    }
    return last as unknown as SimpleResponse;
  };
  /** A Service `name` in `namespace` whose port 80 fronts `port` on 127.0.0.1. */
  const serviceAt = (name: string, port: number, namespace = 'apps') => {
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
  const eventOf = async (name: string, pattern: RegExp) => {
    await waitFor(
      () => api.events.some((e) => e.involvedObject.name === name && pattern.test(e.message)),
      SETTLE_MS,
    );
    return api.events.find((e) => e.involvedObject.name === name && pattern.test(e.message));
  };

  before(async () => {
    for (const name of ['main', 'canary', 'slow', 'other']) {
      plain.set(
        name,
        await startUpstream({
          name,
          ...(name === 'slow'
            ? {
                handler: (_req, res) => {
                  const timer = setTimeout(() => res.end('late'), 3_000);
                  res.on('close', () => clearTimeout(timer));
                },
              }
            : {}),
        }),
      );
    }
    tlsPod = await startProtocolUpstream({ name: 'tls-pod', tls: podCert });
    h2Pod = await startProtocolUpstream({ name: 'h2-pod', tls: podCert, h2: true, h2Only: true });
    h2cPod = await startProtocolUpstream({ name: 'h2c-pod', h2: true });
    mtlsPod = await startProtocolUpstream({ name: 'mtls-pod', tls: podCert, clientCa: clientCert.cert });
    grpcPod = await startEchoServer();
    // An Ingress's auth-url may not name loopback: the auth service listens on this machine's address.
    oauth2 = await startOauth2Proxy(nonLoopbackAddress() ?? '127.0.0.1');
    api = await startFakeKubeApi();
    api.apply(ingressClass());
    for (const [name, upstream] of plain) serviceAt(name, upstream.port);
    serviceAt('tls', tlsPod.port);
    serviceAt('h2', h2Pod.port);
    serviceAt('h2c', h2cPod.port);
    serviceAt('mtls', mtlsPod.port);
    blackhole = await blackholeAddress();
    serviceAt('silent', Number(blackhole.address.split(':')[1]));
    serviceAt('grpc', grpcPod.port);
    serviceAt('elsewhere', (plain.get('other') as Upstream).port, 'team-b');
    dir = await mkdtemp(join(tmpdir(), 'tollgate-ingress-backend-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        http2_cleartext: true,
        upstream_response_timeout_seconds: 30,
        upstream_connect_timeout_seconds: 30,
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps'), ingress_class: 'tollgate' },
      },
      upstreams: {
        upstreams: {
          'file.test': { paths: { '/': { servers: [(plain.get('other') as Upstream).address] } } },
        },
      },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await oauth2?.close();
    await Promise.all([...plain.values()].map((u) => u.close()));
    await Promise.all([tlsPod, h2Pod, h2cPod, mtlsPod, grpcPod].map((u) => u?.close()));
    await blackhole?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('backend-protocol HTTPS: TLS to the pod (unverified by default, as ingress-nginx), with a warning', async () => {
    api.apply(
      ingress({
        name: 'argocd',
        namespace: 'apps',
        annotations: { [`${NGINX}backend-protocol`]: 'HTTPS' },
        rules: [{ host: 'argocd.test', paths: [{ service: 'tls', port: 80 }] }],
      }),
    );
    const res = await settled('argocd.test', '/', (r) => r.status === 200);
    const seen = res.json<SeenRequest>();
    assert.equal(seen.server, 'tls-pod');
    assert.equal(seen.headers.host, 'argocd.test');
    const event = await eventOf('argocd', /not verified/);
    assert.equal(event?.type, 'Warning');
    assert.equal(event?.reason, 'UpstreamNotVerified');
  });

  it("proxy-ssl-verify on: refused without the CA; the Secret's ca.crt and proxy-ssl-name make it pass", async () => {
    api.apply(
      ingress({
        name: 'verified',
        namespace: 'apps',
        annotations: { [`${NGINX}backend-protocol`]: 'HTTPS', [`${NGINX}proxy-ssl-verify`]: 'on' },
        rules: [{ host: 'verified.test', paths: [{ service: 'tls', port: 80 }] }],
      }),
    );
    await settled('verified.test', '/', (r) => r.status === 502);
    api.apply(secret({ name: 'pod-ca', namespace: 'apps', data: { 'ca.crt': podCert.cert.toString() } }));
    api.apply(
      ingress({
        name: 'verified',
        namespace: 'apps',
        annotations: {
          [`${NGINX}backend-protocol`]: 'HTTPS',
          [`${NGINX}proxy-ssl-verify`]: 'on',
          [`${NGINX}proxy-ssl-secret`]: 'apps/pod-ca',
          [`${NGINX}proxy-ssl-name`]: 'pod.apps.svc',
        },
        rules: [{ host: 'verified.test', paths: [{ service: 'tls', port: 80 }] }],
      }),
    );
    const res = await settled('verified.test', '/', (r) => r.status === 200);
    assert.equal(res.json<SeenRequest>().sni, 'pod.apps.svc');
    // The wrong name with verification on is refused again: the name is really checked.
    api.apply(
      ingress({
        name: 'verified',
        namespace: 'apps',
        annotations: {
          [`${NGINX}backend-protocol`]: 'HTTPS',
          [`${NGINX}proxy-ssl-verify`]: 'on',
          [`${NGINX}proxy-ssl-secret`]: 'pod-ca',
          [`${NGINX}proxy-ssl-name`]: 'wrong.apps.svc',
        },
        rules: [{ host: 'verified.test', paths: [{ service: 'tls', port: 80 }] }],
      }),
    );
    await settled('verified.test', '/', (r) => r.status === 502);
  });

  it('proxy-ssl-secret tls.crt/tls.key: the client certificate a pod requiring mTLS checks', async () => {
    api.apply(
      secret({
        name: 'client-pair',
        namespace: 'apps',
        data: { 'tls.crt': clientCert.cert.toString(), 'tls.key': clientCert.key.toString() },
      }),
    );
    api.apply(
      ingress({
        name: 'mtls',
        namespace: 'apps',
        annotations: {
          [`${NGINX}backend-protocol`]: 'HTTPS',
          [`${NGINX}proxy-ssl-secret`]: 'client-pair',
        },
        rules: [{ host: 'mtls.test', paths: [{ service: 'mtls', port: 80 }] }],
      }),
    );
    const res = await settled('mtls.test', '/', (r) => r.status === 200);
    assert.equal(res.json<SeenRequest>().clientCn, 'tollgate-client');
  });

  it('backend-protocol GRPCS, H2C and GRPC: HTTP/2 over TLS, h2c, and a real gRPC call', async () => {
    api.apply(
      ingress({
        name: 'protocols',
        namespace: 'apps',
        annotations: { [`${NGINX}backend-protocol`]: 'GRPCS' },
        rules: [{ host: 'grpcs.test', paths: [{ service: 'h2', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'cleartext',
        namespace: 'apps',
        annotations: { [`${NGINX}backend-protocol`]: 'H2C' },
        rules: [{ host: 'h2c.test', paths: [{ service: 'h2c', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'grpc',
        namespace: 'apps',
        annotations: { [`${NGINX}backend-protocol`]: 'GRPC' },
        rules: [{ host: 'grpc.test', paths: [{ service: 'grpc', port: 80 }] }],
      }),
    );
    const grpcs = (await settled('grpcs.test', '/', (r) => r.status === 200)).json<SeenRequest>();
    assert.equal(grpcs.httpVersion, '2.0');
    assert.equal(grpcs.alpn, 'h2');
    // An HTTP/1.1 client request still goes upstream as h2c: the annotation decides the protocol.
    const h2c = (await settled('h2c.test', '/', (r) => r.status === 200)).json<SeenRequest>();
    assert.equal(h2c.httpVersion, '2.0');
    assert.equal(h2c.alpn, null);
    await settled('grpc.test', '/', (r) => r.status !== 404);
    const client = new Echo(`127.0.0.1:${tollgate.proxyPort}`, grpc.credentials.createInsecure(), {
      'grpc.default_authority': 'grpc.test',
    });
    try {
      const reply = await new Promise<EchoReply>((resolve, reject) =>
        client.Unary({ message: 'through the Ingress' }, (error: Error | null, answer: EchoReply) =>
          error ? reject(error) : resolve(answer),
        ),
      );
      assert.equal(reply.message, 'through the Ingress');
    } finally {
      client.close();
    }
  });

  it('an unknown backend-protocol leaves the Ingress out and the Event names the annotation', async () => {
    api.apply(
      ingress({
        name: 'ajp',
        namespace: 'apps',
        annotations: { [`${NGINX}backend-protocol`]: 'AJP' },
        rules: [{ host: 'ajp.test', paths: [{ service: 'main', port: 80 }] }],
      }),
    );
    const event = await eventOf('ajp', /backend-protocol/);
    assert.match(
      event?.message ?? '',
      /nginx\.ingress\.kubernetes\.io\/backend-protocol: AJP is not supported/,
    );
    // Its host stays its own, held closed (503) while it cannot be served (docs/ingress.md#host-ownership).
    assert.equal((await get('ajp.test')).status, 503);
  });

  it('proxy-read-timeout: 504 before the slow pod answers; upstream-vhost sets the Host sent upstream', async () => {
    api.apply(
      ingress({
        name: 'timeouts',
        namespace: 'apps',
        annotations: { [`${NGINX}proxy-read-timeout`]: '1', [`${NGINX}proxy-connect-timeout`]: '2' },
        rules: [{ host: 'slow.test', paths: [{ service: 'slow', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'vhost',
        namespace: 'apps',
        annotations: { [`${NGINX}upstream-vhost`]: 'backend.internal' },
        rules: [{ host: 'vhost.test', paths: [{ service: 'main', port: 80 }] }],
      }),
    );
    await settled('slow.test', '/', (r) => r.status === 504);
    const res = await settled('vhost.test', '/', (r) => r.status === 200);
    const headers = res.json<{ headers: Record<string, string> }>().headers;
    assert.equal(headers.host, 'backend.internal');
    assert.equal(headers['x-forwarded-host'], 'vhost.test');
  });

  it('proxy-connect-timeout: a pod that never accepts fails after it, not the global 30 s', async () => {
    api.apply(
      ingress({
        name: 'unreachable',
        namespace: 'apps',
        annotations: { [`${NGINX}proxy-connect-timeout`]: '1' },
        rules: [{ host: 'silent.test', paths: [{ service: 'silent', port: 80 }] }],
      }),
    );
    // Until the route and its endpoints are in: 404, then 503 no_ready_endpoints. The first other
    // answer is the first request sent to the pod, timed on its own.
    let took = 0;
    const res = await settled(
      'silent.test',
      '/',
      (r) => r.status !== 404 && r.status !== 503,
      {},
      (ms) => {
        took = ms;
      },
    );
    assert.equal(res.status, 502, res.body);
    assert.ok(took < 15_000, `took ${Math.round(took)} ms`);
  });

  it('permanent-redirect (+ code) and temporal-redirect are answered by Tollgate', async () => {
    api.apply(
      ingress({
        name: 'moved',
        namespace: 'apps',
        annotations: {
          [`${NGINX}permanent-redirect`]: 'https://new.example.com/home',
          [`${NGINX}permanent-redirect-code`]: '308',
        },
        rules: [{ host: 'moved.test', paths: [{ service: 'main', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'temp',
        namespace: 'apps',
        annotations: { [`${NGINX}temporal-redirect`]: 'https://maintenance.example.com/' },
        rules: [{ host: 'temp.test', paths: [{ service: 'main', port: 80 }] }],
      }),
    );
    const moved = await settled('moved.test', '/any/path', (r) => r.status === 308);
    assert.equal(moved.headers.location, 'https://new.example.com/home');
    const temp = await settled('temp.test', '/x', (r) => r.status === 302);
    assert.equal(temp.headers.location, 'https://maintenance.example.com/');
    assert.equal(
      (plain.get('main') as Upstream).requests.filter((r) => r.headers.host === 'moved.test').length,
      0,
    );
  });

  it("auth-signin in oauth2-proxy's form works: $host and $escaped_request_uri expanded, no second rd", {
    skip:
      nonLoopbackAddress() === null
        ? 'no address but loopback, which an Ingress auth-url may not name'
        : false,
  }, async () => {
    api.apply(
      ingress({
        name: 'signin',
        namespace: 'apps',
        annotations: {
          [`${NGINX}auth-url`]: `${oauth2.origin}/oauth2/auth`,
          [`${NGINX}auth-signin`]: 'https://$host/oauth2/start?rd=$escaped_request_uri',
        },
        rules: [{ host: 'signin.test', paths: [{ service: 'main', port: 80 }] }],
      }),
    );
    const res = await settled('signin.test', '/page?a=1', (r) => r.status === 302);
    assert.equal(res.headers.location, 'https://signin.test/oauth2/start?rd=%2Fpage%3Fa%3D1');
  });

  it('auth-signin with an unknown $variable closes the paths, the variable named in the Event', async () => {
    api.apply(
      ingress({
        name: 'badvar',
        namespace: 'apps',
        annotations: {
          [`${NGINX}auth-url`]: `${oauth2.origin}/oauth2/auth`,
          [`${NGINX}auth-signin`]: 'https://$host/oauth2/start?rd=$http_referer',
        },
        rules: [{ host: 'badvar.test', paths: [{ service: 'main', port: 80 }] }],
      }),
    );
    await settled('badvar.test', '/', (r) => r.status === 503 && r.json().error === 'auth_misconfigured');
    const event = await eventOf('badvar', /auth-signin/);
    assert.match(event?.message ?? '', /\$http_referer/);
  });

  it('a canary Ingress splits the main path by weight (exact shares), the header and cookie override it', async () => {
    api.apply(
      ingress({
        name: 'shop',
        namespace: 'apps',
        rules: [{ host: 'shop.test', paths: [{ path: '/', service: 'main', port: 80 }] }],
      }),
    );
    await settled('shop.test', '/', (r) => serverOf(r) === 'main');
    api.apply(
      ingress({
        name: 'shop-canary',
        namespace: 'apps',
        annotations: {
          [`${NGINX}canary`]: 'true',
          [`${NGINX}canary-weight`]: '25',
          [`${NGINX}canary-by-header`]: 'X-Canary',
          [`${NGINX}canary-by-cookie`]: 'use_canary',
        },
        rules: [{ host: 'shop.test', paths: [{ path: '/', service: 'canary', port: 80 }] }],
      }),
    );
    await settled('shop.test', '/', (r) => serverOf(r) === 'canary', { 'x-canary': 'always' });
    const counts = { main: 0, canary: 0 } as Record<string, number>;
    for (let i = 0; i < 40; i++) {
      const server = serverOf(await get('shop.test', '/'));
      counts[server] = (counts[server] ?? 0) + 1;
    }
    // Weighted round robin is deterministic: 25 % of 40, exactly.
    assert.deepEqual(counts, { main: 30, canary: 10 });
    for (let i = 0; i < 5; i++) {
      assert.equal(serverOf(await get('shop.test', '/', { 'x-canary': 'always' })), 'canary');
      assert.equal(
        serverOf(await get('shop.test', '/', { 'x-canary': 'never', cookie: 'use_canary=always' })),
        'main',
      );
      assert.equal(serverOf(await get('shop.test', '/', { cookie: 'use_canary=always' })), 'canary');
      assert.equal(serverOf(await get('shop.test', '/', { cookie: 'use_canary=never' })), 'main');
    }
    // Not a conflict: the canary is served, nothing is rejected.
    assert.ok(!api.events.some((e) => e.involvedObject.name === 'shop-canary' && e.reason === 'Rejected'));
  });

  it('canary-by-header-value, canary-weight-total, and sticky sessions staying with their server', async () => {
    api.apply(
      ingress({
        name: 'sticky',
        namespace: 'apps',
        annotations: { [`${NGINX}affinity`]: 'cookie' },
        rules: [{ host: 'sticky.test', paths: [{ service: 'main', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'sticky-canary',
        namespace: 'apps',
        annotations: {
          [`${NGINX}canary`]: 'true',
          [`${NGINX}canary-weight`]: '1',
          [`${NGINX}canary-weight-total`]: '2',
          [`${NGINX}canary-by-header`]: 'x-region',
          [`${NGINX}canary-by-header-value`]: 'eu-west',
        },
        rules: [{ host: 'sticky.test', paths: [{ service: 'canary', port: 80 }] }],
      }),
    );
    await settled('sticky.test', '/', (r) => serverOf(r) === 'canary', { 'x-region': 'eu-west' });
    // Half and half by weight (1 of 2); any other header value does not force the canary.
    const first = await get('sticky.test', '/', { 'x-region': 'us-east' });
    const second = await get('sticky.test', '/', { 'x-region': 'us-east' });
    assert.deepEqual([serverOf(first), serverOf(second)].sort(), ['canary', 'main']);
    const cookie = String((first.headers['set-cookie'] as string[])[0]).split(';')[0] as string;
    for (let i = 0; i < 6; i++)
      assert.equal(
        serverOf(await get('sticky.test', '/', { cookie })),
        serverOf(first),
        'the pinned server keeps its client',
      );
  });

  it('a canary of another namespace, or with no main Ingress, is rejected; the main path is left alone', async () => {
    api.apply(
      ingress({
        name: 'intruder',
        namespace: 'team-b',
        annotations: { [`${NGINX}canary`]: 'true', [`${NGINX}canary-weight`]: '100' },
        rules: [{ host: 'shop.test', paths: [{ path: '/', service: 'elsewhere', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'orphan',
        namespace: 'apps',
        annotations: { [`${NGINX}canary`]: 'true', [`${NGINX}canary-weight`]: '100' },
        rules: [{ host: 'nomain.test', paths: [{ service: 'canary', port: 80 }] }],
      }),
    );
    assert.match((await eventOf('intruder', /canary/))?.message ?? '', /another namespace/);
    assert.match(
      (await eventOf('orphan', /canary/))?.message ?? '',
      /no main Ingress serves nomain\.test \//,
    );
    for (let i = 0; i < 4; i++)
      assert.notEqual(serverOf(await get('shop.test', '/', { 'x-canary': 'never' })), 'other');
    assert.equal((await get('nomain.test')).status, 404);
  });

  it('an ingress-nginx annotation Tollgate does not implement is ignored with a warning Event', async () => {
    api.apply(
      ingress({
        name: 'buffering',
        namespace: 'apps',
        annotations: { [`${NGINX}proxy-buffering`]: 'on' },
        rules: [{ host: 'buffering.test', paths: [{ service: 'main', port: 80 }] }],
      }),
    );
    await settled('buffering.test', '/', (r) => serverOf(r) === 'main');
    const event = await eventOf('buffering', /proxy-buffering/);
    assert.equal(event?.type, 'Warning');
    assert.match(event?.message ?? '', /proxy-buffering ignored: not supported by Tollgate/);
  });
});
