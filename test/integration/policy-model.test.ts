/**
 * One policy model (docs/architecture.md) through the built process against the fake API server: an
 * Ingress's auth annotations and a TollgatePolicy's spec.authorization are read by upstreams.yaml's
 * own reader, so an Ingress's OpenID provider is checked against main.yaml's oidc_providers, and a
 * policy's `allow` sits inside `authorization` (the spelling beside it still read, with a warning).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';
import {
  gatewayClassObject,
  gatewayObject,
  httpRouteObject,
  namespaceObject,
  tollgatePolicyObject,
} from '../helpers/fake-gateway-api.ts';
import { type FakeKubeApi, ingress, secret, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { applyBackendService, startGatewayTollgate } from '../helpers/gateway-conformance.ts';
import { request, type SimpleResponse, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const NS = 'apps';
const SETTLE_MS = 10_000;
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('one policy model through the built process', () => {
  let upstream: Upstream;
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;

  const get = (host: string, path = '/', headers: Record<string, string> = {}) =>
    request(`${tollgate.proxyUrl}${path}`, { headers: { host, ...headers } });
  const expectStatus = async (
    host: string,
    status: number,
    headers: Record<string, string> = {},
    error?: string,
  ) => {
    let last: SimpleResponse | null = null;
    try {
      await waitFor(async () => {
        last = await get(host, '/', headers);
        return last.status === status && (error === undefined || last.json().error === error);
      }, SETTLE_MS);
    } catch {
      const seen = last as SimpleResponse | null;
      assert.fail(`${host}: expected ${status}, got ${seen?.status} ${seen?.body}`);
    }
    return last as unknown as SimpleResponse;
  };
  const accepted = (name: string) =>
    (
      (api.get('tollgatepolicies', NS, name)?.status as { conditions?: never[] } | undefined)?.conditions ??
      ([] as Array<{ type: string; status: string; message: string }>)
    ).find((condition: { type: string }) => condition.type === 'Accepted') as
      | { status: string; message: string }
      | undefined;

  before(async () => {
    upstream = await startUpstream({ name: 'web' });
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(NS));
    api.applyRaw(gatewayClassObject());
    api.applyRaw(
      gatewayObject({ name: 'gw', namespace: NS, listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] }),
    );
    applyBackendService(api, { name: 'web', namespace: NS, port: upstream.port, servicePort: 80 });
    api.apply(secret({ name: 'users', namespace: NS, data: { auth: `alice:${bcryptOf('wonderland')}\n` } }));
    dir = await mkdtemp(join(tmpdir(), 'tollgate-policy-model-'));
    // An OpenID provider that never answers: a route naming it is unavailable (503), never open.
    await writeFile(join(dir, 'client-secret'), 'a-client-secret\n');
    await writeFile(join(dir, 'session-secrets'), 'a-session-secret-of-at-least-thirty-two-bytes-long\n');
    tollgate = await startGatewayTollgate(api, {
      dir,
      namespace: NS,
      main: {
        oidc_providers: {
          corp: {
            issuer: 'http://127.0.0.1:1',
            client_id: 'tollgate',
            client_secret_file: join(dir, 'client-secret'),
          },
        },
        session_secret_file: join(dir, 'session-secrets'),
      },
      kubernetes: { ingress_class: 'tollgate' },
      upstreams: { 'file.test': { paths: { '/': { servers: [upstream.address] } } } },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("an Ingress's auth-oidc-provider must be one of main.yaml's oidc_providers: else closed (503) and reported", async () => {
    const oidcIngress = (provider: string) =>
      ingress({
        name: 'sso',
        namespace: NS,
        annotations: { 'tollgate.io/auth-type': 'oidc', 'tollgate.io/auth-oidc-provider': provider },
        rules: [{ host: 'sso.test', paths: [{ service: 'web', port: 80 }] }],
      });
    api.apply(oidcIngress('nobody'));
    await expectStatus('sso.test', 503, {}, 'auth_misconfigured');
    await waitFor(() =>
      api.events.some(
        (event) =>
          event.involvedObject.name === 'sso' &&
          event.type === 'Warning' &&
          /auth-oidc-provider unknown OpenID provider 'nobody' \(main\.yaml defines corp\)/.test(
            event.message ?? '',
          ),
      ),
    );
    // A provider main.yaml defines is honoured: this one never answers, so the path is unavailable.
    api.apply(oidcIngress('corp'));
    let served: SimpleResponse | null = null;
    await waitFor(async () => {
      served = await get('sso.test');
      return served.status !== 503 || served.json().error !== 'auth_misconfigured';
    }, SETTLE_MS);
    assert.notEqual((served as SimpleResponse | null)?.status, 200);
    api.delete('ingresses', NS, 'sso');
  });

  it("a TollgatePolicy's allow sits inside authorization; spec.allow beside it works with a warning naming that place", async () => {
    api.applyRaw(
      httpRouteObject({
        name: 'web',
        namespace: NS,
        parentRefs: [{ name: 'gw' }],
        hostnames: ['web.test'],
        rules: [{ backendRefs: [{ name: 'web', port: 80 }] }],
      }),
    );
    await expectStatus('web.test', 200);
    const targetRefs = [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' }];
    const authorization = { type: 'basic', basic: { secretRef: { name: 'users' } } };
    api.applyRaw(
      tollgatePolicyObject({
        name: 'only-bob',
        namespace: NS,
        spec: { targetRefs, authorization: { ...authorization, allow: { subjects: ['bob'] } } },
      }),
    );
    await expectStatus('web.test', 403, { authorization: basic('alice', 'wonderland') }, 'forbidden');
    await waitFor(() => accepted('only-bob')?.status === 'True', SETTLE_MS);
    assert.doesNotMatch(accepted('only-bob')?.message ?? '', /warning/);

    // The other spelling: the same rule in force, Accepted, with a warning in the condition, an Event and the log.
    api.applyRaw(
      tollgatePolicyObject({
        name: 'only-bob',
        namespace: NS,
        spec: { targetRefs, authorization, allow: { subjects: ['alice'] } },
      }),
    );
    await expectStatus('web.test', 200, { authorization: basic('alice', 'wonderland') });
    await waitFor(() => /spec\.authorization\.allow/.test(accepted('only-bob')?.message ?? ''), SETTLE_MS);
    assert.equal(accepted('only-bob')?.status, 'True');
    await waitFor(() =>
      api.events.some(
        (event) =>
          event.involvedObject.name === 'only-bob' &&
          event.type === 'Warning' &&
          event.reason === 'PolicyWarning' &&
          /spec\.allow belongs in spec\.authorization\.allow/.test(event.message ?? ''),
      ),
    );
    assert.ok(tollgate.logs().some((line) => line.msg === 'tollgate policy applied with a warning'));
    assert.equal((await get('web.test', '/', { authorization: basic('mallory', 'x') })).status, 401);
  });
});
