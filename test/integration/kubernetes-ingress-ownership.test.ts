import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import tls from 'node:tls';
import { nonLoopbackAddress } from '../helpers/auth-services.ts';
import { hasOpenssl, SecretVolume, type SelfSigned, selfSigned } from '../helpers/certs.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  ingress,
  ingressClass,
  type RecordedEvent,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { request, type SimpleResponse, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { PROCESS_START_MS } from '../helpers/workers.ts';

/** How long a change may take to show on a loaded machine (docs/ingress.md promises 1 s; not the subject here). */
const SETTLE_MS = 10_000;

/** The certificate a handshake naming `servername` gets. */
async function servedFingerprint(port: number, servername: string): Promise<string> {
  const socket = tls.connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false });
  socket.setTimeout(10_000, () => socket.destroy(new Error('TLS handshake timed out')));
  await once(socket, 'secureConnect');
  const fingerprint = socket.getPeerCertificate().fingerprint256;
  socket.destroy();
  return fingerprint;
}

/**
 * Hosts belong to one owner (docs/ingress.md#host-ownership): upstreams.yaml's hosts take no Ingress
 * path, a host first claimed by an Ingress belongs to its namespace, a TLS Secret serves SNI only
 * for hosts its own Ingress serves; an Ingress's auth-url may not target the pod itself.
 */
describe('Ingress host ownership, SNI ownership and auth-url targets (built process, fake API)', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let api: FakeKubeApi;
  let tollgate: Tollgate;
  let fallback: SelfSigned;

  const get = (host: string, path = '/', headers: Record<string, string> = {}): Promise<SimpleResponse> =>
    request(`${tollgate.proxyUrl}${path}`, { headers: { host, ...headers } });
  const serverOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  const settled = async (host: string, path: string, expected: (res: SimpleResponse) => boolean) => {
    let last: SimpleResponse | null = null;
    try {
      await waitFor(async () => {
        last = await get(host, path);
        return expected(last);
      }, SETTLE_MS);
    } catch {
      const seen = last as SimpleResponse | null;
      assert.fail(`${host}${path} not as expected (last: ${seen?.status} ${seen?.body})`);
    }
  };
  const rejected = async (namespace: string, name: string) => {
    const series = `tollgate_ingress_rejected{namespace="${namespace}",name="${name}"}`;
    const line = (await tollgate.metrics()).split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? null : Number(line.slice(series.length + 1));
  };
  const eventOf = async (name: string, reason: string): Promise<RecordedEvent> => {
    await waitFor(() => api.events.some((e) => e.involvedObject.name === name && e.reason === reason));
    return api.events
      .filter((e) => e.involvedObject.name === name && e.reason === reason)
      .at(-1) as RecordedEvent;
  };
  /** Service `name` in `namespace` whose port 80 fronts the pod port of `pod`. */
  const serviceFor = (namespace: string, name: string, pod: { port: number }) => {
    api.apply(service({ name, namespace, ports: [{ name: 'http', port: 80, targetPort: pod.port }] }));
    api.apply(
      endpointSlice({
        service: name,
        namespace,
        ports: [{ name: 'http', port: pod.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
  };
  const tlsSecret = (namespace: string, name: string, pair: SelfSigned) =>
    secret({
      name,
      namespace,
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': pair.cert.toString(), 'tls.key': pair.key.toString() },
    });

  before(async () => {
    const teamA = await scope.upstream({ name: 'team-a' });
    const teamAApi = await scope.upstream({ name: 'team-a-api' });
    const teamB = await scope.upstream({ name: 'team-b' });
    const teamC = await scope.upstream({ name: 'team-c' });
    const file = await scope.upstream({ name: 'file' });
    api = scope.keep(await startFakeKubeApi());
    api.apply(ingressClass());
    serviceFor('team-a', 'app', teamA);
    serviceFor('team-a', 'api', teamAApi);
    serviceFor('team-b', 'app', teamB);
    serviceFor('team-c', 'app', teamC);
    fallback = selfSigned('default.test');
    const volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    scope.keep({ close: async () => volume.remove() });
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-ingress-ownership-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    tollgate = await scope.tollgate({
      main: {
        access_log: false,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps'), ingress_class: 'tollgate' },
      },
      upstreams: {
        upstreams: {
          'file.test': {
            paths: {
              '/': { servers: [file.address], authorization: { type: 'basic', creds: 'ops:ops-pw' } },
            },
          },
        },
      },
      env: { KUBECONFIG: '' },
      readyTimeoutMs: PROCESS_START_MS,
    });
  });

  it("another namespace's Ingress takes no path on a host it does not own (Exact / beside Prefix / included); the owner's namespace may share it", async () => {
    api.apply(
      ingress({
        name: 'web',
        namespace: 'team-a',
        rules: [{ host: 'app.test', paths: [{ path: '/', service: 'app', port: 80 }] }],
      }),
    );
    await settled('app.test', '/', (res) => serverOf(res) === 'team-a');
    api.apply(
      ingress({
        name: 'takeover',
        namespace: 'team-b',
        rules: [
          {
            host: 'app.test',
            paths: [
              { path: '/', pathType: 'Exact', service: 'app', port: 80 },
              { path: '/api', pathType: 'Prefix', service: 'app', port: 80 },
            ],
          },
          { host: 'b-own.test', paths: [{ service: 'app', port: 80 }] },
        ],
      }),
    );
    await waitFor(async () => (await rejected('team-b', 'takeover')) === 1, SETTLE_MS);
    const event = await eventOf('takeover', 'Rejected');
    assert.equal(event.type, 'Warning');
    assert.equal(event.namespace, 'team-b');
    assert.match(event.message, /host app\.test belongs to namespace team-a/);
    // The log line is written beside the metric and the Event, not before them: wait for it too.
    await waitFor(
      async () =>
        tollgate
          .logs()
          .some(
            (line) => line.ingress === 'team-b/takeover' && String(line.msg).includes('ingress rejected'),
          ),
      SETTLE_MS,
    );
    // team-a's users (and their credentials) keep reaching team-a only; the Ingress is left out whole.
    assert.equal(serverOf(await get('app.test', '/')), 'team-a');
    assert.equal(serverOf(await get('app.test', '/api')), 'team-a');
    assert.equal(serverOf(await get('app.test', '/api/keys')), 'team-a');
    // Its other host is its own, claimed by naming it: held closed (503) while the Ingress is left out.
    assert.equal((await get('b-own.test', '/')).status, 503);

    // Another Ingress of the owner's namespace shares the host (the per-path rules apply there).
    api.apply(
      ingress({
        name: 'web-api',
        namespace: 'team-a',
        rules: [{ host: 'app.test', paths: [{ path: '/api', service: 'api', port: 80 }] }],
      }),
    );
    await settled('app.test', '/api/keys', (res) => serverOf(res) === 'team-a-api');
    assert.equal(serverOf(await get('app.test', '/')), 'team-a');
    assert.equal(await rejected('team-a', 'web-api'), 0);

    // Once team-a names the host no more, the next oldest claim (team-b's) owns it.
    api.delete('ingresses', 'team-a', 'web');
    api.delete('ingresses', 'team-a', 'web-api');
    await settled('app.test', '/api', (res) => serverOf(res) === 'team-b');
    await waitFor(async () => (await rejected('team-b', 'takeover')) === 0, SETTLE_MS);
  });

  it('a host upstreams.yaml serves takes no path from any Ingress', async () => {
    api.apply(
      ingress({
        name: 'on-file',
        namespace: 'team-b',
        rules: [
          {
            host: 'file.test',
            paths: [
              { path: '/', pathType: 'Exact', service: 'app', port: 80 },
              { path: '/public', service: 'app', port: 80 },
            ],
          },
        ],
      }),
    );
    await waitFor(async () => (await rejected('team-b', 'on-file')) === 1, SETTLE_MS);
    const event = await eventOf('on-file', 'Rejected');
    assert.match(event.message, /host file\.test is served by upstreams\.yaml/);
    // upstreams.yaml's basic auth still guards the whole host.
    assert.equal((await get('file.test', '/')).status, 401);
    assert.equal((await get('file.test', '/public')).status, 401);
    const ops = { authorization: `Basic ${Buffer.from('ops:ops-pw').toString('base64')}` };
    assert.equal(serverOf(await get('file.test', '/public', ops)), 'file');
  });

  it("a TLS Secret serves SNI only for hosts its own Ingress serves: no certificate for another namespace's host or upstreams.yaml's", async () => {
    const port = tollgate.tlsPort as number;
    const shopOfC = selfSigned('shop.test');
    const shopOfA = selfSigned('shop.test');
    const shopOfB = selfSigned('shop.test');
    // team-c's Ingress is the oldest, routes only c.test, and lists shop.test beside it.
    api.apply(tlsSecret('team-c', 'c-tls', shopOfC));
    api.apply(
      ingress({
        name: 'old-c',
        namespace: 'team-c',
        tls: [{ hosts: ['c.test', 'shop.test'], secretName: 'c-tls' }],
        rules: [{ host: 'c.test', paths: [{ service: 'app', port: 80 }] }],
      }),
    );
    await waitFor(
      async () => (await servedFingerprint(port, 'c.test')) === shopOfC.fingerprint256,
      SETTLE_MS,
    );
    assert.equal(await servedFingerprint(port, 'shop.test'), fallback.fingerprint256);
    await eventOf('old-c', 'TLSHostNotServed');

    api.apply(tlsSecret('team-a', 'a-tls', shopOfA));
    api.apply(
      ingress({
        name: 'shop',
        namespace: 'team-a',
        tls: [{ hosts: ['shop.test'], secretName: 'a-tls' }],
        rules: [{ host: 'shop.test', paths: [{ service: 'app', port: 80 }] }],
      }),
    );
    await waitFor(
      async () => (await servedFingerprint(port, 'shop.test')) === shopOfA.fingerprint256,
      SETTLE_MS,
    );

    // team-b's newer Ingress routes b2.test but lists shop.test, upstreams.yaml's file.test and a host
    // nobody routes under its Secret: none of them is served with it.
    api.apply(tlsSecret('team-b', 'b-tls', shopOfB));
    api.apply(
      ingress({
        name: 'b2',
        namespace: 'team-b',
        tls: [{ hosts: ['shop.test', 'file.test', 'nobody.test'], secretName: 'b-tls' }],
        rules: [{ host: 'b2.test', paths: [{ service: 'app', port: 80 }] }],
      }),
    );
    const notice = await eventOf('b2', 'TLSHostNotServed');
    assert.match(notice.message, /not served for shop\.test/);
    assert.equal(
      await servedFingerprint(port, 'shop.test'),
      shopOfA.fingerprint256,
      "the owner's certificate",
    );
    assert.equal(
      await servedFingerprint(port, 'file.test'),
      fallback.fingerprint256,
      "main.yaml's certificate",
    );
    assert.equal(await servedFingerprint(port, 'nobody.test'), fallback.fingerprint256);
    assert.equal(await servedFingerprint(port, 'b2.test'), fallback.fingerprint256);
    assert.equal(await servedFingerprint(port, 'c.test'), shopOfC.fingerprint256);

    // The owner's Ingress gone, nobody routes shop.test: no Secret of the others takes it over.
    api.delete('ingresses', 'team-a', 'shop');
    await waitFor(
      async () => (await servedFingerprint(port, 'shop.test')) === fallback.fingerprint256,
      SETTLE_MS,
    );
    assert.equal((await get('shop.test', '/')).status, 404);
  });

  it("an Ingress's auth-url may not target loopback, link-local or Tollgate's own listeners: its paths close (503)", async () => {
    const admin = tollgate.adminPort;
    const local = nonLoopbackAddress();
    const targets = [
      [`http://127.0.0.1:${admin}/healthz`, /loopback address 127\.0\.0\.1/],
      [`http://localhost:${admin}/healthz`, /names localhost/],
      [`http://[::ffff:127.0.0.1]:${admin}/healthz`, /loopback address 127\.0\.0\.1/],
      ['http://169.254.169.254/latest/meta-data/', /link-local address 169\.254\.169\.254/],
      ...(local === null ? [] : [[`http://${local}:${admin}/healthz`, /Tollgate's own listener/] as const]),
    ] as const;
    for (const [index, [url]] of targets.entries()) {
      api.apply(
        ingress({
          name: `ssrf-${index}`,
          namespace: 'team-a',
          annotations: { 'nginx.ingress.kubernetes.io/auth-url': url },
          rules: [{ host: `ssrf-${index}.test`, paths: [{ service: 'app', port: 80 }] }],
        }),
      );
    }
    for (const [index, [url, why]] of targets.entries()) {
      await settled(
        `ssrf-${index}.test`,
        '/',
        (res) => res.status === 503 && res.json().error === 'auth_misconfigured',
      );
      const event = await eventOf(`ssrf-${index}`, 'PartlyServed');
      assert.match(event.message, why, url);
      assert.equal(await rejected('team-a', `ssrf-${index}`), 1);
    }
  });

  it("a broken owner Ingress keeps its host: 503 there, never another namespace's backend (its defaultBackend included); fixed, it serves again", async () => {
    const owner = (paths: Array<{ path: string }>) =>
      ingress({
        name: 'held',
        namespace: 'team-a',
        rules: [{ host: 'held.test', paths: paths.map(({ path }) => ({ path, service: 'app', port: 80 })) }],
      });
    api.apply(owner([{ path: '/' }]));
    await settled('held.test', '/', (res) => serverOf(res) === 'team-a');
    api.apply(
      ingress({
        name: 'held-newcomer',
        namespace: 'team-b',
        rules: [{ host: 'held.test', paths: [{ service: 'app', port: 80 }] }],
      }),
    );
    // team-b also serves the default host: where a request for an unserved host would land.
    api.apply(
      ingress({ name: 'catch-all', namespace: 'team-b', defaultBackend: { service: 'app', port: 80 } }),
    );
    await settled('unknown.test', '/', (res) => serverOf(res) === 'team-b');
    await waitFor(async () => (await rejected('team-b', 'held-newcomer')) === 1, SETTLE_MS);
    assert.equal(serverOf(await get('held.test', '/')), 'team-a');

    // Every path of the owner invalid: the Ingress is left out whole, and still holds held.test.
    api.apply(owner([{ path: 'no-slash' }]));
    await waitFor(async () => (await rejected('team-a', 'held')) === 1, SETTLE_MS);
    await settled('held.test', '/', (res) => res.status === 503);
    for (let i = 0; i < 20; i += 1) {
      const res = await get('held.test', '/');
      assert.equal(res.status, 503, `held.test: ${res.status} ${res.body}`);
      assert.notEqual(serverOf(res), 'team-b');
    }
    assert.equal(await rejected('team-b', 'held-newcomer'), 1);

    api.apply(owner([{ path: '/' }]));
    await settled('held.test', '/', (res) => serverOf(res) === 'team-a');
    for (const [namespace, name] of [
      ['team-a', 'held'],
      ['team-b', 'held-newcomer'],
      ['team-b', 'catch-all'],
    ] as const)
      api.delete('ingresses', namespace, name);
    await settled('unknown.test', '/', (res) => res.status === 404);
  });

  it('Event reasons: BackendNotFound for a missing Service; digest auth named as unsupported', async () => {
    api.apply(
      ingress({
        name: 'no-service',
        namespace: 'team-a',
        rules: [{ host: 'no-service.test', paths: [{ service: 'nope', port: 80 }] }],
      }),
    );
    const missing = await eventOf('no-service', 'BackendNotFound');
    assert.equal(missing.type, 'Warning');
    assert.match(missing.message, /Service team-a\/nope does not exist/);
    assert.ok(!api.events.some((e) => e.involvedObject.name === 'no-service' && e.reason === 'Ignored'));
    assert.equal(await rejected('team-a', 'no-service'), 0);

    api.apply(
      ingress({
        name: 'digest',
        namespace: 'team-a',
        annotations: {
          'nginx.ingress.kubernetes.io/auth-type': 'digest',
          'nginx.ingress.kubernetes.io/auth-secret': 'users',
        },
        rules: [{ host: 'digest.test', paths: [{ service: 'app', port: 80 }] }],
      }),
    );
    await settled(
      'digest.test',
      '/',
      (res) => res.status === 503 && res.json().error === 'auth_misconfigured',
    );
    const digest = await eventOf('digest', 'PartlyServed');
    assert.match(digest.message, /auth-type: digest authentication is not supported/);
    assert.doesNotMatch(digest.message, /without an auth-type/);
  });
});
