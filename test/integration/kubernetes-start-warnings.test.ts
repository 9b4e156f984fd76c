/**
 * Warnings about objects (`Service … does not exist`, `Secret … does not exist`, and what follows
 * from them, such as `allow needs an authorization in the same policy`) are raised only once the
 * watches that would find them have synced (docs/kubernetes.md#watches), through the built process:
 * everything exists before start, the Secret and Service lists answer late (a slow API server), and
 * no such warning appears; a Service that truly does not exist is still reported.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';
import {
  gatewayClassObject,
  gatewayObject,
  httpRouteObject,
  namespaceObject,
  tollgatePolicyObject,
} from '../helpers/fake-gateway-api.ts';
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
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { PROCESS_START_MS } from '../helpers/workers.ts';

const NS = 'apps';
/** Objects of each source, each with its own Secret: as many Secret lists answering together. */
const COUNT = 8;
const SETTLE_MS = 10_000;
/** What is said about an object that is missing, or about a policy whose credentials were missing. */
const MISSING = /does not exist|allow needs an authorization/;

describe('warnings about objects wait for the watches that would find them (built process, fake API)', () => {
  const scope = testScope();
  let api: FakeKubeApi;
  let tollgate: Tollgate;

  const status = async (host: string) =>
    (await request(`${tollgate.proxyUrl}/`, { headers: { host } })).status;
  const falseWarnings = () => ({
    events: api.events.filter((event) => event.type === 'Warning' && MISSING.test(event.message)),
    logs: tollgate.logs().filter((line) => MISSING.test(JSON.stringify(line))),
  });

  before(async () => {
    const web = await scope.upstream({ name: 'web' });
    api = scope.keep(await startFakeKubeApi());
    api.applyRaw(namespaceObject(NS));
    api.applyRaw(gatewayClassObject());
    api.apply(ingressClass());
    api.applyRaw(
      gatewayObject({ name: 'gw', namespace: NS, listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] }),
    );
    api.apply(
      service({ name: 'web', namespace: NS, ports: [{ name: 'http', port: 80, targetPort: web.port }] }),
    );
    api.apply(
      endpointSlice({
        service: 'web',
        namespace: NS,
        ports: [{ name: 'http', port: web.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    const users = `alice:${bcryptOf('wonderland')}\n`;
    for (let i = 0; i < COUNT; i += 1) {
      api.apply(secret({ name: `route-users-${i}`, namespace: NS, data: { auth: users } }));
      api.applyRaw(
        httpRouteObject({
          name: `route-${i}`,
          namespace: NS,
          parentRefs: [{ name: 'gw' }],
          hostnames: [`r${i}.test`],
          rules: [{ name: 'all', backendRefs: [{ name: 'web', port: 80 }] }],
        }),
      );
      api.applyRaw(
        tollgatePolicyObject({
          name: `policy-${i}`,
          namespace: NS,
          spec: {
            targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: `route-${i}` }],
            authorization: { type: 'basic', basic: { secretRef: { name: `route-users-${i}` } } },
            allow: { subjects: ['alice'] },
          },
        }),
      );
      api.apply(secret({ name: `ingress-users-${i}`, namespace: NS, data: { auth: users } }));
      api.apply(
        ingress({
          name: `ingress-${i}`,
          namespace: NS,
          annotations: {
            'nginx.ingress.kubernetes.io/auth-type': 'basic',
            'nginx.ingress.kubernetes.io/auth-secret': `ingress-users-${i}`,
          },
          rules: [{ host: `i${i}.test`, paths: [{ service: 'web', port: 80 }] }],
        }),
      );
    }
    // A slow API server: the Secrets and Services come back after everything else.
    api.delayLists('secrets', 300);
    api.delayLists('services', 300);
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-start-warnings-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    tollgate = await scope.tollgate({
      main: {
        access_log: false,
        kubernetes: {
          kubeconfig: api.writeKubeconfig(dir, NS),
          ingress_class: 'tollgate',
          gateway_class: 'tollgate',
        },
      },
      upstreams: { upstreams: { 'file.test': { paths: { '/': { servers: [web.address] } } } } },
      env: { KUBECONFIG: '' },
      readyTimeoutMs: PROCESS_START_MS,
    });
  });

  it('everything present at start: every route asks for its credentials, and no object is called missing', async () => {
    for (let i = 0; i < COUNT; i += 1) {
      await waitFor(async () => (await status(`r${i}.test`)) === 401, SETTLE_MS);
      await waitFor(async () => (await status(`i${i}.test`)) === 401, SETTLE_MS);
    }
    assert.deepEqual(falseWarnings(), { events: [], logs: [] });
  });

  it('a Service that truly does not exist is still reported, by the Ingress and by the route naming it', async () => {
    api.apply(
      ingress({
        name: 'no-service',
        namespace: NS,
        rules: [{ host: 'missing.test', paths: [{ service: 'nope', port: 80 }] }],
      }),
    );
    api.applyRaw(
      httpRouteObject({
        name: 'no-service',
        namespace: NS,
        parentRefs: [{ name: 'gw' }],
        hostnames: ['missing-route.test'],
        rules: [{ backendRefs: [{ name: 'nope', port: 80 }] }],
      }),
    );
    const reported = (kind: string) =>
      api.events.find(
        (event: RecordedEvent) =>
          event.involvedObject.kind === kind &&
          event.involvedObject.name === 'no-service' &&
          event.type === 'Warning' &&
          /Service apps\/nope does not exist/.test(event.message),
      );
    await api.waitFor(() => reported('Ingress') !== undefined, 'the Ingress reported', SETTLE_MS);
    await api.waitFor(() => reported('HTTPRoute') !== undefined, 'the HTTPRoute reported', SETTLE_MS);
    // And only they: nothing else is called missing.
    assert.deepEqual(
      [...new Set(falseWarnings().events.map((event) => event.involvedObject.name))],
      ['no-service'],
    );
  });
});
