/**
 * TollgatePolicy (docs/gateway-api.md#tollgatepolicy) through the built process against the fake
 * API server: authentication attached to Gateways, routes and rules by targetRefs, the most specific
 * target winning, and a policy that cannot be built closing its paths (503), never opening them.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
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
import { allow, deny, startExtAuthzServer } from '../helpers/ext-authz-server.ts';
import {
  gatewayClassObject,
  gatewayObject,
  hasCondition,
  httpRouteObject,
  namespaceObject,
  tollgatePolicyObject,
} from '../helpers/fake-gateway-api.ts';
import {
  type FakeKubeApi,
  type ResourceKind,
  type StoredObject,
  secret,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { applyBackendService, startGatewayTollgate } from '../helpers/gateway-conformance.ts';
import { mintToken } from '../helpers/token-api.ts';
import { request, type SimpleResponse, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const NS = 'apps';
const SETTLE_MS = 10_000;
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('TollgatePolicy through the built process', () => {
  let upstream: Upstream;
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let oauth2: AuthService;

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
  const policyConditions = (name: string) =>
    ((api.get('tollgatepolicies', NS, name)?.status as { conditions?: never[] } | undefined)?.conditions ??
      []) as Array<{
      type: string;
      status: string;
      reason: string;
    }>;
  const policyStatus = async (name: string, status: 'True' | 'False', reason: string) => {
    try {
      await api.waitFor(
        () => hasCondition(policyConditions(name), 'Accepted', status, reason),
        `policy ${name}`,
        SETTLE_MS,
      );
    } catch {
      assert.fail(`policy ${name}: ${JSON.stringify(policyConditions(name))}`);
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
    await waitFor(async () => (await get('web.test', '/')).status === 404, SETTLE_MS);
  };
  /** A route `web` on web.test with rules `admin` (/admin) and `public` (/). */
  const webRoute = () =>
    httpRouteObject({
      name: 'web',
      namespace: NS,
      parentRefs: [{ name: 'gw' }],
      hostnames: ['web.test'],
      rules: [
        {
          name: 'admin',
          matches: [{ path: { type: 'PathPrefix', value: '/admin' } }],
          backendRefs: [{ name: 'web', port: 80 }],
        },
        { name: 'public', backendRefs: [{ name: 'web', port: 80 }] },
      ],
    });
  const policy = (name: string, spec: Record<string, unknown>) =>
    tollgatePolicyObject({ name, namespace: NS, spec });
  const routeTarget = (sectionName?: string) => ({
    group: 'gateway.networking.k8s.io',
    kind: 'HTTPRoute',
    name: 'web',
    ...(sectionName ? { sectionName } : {}),
  });

  before(async () => {
    upstream = await startUpstream({ name: 'web' });
    oauth2 = await startOauth2Proxy(nonLoopbackAddress() ?? '127.0.0.1');
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(NS));
    api.applyRaw(gatewayClassObject());
    api.applyRaw(
      gatewayObject({ name: 'gw', namespace: NS, listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] }),
    );
    applyBackendService(api, { name: 'web', namespace: NS, port: upstream.port, servicePort: 80 });
    api.apply(secret({ name: 'users', namespace: NS, data: { auth: `alice:${bcryptOf('wonderland')}\n` } }));
    api.apply(secret({ name: 'keys', namespace: NS, data: { keys: 'ci:key-of-ci\n' } }));
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-policy-'));
    // An OpenID provider that never answers: its routes must stay closed (503), never open.
    await writeFile(join(dir, 'client-secret'), 'a-client-secret\n');
    await writeFile(join(dir, 'session-secrets'), 'a-session-secret-of-at-least-thirty-two-bytes-long\n');
    tollgate = await startGatewayTollgate(api, {
      dir,
      namespace: NS,
      main: {
        // Two workers: the primary translates, every worker serves the same routes and policies.
        workers: 2,
        masterkey: 'gateway-policy-masterkey',
        oidc_providers: {
          corp: {
            issuer: 'http://127.0.0.1:1',
            client_id: 'tollgate',
            client_secret_file: join(dir, 'client-secret'),
          },
        },
        session_secret_file: join(dir, 'session-secrets'),
      },
      upstreams: { 'file.test': { paths: { '/': { servers: [upstream.address] } } } },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await oauth2?.close();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('basic on a route: 401 without credentials, 200 with them; the credentials never reach the upstream', async () => {
    apply('httproutes', webRoute());
    await expectStatus('web.test', '/', 200);
    apply(
      'tollgatepolicies',
      policy('web-auth', {
        targetRefs: [routeTarget()],
        authorization: { type: 'basic', basic: { secretRef: { name: 'users' } } },
      }),
    );
    const refused = await expectStatus('web.test', '/', 401);
    assert.match(String(refused.headers['www-authenticate']), /^Basic realm="tollgate"/);
    assert.equal((await get('web.test', '/', { authorization: basic('alice', 'nope') })).status, 401);
    const ok = await get('web.test', '/admin/x', { authorization: basic('alice', 'wonderland') });
    assert.equal(ok.status, 200);
    const seen = ok.json<{ headers: Record<string, string> }>().headers;
    assert.equal(seen.authorization, undefined);
    assert.equal(seen['x-tollgate-subject'], 'alice');
    await policyStatus('web-auth', 'True', 'Accepted');
    await cleanUp();
  });

  it('the most specific target wins: a rule policy (sectionName) over a Gateway policy', async () => {
    apply('httproutes', webRoute());
    await expectStatus('web.test', '/', 200);
    apply(
      'tollgatepolicies',
      policy('gateway-keys', {
        targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'gw' }],
        authorization: { type: 'apikey', apikey: { secretRef: { name: 'keys' } } },
      }),
    );
    apply(
      'tollgatepolicies',
      policy('admin-users', {
        targetRefs: [routeTarget('admin')],
        authorization: { type: 'basic', basic: { secretRef: { name: 'users' } } },
      }),
    );
    await expectStatus('web.test', '/', 401);
    assert.equal((await get('web.test', '/', { 'x-api-key': 'key-of-ci' })).status, 200);
    await expectStatus('web.test', '/admin', 401, { 'x-api-key': 'key-of-ci' });
    assert.equal(
      (await get('web.test', '/admin', { authorization: basic('alice', 'wonderland') })).status,
      200,
    );
    await policyStatus('gateway-keys', 'True', 'Accepted');
    await policyStatus('admin-users', 'True', 'Accepted');
    await cleanUp();
  });

  it('a policy that cannot be built closes its paths with 503 auth_misconfigured, live until its Secret appears', async () => {
    apply('httproutes', webRoute());
    await expectStatus('web.test', '/', 200);
    apply(
      'tollgatepolicies',
      policy('later', {
        targetRefs: [routeTarget()],
        authorization: { type: 'basic', basic: { secretRef: { name: 'not-yet' } } },
      }),
    );
    await expectStatus('web.test', '/', 503, {}, 'auth_misconfigured');
    await policyStatus('later', 'False', 'Invalid');
    await api.waitFor(
      () =>
        api.events.some(
          (event) => event.involvedObject.kind === 'TollgatePolicy' && event.involvedObject.name === 'later',
        ),
      'an Event on the policy',
      SETTLE_MS,
    );
    api.apply(secret({ name: 'not-yet', namespace: NS, data: { auth: `bob:${bcryptOf('builder')}\n` } }));
    applied.push(['secrets', 'not-yet']);
    await expectStatus('web.test', '/', 401);
    assert.equal((await get('web.test', '/', { authorization: basic('bob', 'builder') })).status, 200);
    await cleanUp();
  });

  it('a misspelt key never serves the paths open: 503, and the policy says why', async () => {
    apply('httproutes', webRoute());
    await expectStatus('web.test', '/', 200);
    apply(
      'tollgatepolicies',
      policy('typo', {
        targetRefs: [routeTarget()],
        authorisation: { type: 'basic', basic: { secretRef: { name: 'users' } } },
      }),
    );
    await expectStatus('web.test', '/', 503, {}, 'auth_misconfigured');
    await policyStatus('typo', 'False', 'Invalid');
    // targetRefs that are not a list (no CRD schema stopped it): Invalid, and nothing else disturbed.
    apply(
      'tollgatepolicies',
      policy('shapeless', { targetRefs: { kind: 'HTTPRoute', name: 'web' }, rate_limit: 1 }),
    );
    await policyStatus('shapeless', 'False', 'Invalid');
    await policyStatus('typo', 'False', 'Invalid');
    await cleanUp();
  });

  it('a policy targeting nothing is TargetNotFound; a second policy on the same target is Conflicted and the older one holds', async () => {
    apply('httproutes', webRoute());
    await expectStatus('web.test', '/', 200);
    apply(
      'tollgatepolicies',
      policy('nowhere', {
        targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'no-such-route' }],
        authorization: { type: 'jwt' },
      }),
    );
    await policyStatus('nowhere', 'False', 'TargetNotFound');
    apply(
      'tollgatepolicies',
      policy('first', {
        targetRefs: [routeTarget()],
        authorization: { type: 'apikey', apikey: { secretRef: { name: 'keys' } } },
      }),
    );
    await expectStatus('web.test', '/', 401);
    apply(
      'tollgatepolicies',
      policy('second', {
        targetRefs: [routeTarget()],
        authorization: { type: 'basic', basic: { secretRef: { name: 'users' } } },
      }),
    );
    await policyStatus('second', 'False', 'Conflicted');
    assert.equal((await get('web.test', '/', { 'x-api-key': 'key-of-ci' })).status, 200);
    await cleanUp();
  });

  it('jwt: Tollgate tokens; forward: the auth service decides; rate_limit and source_ranges as in upstreams.yaml', async () => {
    apply('httproutes', webRoute());
    await expectStatus('web.test', '/', 200);
    apply(
      'tollgatepolicies',
      policy('tokens', { targetRefs: [routeTarget('admin')], authorization: { type: 'jwt' } }),
    );
    apply(
      'tollgatepolicies',
      policy('sso', {
        targetRefs: [routeTarget('public')],
        authorization: {
          type: 'forward',
          url: `${oauth2.origin}/oauth2/auth`,
          auth_response_headers: ['X-Auth-Request-User'],
        },
      }),
    );
    await expectStatus('web.test', '/admin', 401);
    const { token } = await mintToken(tollgate.apiUrl, {
      master_key: 'gateway-policy-masterkey',
      owner: 'carol',
      valid: 5,
    });
    assert.equal((await get('web.test', '/admin', { authorization: `Bearer ${token}` })).status, 200);
    await expectStatus('web.test', '/', 401);
    const passed = await get('web.test', '/', { cookie: OAUTH2_PROXY_COOKIE });
    assert.equal(passed.status, 200);
    // A route's policy may not aim its auth requests at loopback (docs/security.md): closed.
    apply(
      'tollgatepolicies',
      policy('sso', {
        targetRefs: [routeTarget('public')],
        authorization: { type: 'forward', url: 'http://127.0.0.1:4180/oauth2/auth' },
      }),
    );
    await expectStatus('web.test', '/', 503, { cookie: OAUTH2_PROXY_COOKIE }, 'auth_misconfigured');
    apply(
      'tollgatepolicies',
      policy('sso', { targetRefs: [routeTarget('public')], source_ranges: ['10.0.0.0/8'] }),
    );
    await expectStatus('web.test', '/', 403);
    apply('tollgatepolicies', policy('sso', { targetRefs: [routeTarget('public')], rate_limit: 1 }));
    await expectStatus('web.test', '/', 200);
    let limited = false;
    for (let i = 0; i < 5 && !limited; i++) limited = (await get('web.test', '/')).status === 429;
    assert.ok(limited, 'rate_limit 1 lets a burst of 5 through');
    await cleanUp();
  });

  it('allow narrows who passes (403 forbidden); oidc names a main.yaml provider (unknown: closed; unreachable: 503 auth_unavailable)', async () => {
    apply('httproutes', webRoute());
    await expectStatus('web.test', '/', 200);
    apply(
      'tollgatepolicies',
      policy('only-bob', {
        targetRefs: [routeTarget('admin')],
        authorization: { type: 'basic', basic: { secretRef: { name: 'users' } } },
        allow: { subjects: ['bob'] },
      }),
    );
    await expectStatus('web.test', '/admin', 401);
    await expectStatus(
      'web.test',
      '/admin',
      403,
      { authorization: basic('alice', 'wonderland') },
      'forbidden',
    );
    // basic knows only the subject: a rule on groups is refused, and the paths stay closed.
    apply(
      'tollgatepolicies',
      policy('only-bob', {
        targetRefs: [routeTarget('admin')],
        authorization: { type: 'basic', basic: { secretRef: { name: 'users' } } },
        allow: { groups: ['admins'] },
      }),
    );
    await expectStatus(
      'web.test',
      '/admin',
      503,
      { authorization: basic('alice', 'wonderland') },
      'auth_misconfigured',
    );
    await policyStatus('only-bob', 'False', 'Invalid');
    apply(
      'tollgatepolicies',
      policy('sso', {
        targetRefs: [routeTarget('public')],
        authorization: { type: 'oidc', provider: 'nobody' },
      }),
    );
    await expectStatus('web.test', '/', 503, {}, 'auth_misconfigured');
    apply(
      'tollgatepolicies',
      policy('sso', {
        targetRefs: [routeTarget('public')],
        authorization: { type: 'oidc', provider: 'corp' },
      }),
    );
    await expectStatus('web.test', '/', 503, {}, 'auth_unavailable');
    await policyStatus('sso', 'True', 'Accepted');
    await cleanUp();
  });
  it('ext_authz and client_certificate policies are read as upstreams.yaml reads them; an ext_authz on loopback is closed', {
    skip: nonLoopbackAddress() === null ? 'no non-loopback address' : false,
  }, async () => {
    const authz = await startExtAuthzServer(
      (check) => (check.attributes.request.http.path.startsWith('/admin') ? deny(403, {}, 'no') : allow()),
      { host: nonLoopbackAddress() as string },
    );
    try {
      apply('httproutes', webRoute());
      apply(
        'tollgatepolicies',
        policy('opa', {
          targetRefs: [routeTarget()],
          authorization: { type: 'ext_authz', grpc: { address: authz.address }, timeout_ms: 5000 },
        }),
      );
      await expectStatus('web.test', '/admin', 403);
      await expectStatus('web.test', '/', 200);
      assert.ok(authz.checks.length > 0);
      await policyStatus('opa', 'True', 'Accepted');
      apply(
        'tollgatepolicies',
        policy('opa', {
          targetRefs: [routeTarget()],
          authorization: { type: 'ext_authz', grpc: { address: '127.0.0.1:9191' } },
        }),
      );
      await expectStatus('web.test', '/', 503, {}, 'auth_misconfigured');
      // No TLS listener here: no connection carries a verified certificate.
      apply(
        'tollgatepolicies',
        policy('opa', {
          targetRefs: [routeTarget()],
          authorization: { type: 'client_certificate', subject_from: ['uri_san'] },
          allow: { uri_sans: ['spiffe://cluster.local/ns/payments/*'] },
        }),
      );
      await expectStatus('web.test', '/', 401, {}, 'client_certificate_required');
      await cleanUp();
    } finally {
      await authz.close();
    }
  });
});
