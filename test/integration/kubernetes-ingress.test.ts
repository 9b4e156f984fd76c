import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type AuthService,
  nonLoopbackAddress,
  OAUTH2_PROXY_COOKIE,
  startOauth2Proxy,
} from '../helpers/auth-services.ts';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  ingress,
  ingressClass,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { mintToken } from '../helpers/token-api.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/** How long an Ingress change may take to be served (docs/ingress.md: within 1 s). */
const LIVE_MS = 1_000;
const SETTLE_MS = 10_000;

describe('Ingress objects through the built process (fake API server)', () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let oauth2: AuthService;

  const get = (host: string, path = '/', headers: Record<string, string> = {}): Promise<SimpleResponse> =>
    request(`${tollgate.proxyUrl}${path}`, { headers: { host, ...headers } });
  const serverOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  /** Resolves once `host`+`path` answers as `expected` says; fails if that takes longer than LIVE_MS. */
  const liveWithin = async (
    host: string,
    path: string,
    expected: (res: SimpleResponse) => boolean,
    headers: Record<string, string> = {},
    limitMs = LIVE_MS,
  ) => {
    const started = Date.now();
    let last: SimpleResponse | null = null;
    try {
      await waitFor(async () => {
        last = await get(host, path, headers);
        return expected(last);
      }, limitMs);
    } catch {
      assert.fail(
        `${host}${path} not as expected within ${limitMs} ms (last: ${last && (last as SimpleResponse).status} ${last && (last as SimpleResponse).body})`,
      );
    }
    return Date.now() - started;
  };
  /** The same, where timing is not what the test is about (a loaded machine may take longer). */
  const settled = (host: string, path: string, expected: (res: SimpleResponse) => boolean, headers = {}) =>
    liveWithin(host, path, expected, headers, SETTLE_MS);
  /** A Service `name` whose port 80 (named http) fronts the pod port of upstream `pod`. */
  const serviceFor = (name: string, pod: string, namespace = 'apps') => {
    const port = (upstreams.get(pod) as Upstream).port;
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
  const metric = async (series: string) => {
    const text = await tollgate.metrics();
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? null : Number(line.slice(series.length + 1));
  };

  before(async () => {
    for (const name of ['a', 'b', 'c']) upstreams.set(name, await startUpstream({ name }));
    api = await startFakeKubeApi();
    api.apply(ingressClass());
    serviceFor('web', 'a');
    serviceFor('other', 'b');
    // A Service whose only port has no name: its slice port has none either.
    api.apply(
      service({
        name: 'single',
        namespace: 'apps',
        ports: [{ port: 80, targetPort: (upstreams.get('c') as Upstream).port }],
      }),
    );
    api.apply(
      endpointSlice({
        service: 'single',
        namespace: 'apps',
        ports: [{ port: (upstreams.get('c') as Upstream).port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    // An Ingress's auth-url may not name loopback: the auth service listens on this machine's address.
    oauth2 = await startOauth2Proxy(nonLoopbackAddress() ?? '127.0.0.1');
    dir = await mkdtemp(join(tmpdir(), 'tollgate-ingress-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        masterkey: 'ingress-test-masterkey',
        // The tests speak as a TLS-terminating proxy would when they send X-Forwarded-Proto.
        trusted_proxies: ['127.0.0.1/32'],
        kubernetes: {
          kubeconfig: api.writeKubeconfig(dir, 'apps'),
          ingress_class: 'tollgate',
          publish_address: ['203.0.113.7'],
        },
      },
      upstreams: {
        upstreams: {
          'file.test': { paths: { '/': { servers: [(upstreams.get('c') as Upstream).address] } } },
          'web.test': { paths: { '/taken': { servers: [(upstreams.get('c') as Upstream).address] } } },
        },
      },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await oauth2?.close();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('routing follows an Ingress created, updated and deleted, each within 1 s', async () => {
    assert.equal((await get('live.test', '/app')).status, 404);
    api.apply(
      ingress({
        name: 'web',
        namespace: 'apps',
        rules: [{ host: 'live.test', paths: [{ path: '/app', service: 'web', port: 80 }] }],
      }),
    );
    // Service port 80 is the pods' port of upstream a (as Kubernetes means the number).
    await liveWithin('live.test', '/app/x', (res) => serverOf(res) === 'a');
    api.apply(
      ingress({
        name: 'web',
        namespace: 'apps',
        rules: [{ host: 'live.test', paths: [{ path: '/app', service: 'other', port: 'http' }] }],
      }),
    );
    await liveWithin('live.test', '/app', (res) => serverOf(res) === 'b');
    api.delete('ingresses', 'apps', 'web');
    await liveWithin('live.test', '/app', (res) => res.status === 404);
    // upstreams.yaml's routes kept serving throughout.
    assert.equal(serverOf(await get('web.test', '/taken')), 'c');
  });

  it('a burst of edits (rebuilds coalesced) ends in the last state, live within 1 s of the last', async () => {
    const edits = 25;
    for (let i = 1; i <= edits; i++) {
      api.apply(
        ingress({
          name: 'burst',
          namespace: 'apps',
          rules: [
            {
              host: 'burst.test',
              paths: [{ path: `/v${i}`, service: i % 2 === 1 ? 'web' : 'other', port: 80 }],
            },
          ],
        }),
      );
      // Each edit its own watch event, as a controller updating an object in a loop sends them.
      await new Promise((resolve) => setImmediate(resolve));
    }
    await liveWithin('burst.test', `/v${edits}`, (res) => serverOf(res) === 'a');
    for (const earlier of [1, edits - 1]) assert.equal((await get('burst.test', `/v${earlier}`)).status, 404);
    api.delete('ingresses', 'apps', 'burst');
    await settled('burst.test', `/v${edits}`, (res) => res.status === 404);
  });

  it('a Service whose only port is unnamed, Exact paths and the default backend', async () => {
    api.apply(
      ingress({
        name: 'exact',
        namespace: 'apps',
        rules: [
          {
            host: 'exact.test',
            paths: [
              { path: '/only', pathType: 'Exact', service: 'single', port: 80 },
              { path: '/', pathType: 'Prefix', service: 'web', port: 80 },
            ],
          },
        ],
        defaultBackend: { service: 'other', port: 80 },
      }),
    );
    await settled('exact.test', '/only', (res) => serverOf(res) === 'c');
    assert.equal(serverOf(await get('exact.test', '/only/more')), 'a');
    assert.equal(serverOf(await get('exact.test', '/onlyx')), 'a');
    assert.equal(serverOf(await get('unknown.test', '/anything')), 'b', 'defaultBackend serves DEFAULT /');
    api.delete('ingresses', 'apps', 'exact');
    await settled('exact.test', '/only', (res) => res.status === 404);
  });

  it('basic auth from an htpasswd Secret (bcrypt), with the ingress-nginx annotations', async () => {
    api.apply(
      secret({
        name: 'users',
        namespace: 'apps',
        data: { auth: `alice:${bcryptOf('wonderland')}\n` },
      }),
    );
    api.apply(
      ingress({
        name: 'basic',
        namespace: 'apps',
        annotations: {
          'nginx.ingress.kubernetes.io/auth-type': 'basic',
          'nginx.ingress.kubernetes.io/auth-secret': 'users',
          'nginx.ingress.kubernetes.io/auth-realm': 'Staff only',
        },
        rules: [{ host: 'basic.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled('basic.test', '/', (res) => res.status === 401);
    const refused = await get('basic.test', '/');
    assert.equal(refused.headers['www-authenticate'], 'Basic realm="Staff only", charset="UTF-8"');
    const basic = (user: string, password: string) => ({
      authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
    });
    assert.equal((await get('basic.test', '/', basic('alice', 'wrong'))).status, 401);
    const ok = await get('basic.test', '/', basic('alice', 'wonderland'));
    assert.equal(serverOf(ok), 'a');
    const seen = ok.json<{ headers: Record<string, string> }>().headers;
    assert.equal(seen.authorization, undefined, 'the credential is not forwarded');
    assert.equal(seen['x-tollgate-subject'], 'alice');
  });

  it('apikey auth from a Secret of name:key lines', async () => {
    api.apply(
      secret({
        name: 'keys',
        namespace: 'apps',
        data: { keys: 'ci:0123456789abcdef-ci\nbot:fedcba9876543210-bot\n' },
      }),
    );
    api.apply(
      ingress({
        name: 'keyed',
        namespace: 'apps',
        annotations: { 'tollgate.io/auth-type': 'apikey', 'tollgate.io/auth-secret': 'keys' },
        rules: [{ host: 'keyed.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled('keyed.test', '/', (res) => res.status === 401);
    const ok = await get('keyed.test', '/', { 'x-api-key': 'fedcba9876543210-bot' });
    assert.equal(serverOf(ok), 'a');
    assert.equal(ok.json<{ headers: Record<string, string> }>().headers['x-tollgate-subject'], 'bot');
  });

  it('a missing auth Secret closes the paths (503) and is reported; the Secret appearing opens them with auth', async () => {
    api.apply(
      ingress({
        name: 'locked',
        namespace: 'apps',
        annotations: { 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'not-yet' },
        rules: [{ host: 'locked.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled(
      'locked.test',
      '/',
      (res) => res.status === 503 && res.json().error === 'auth_misconfigured',
    );
    await waitFor(
      async () => (await metric('tollgate_ingress_rejected{namespace="apps",name="locked"}')) === 1,
    );
    await waitFor(() => api.events.some((e) => e.involvedObject.name === 'locked' && e.type === 'Warning'));
    const event = api.events.find((e) => e.involvedObject.name === 'locked');
    assert.match(event?.message ?? '', /auth Secret apps\/not-yet does not exist/);
    assert.ok(
      tollgate
        .logs()
        .some((line) => line.ingress === 'apps/locked' && String(line.msg).includes('partly served')),
    );
    api.apply(secret({ name: 'not-yet', namespace: 'apps', data: { auth: `bob:${bcryptOf('builder')}` } }));
    await settled('locked.test', '/', (res) => res.status === 401);
    const basic = `Basic ${Buffer.from('bob:builder').toString('base64')}`;
    assert.equal(serverOf(await get('locked.test', '/', { authorization: basic })), 'a');
    await waitFor(
      async () => (await metric('tollgate_ingress_rejected{namespace="apps",name="locked"}')) === 0,
    );
  });

  it('snippets are never executed: ignored with a warning, the route served as if absent', async () => {
    api.apply(
      ingress({
        name: 'snippet',
        namespace: 'apps',
        annotations: {
          'nginx.ingress.kubernetes.io/configuration-snippet': 'return 200 "pwned";',
          'nginx.ingress.kubernetes.io/server-snippet': 'location / { return 418; }',
        },
        rules: [{ host: 'snippet.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled('snippet.test', '/', (res) => serverOf(res) === 'a');
    await waitFor(() => api.events.some((e) => e.involvedObject.name === 'snippet'));
    assert.match(
      api.events.find((e) => e.involvedObject.name === 'snippet')?.message ?? '',
      /configuration-snippet ignored: snippets are never executed/,
    );
    assert.equal(await metric('tollgate_ingress_rejected{namespace="apps",name="snippet"}'), 0);
  });

  it('a bad Ingress is left out and reported; the others keep serving; a path conflict goes to the oldest', async () => {
    api.apply(
      ingress({
        name: 'first',
        namespace: 'apps',
        rules: [{ host: 'shared.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled('shared.test', '/', (res) => serverOf(res) === 'a');
    api.apply(
      ingress({
        name: 'second',
        namespace: 'apps',
        rules: [
          {
            host: 'shared.test',
            paths: [
              { service: 'other', port: 80 },
              { path: '/own', service: 'other', port: 80 },
            ],
          },
        ],
      }),
    );
    await settled('shared.test', '/own', (res) => serverOf(res) === 'b');
    assert.equal(serverOf(await get('shared.test', '/')), 'a', 'the older Ingress keeps the path');
    await waitFor(
      async () => (await metric('tollgate_ingress_rejected{namespace="apps",name="second"}')) === 1,
    );
    const second = api.events.filter((e) => e.involvedObject.name === 'second').at(-1);
    assert.match(second?.message ?? '', /already served by the older Ingress apps\/first/);
    assert.equal(second?.reason, 'PartlyServed');

    api.apply(
      ingress({
        name: 'broken',
        namespace: 'apps',
        rules: [{ host: 'broken.test', paths: [{ path: 'no-slash', service: 'web', port: 80 }] }],
      }),
    );
    await waitFor(
      async () => (await metric('tollgate_ingress_rejected{namespace="apps",name="broken"}')) === 1,
    );
    // The host it names stays its own, held closed while it cannot be served (docs/ingress.md#host-ownership).
    assert.equal((await get('broken.test', '/')).status, 503);
    assert.equal(serverOf(await get('shared.test', '/')), 'a');
    assert.ok(api.events.some((e) => e.involvedObject.name === 'broken' && e.reason === 'Rejected'));
  });

  it('writes status.loadBalancer of served Ingresses from publish_address', async () => {
    await waitFor(() => {
      const stored = api.get('ingresses', 'apps', 'first') as {
        status?: { loadBalancer?: { ingress?: unknown } };
      };
      return (
        JSON.stringify(stored?.status?.loadBalancer?.ingress) === JSON.stringify([{ ip: '203.0.113.7' }])
      );
    });
    const broken = api.get('ingresses', 'apps', 'broken') as {
      status?: { loadBalancer?: { ingress?: unknown[] } };
    };
    assert.equal(broken.status?.loadBalancer?.ingress, undefined, 'an Ingress left out gets no address');
  });

  it('Ingresses of another class are not served', async () => {
    api.apply(
      ingress({
        name: 'theirs',
        namespace: 'apps',
        className: 'nginx',
        rules: [{ host: 'theirs.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'mine',
        namespace: 'apps',
        rules: [{ host: 'mine.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled('mine.test', '/', (res) => serverOf(res) === 'a');
    assert.equal((await get('theirs.test', '/')).status, 404);
  });

  it('auth-url, auth-signin and auth-response-headers: forward auth as ingress-nginx does it', {
    skip:
      nonLoopbackAddress() === null
        ? 'no address but loopback, which an Ingress auth-url may not name'
        : false,
  }, async () => {
    api.apply(
      ingress({
        name: 'sso',
        namespace: 'apps',
        annotations: {
          'nginx.ingress.kubernetes.io/auth-url': `${oauth2.origin}/oauth2/auth`,
          'nginx.ingress.kubernetes.io/auth-signin': 'https://sso.example.com/oauth2/start',
          'nginx.ingress.kubernetes.io/auth-response-headers': 'X-Auth-Request-User, X-Auth-Request-Email',
        },
        rules: [{ host: 'sso.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled('sso.test', '/page?x=1', (res) => res.status === 302);
    const signin = new URL(String((await get('sso.test', '/page?x=1')).headers.location));
    assert.equal(signin.origin + signin.pathname, 'https://sso.example.com/oauth2/start');
    assert.equal(signin.searchParams.get('rd'), 'http://sso.test/page?x=1');
    const spoofed = { cookie: OAUTH2_PROXY_COOKIE, 'x-auth-request-user': 'mallory' };
    const ok = await get('sso.test', '/page', spoofed);
    assert.equal(serverOf(ok), 'a');
    const seen = ok.json<{ headers: Record<string, string> }>().headers;
    assert.equal(seen['x-auth-request-user'], 'alice', "the auth service's answer, never the client's copy");
    assert.equal(seen['x-auth-request-email'], 'alice@example.com');
  });

  it('limit-rps, force-ssl-redirect, affinity and header rules behave as their upstreams.yaml counterparts', async () => {
    api.apply(
      ingress({
        name: 'traffic',
        namespace: 'apps',
        annotations: {
          'nginx.ingress.kubernetes.io/limit-rps': '1',
          'nginx.ingress.kubernetes.io/affinity': 'cookie',
          'tollgate.io/request-headers': '{"set": {"X-Team": "payments"}, "remove": ["X-Debug"]}',
          'tollgate.io/response-headers': '{"add": {"X-Served-By": "tollgate-ingress"}}',
        },
        rules: [{ host: 'traffic.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'secure',
        namespace: 'apps',
        annotations: { 'nginx.ingress.kubernetes.io/force-ssl-redirect': 'true' },
        rules: [{ host: 'secure.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled('secure.test', '/a?b=c', (res) => res.status === 301);
    assert.equal((await get('secure.test', '/a?b=c')).headers.location, 'https://secure.test/a?b=c');

    await settled('traffic.test', '/', (res) => res.status === 200 || res.status === 429);
    const answers: SimpleResponse[] = [];
    for (let i = 0; i < 4; i++) answers.push(await get('traffic.test', '/', { 'x-debug': '1' }));
    assert.ok(
      answers.some((res) => res.status === 429),
      'a budget of 1 per second refuses a burst',
    );
    const served = answers.find((res) => res.status === 200) ?? (await waitForOk());
    assert.match(String(served.headers['set-cookie']), /tollgate_sticky=/);
    assert.equal(served.headers['x-served-by'], 'tollgate-ingress');
    const upstreamSaw = served.json<{ headers: Record<string, string> }>().headers;
    assert.equal(upstreamSaw['x-team'], 'payments');
    assert.equal(upstreamSaw['x-debug'], undefined);

    async function waitForOk(): Promise<SimpleResponse> {
      let ok: SimpleResponse | null = null;
      await waitFor(async () => {
        const res = await get('traffic.test', '/', { 'x-debug': '1' });
        if (res.status === 200) ok = res;
        return ok !== null;
      }, 5_000);
      return ok as unknown as SimpleResponse;
    }
  });

  it('auth-type jwt, auth-map Secrets, tollgate.io/sticky-sessions and to-https', async () => {
    api.apply(secret({ name: 'map', namespace: 'apps', data: { carol: bcryptOf('carols-password') } }));
    api.apply(
      ingress({
        name: 'more',
        namespace: 'apps',
        annotations: { 'tollgate.io/auth-type': 'jwt', 'tollgate.io/sticky-sessions': '3600' },
        rules: [{ host: 'jwt.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    api.apply(
      ingress({
        name: 'mapped',
        namespace: 'apps',
        annotations: {
          'nginx.ingress.kubernetes.io/auth-type': 'basic',
          'nginx.ingress.kubernetes.io/auth-secret': 'map',
          'nginx.ingress.kubernetes.io/auth-secret-type': 'auth-map',
          'tollgate.io/to-https': 'true',
        },
        rules: [{ host: 'map.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    await settled('jwt.test', '/', (res) => res.status === 401);
    assert.match(String((await get('jwt.test', '/')).headers['www-authenticate']), /^Bearer/);
    const { token } = await mintToken(tollgate.apiUrl, {
      master_key: 'ingress-test-masterkey',
      owner: 'ci',
      valid: 5,
    });
    const ok = await get('jwt.test', '/', { authorization: `Bearer ${token}` });
    assert.equal(serverOf(ok), 'a');
    assert.match(String(ok.headers['set-cookie']), /tollgate_sticky=[^;]+;.*Max-Age=3600/i);

    await settled('map.test', '/x', (res) => res.status === 301);
    assert.equal((await get('map.test', '/x')).headers.location, 'https://map.test/x');
    const secure = {
      'x-forwarded-proto': 'https',
      authorization: `Basic ${Buffer.from('carol:carols-password').toString('base64')}`,
    };
    // Behind a trusted proxy that terminated TLS the redirect is skipped and the auth-map user accepted.
    assert.equal(serverOf(await get('map.test', '/x', secure)), 'a');
    const wrong = `Basic ${Buffer.from('carol:wrong').toString('base64')}`;
    assert.equal((await get('map.test', '/x', { ...secure, authorization: wrong })).status, 401);
  });

  it('an IngressClass made the default later brings Ingresses without a class in, within 1 s', async () => {
    api.apply(
      ingress({
        name: 'classless',
        namespace: 'apps',
        className: null,
        rules: [{ host: 'classless.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    assert.equal((await get('classless.test', '/')).status, 404);
    api.apply(ingressClass({ isDefault: true }));
    await liveWithin('classless.test', '/', (res) => serverOf(res) === 'a');
    api.apply(ingressClass());
    await liveWithin('classless.test', '/', (res) => res.status === 404);
  });
});
