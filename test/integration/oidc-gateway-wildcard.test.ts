/**
 * A Gateway-only setup logging people in on a wildcard host (docs/gateway-api.md,
 * docs/authentication.md#openid-connect): upstreams.yaml is `upstreams: {}` (no placeholder host),
 * and the login callback works on every host a `*.wild.test` route serves, even when only one rule
 * of the route logs people in, and never reaches an upstream.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { CookieJar } from '../helpers/cookie-jar.ts';
import {
  gatewayClassObject,
  gatewayObject,
  httpRouteObject,
  namespaceObject,
  tollgatePolicyObject,
} from '../helpers/fake-gateway-api.ts';
import { endpointSlice, type FakeKubeApi, service, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.ts';
import { testScope } from '../helpers/scope.ts';
import { freePort, request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Echo, Upstream } from '../helpers/upstream.ts';

const NS = 'apps';
const SETTLE_MS = 15_000;

describe('OpenID login on a Gateway API wildcard host, with upstreams: {}', () => {
  const scope = testScope();
  let provider: TestProvider;
  let upstream: Upstream;
  let api: FakeKubeApi;
  let tollgate: Tollgate;
  let port: number;

  before(async () => {
    port = await freePort();
    provider = scope.keep(
      await startTestProvider({
        redirectUris: ['a', 'b'].map((name) => `http://${name}.wild.test:${port}/.tollgate/oidc/callback`),
      }),
    );
    upstream = await scope.upstream({ name: 'web' });
    api = scope.keep(await startFakeKubeApi());
    api.applyRaw(namespaceObject(NS));
    api.applyRaw(gatewayClassObject());
    api.applyRaw(
      gatewayObject({ name: 'gw', namespace: NS, listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] }),
    );
    api.apply(
      service({ name: 'web', namespace: NS, ports: [{ name: 'http', port: 80, targetPort: upstream.port }] }),
    );
    api.apply(
      endpointSlice({
        service: 'web',
        namespace: NS,
        ports: [{ name: 'http', port: upstream.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    const backendRefs = [{ name: 'web', port: 80 }];
    // Only /app logs people in; / is open: the callback must still go to the login, not to /.
    api.applyRaw(
      httpRouteObject({
        name: 'web',
        namespace: NS,
        parentRefs: [{ name: 'gw' }],
        hostnames: ['*.wild.test'],
        rules: [
          { name: 'app', matches: [{ path: { type: 'PathPrefix', value: '/app' } }], backendRefs },
          { name: 'public', backendRefs },
        ],
      }),
    );
    api.applyRaw(
      httpRouteObject({
        name: 'open',
        namespace: NS,
        parentRefs: [{ name: 'gw' }],
        hostnames: ['open.test'],
        rules: [{ name: 'all', backendRefs }],
      }),
    );
    api.applyRaw(
      tollgatePolicyObject({
        name: 'sso',
        namespace: NS,
        spec: {
          targetRefs: [
            { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web', sectionName: 'app' },
          ],
          authorization: { type: 'oidc', provider: 'corp' },
        },
      }),
    );
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-oidc-wildcard-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    await writeFile(join(dir, 'client-secret'), `${provider.clientSecret}\n`);
    await writeFile(join(dir, 'session-secrets'), 'a-session-secret-of-at-least-thirty-two-bytes\n');
    tollgate = await scope.tollgate({
      main: {
        proxy_address_http: `127.0.0.1:${port}`,
        oidc_providers: {
          corp: {
            issuer: provider.issuer,
            client_id: provider.clientId,
            client_secret_file: join(dir, 'client-secret'),
          },
        },
        session_secret_file: join(dir, 'session-secrets'),
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, NS), gateway_class: 'tollgate' },
      },
      // A Gateway-only setup: no placeholder host.
      upstreams: 'upstreams: {}\n',
      env: { KUBECONFIG: '' },
    });
    await waitFor(
      async () =>
        (await request(`${tollgate.proxyUrl}/`, { headers: { host: 'x.wild.test' } })).status === 200,
      SETTLE_MS,
    );
    await waitFor(
      async () =>
        (await request(`${tollgate.proxyUrl}/app`, { headers: { host: 'x.wild.test' } })).status === 401,
      SETTLE_MS,
    );
  });

  const sawLoginPath = () => upstream.requests.some((seen) => seen.url.startsWith('/.tollgate/'));

  it('logs in on a host the wildcard covers: the callback is answered, never forwarded', async () => {
    for (const name of ['a', 'b']) {
      provider.account = { sub: `user-${name}`, email: `${name}@example.com`, groups: [] };
      const host = `${name}.wild.test`;
      const jar = new CookieJar([host]);
      const origin = `http://${host}:${port}`;
      const { hops, last } = await jar.navigate(`${origin}/app/page?x=1`);
      const callback = hops.find((hop) => hop.url.startsWith(`${origin}/.tollgate/oidc/callback?`));
      assert.ok(callback, JSON.stringify(hops));
      assert.equal(callback.status, 303, JSON.stringify(hops));
      assert.equal(callback.location, '/app/page?x=1');
      assert.equal(last.status, 200);
      const echo = (await last.json()) as Echo;
      assert.equal(echo.url, '/app/page?x=1');
      assert.equal(echo.headers['x-tollgate-subject'], `user-${name}`);
    }
    assert.equal(sawLoginPath(), false, 'no login path reached the upstream');
  });

  it('a login path on a host with no oidc route is 404, never forwarded', async () => {
    for (const path of ['/.tollgate/oidc/callback?code=c0de&state=s7ate', '/.tollgate/oidc/logout']) {
      const res = await request(`${tollgate.proxyUrl}${path}`, { headers: { host: 'open.test' } });
      assert.equal(res.status, 404, path);
    }
    // Other paths of the login space on an oidc host are not forwarded either.
    const other = await request(`${tollgate.proxyUrl}/.tollgate/oidc/callbacks?code=c0de`, {
      headers: { host: 'a.wild.test' },
    });
    assert.equal(other.status, 404);
    assert.equal(sawLoginPath(), false);
    assert.equal((await request(`${tollgate.proxyUrl}/`, { headers: { host: 'open.test' } })).status, 200);
  });
});
