/**
 * The RequestMirror cases of the Gateway API conformance suite (kubernetes-sigs/gateway-api v1.6,
 * conformance/tests/httproute-request-mirror, -multiple-mirrors, -percentage-mirror) with the
 * suite's manifests as written, through the built process and the fake API server: the client gets
 * the main backend's answer while each mirror backend receives a copy (path, headers after the
 * rule's RequestHeaderModifier, Host); a mirror that refuses connections costs the client nothing;
 * a percentage holds over a bounded number of requests (docs/gateway-api.md#filters).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  gatewayClassObject,
  hasCondition,
  namespaceObject,
  routeParentConditions,
} from '../helpers/fake-gateway-api.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import {
  applyBackendService,
  CONFORMANCE_INFRA,
  manifests,
  SAME_NAMESPACE_GATEWAY,
  startGatewayTollgate,
  waitRouteAccepted,
} from '../helpers/gateway-conformance.ts';
import { type RefusedAddress, refusedAddress, request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const INFRA = CONFORMANCE_INFRA;
const SETTLE_MS = 10_000;

const HEADER_MODIFIER = `
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set:
        - name: X-Header-Set
          value: set-overwrites-values
        add:
        - name: X-Header-Add
          value: header-val-1
        - name: X-Header-Add-Append
          value: header-val-2
        remove:
        - X-Header-Remove`;
const mirror = (backend: string, extra = '') => `
    - type: RequestMirror
      requestMirror:
        backendRef:
          name: ${backend}
          namespace: gateway-conformance-infra
          port: 8080${extra}`;
const rule = (prefix: string, filters: string) => `
  - matches:
    - path:
        type: PathPrefix
        value: ${prefix}
    filters:${filters}
    backendRefs:
    - name: infra-backend-v1
      port: 8080
      namespace: gateway-conformance-infra`;
const route = (name: string, rules: string) => `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: ${name}
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: same-namespace
  rules:${rules}
`;

// conformance/tests/httproute-request-mirror.yaml
const REQUEST_MIRROR = route(
  'request-mirror',
  rule('/mirror', mirror('infra-backend-v2')) +
    rule('/mirror-and-modify-headers', HEADER_MODIFIER + mirror('infra-backend-v2')),
);
// conformance/tests/httproute-request-multiple-mirrors.yaml
const MULTIPLE_MIRRORS = route(
  'request-multiple-mirrors',
  rule('/multi-mirror', mirror('infra-backend-v2') + mirror('infra-backend-v3')) +
    rule(
      '/multi-mirror-and-modify-request-headers',
      HEADER_MODIFIER + mirror('infra-backend-v2') + mirror('infra-backend-v3'),
    ),
);
// conformance/tests/httproute-request-percentage-mirror.yaml
const PERCENTAGE_MIRROR = route(
  'request-percentage-mirror',
  rule('/percent-mirror', mirror('infra-backend-v2', '\n        percent: 20')) +
    rule(
      '/percent-mirror-fraction',
      mirror('infra-backend-v2', '\n        fraction:\n          numerator: 25\n          denominator: 50'),
    ) +
    rule(
      '/percent-mirror-and-modify-headers',
      HEADER_MODIFIER + mirror('infra-backend-v2', '\n        percent: 35'),
    ),
);
// Not the suite's: a mirror whose only server refuses connections; a mirror Service that does not exist.
const REFUSED_MIRROR = route('refused-mirror', rule('/mirror-refused', mirror('mirror-refused')));
const MISSING_MIRROR = route('missing-mirror', rule('/mirror-missing', mirror('no-such-service')));
// Not the suite's: a served route edited to mirror to a Service no route named before.
const UNMIRRORED = route('edited-mirror', rule('/mirror-edit', ''));
const EDITED_TO_MIRROR = route('edited-mirror', rule('/mirror-edit', mirror('late-mirror')));

const MODIFIED = {
  headers: { 'X-Header-Remove': 'remove-val', 'X-Header-Add-Append': 'append-val-1' },
  upstreamHeaders: {
    'x-header-add': 'header-val-1',
    'x-header-add-append': 'append-val-1,header-val-2',
    'x-header-set': 'set-overwrites-values',
  },
  absentHeaders: ['x-header-remove'],
};

/** `tollgate_mirror_requests_total{result}` as scraped now. */
function mirrorCount(metrics: string, result: string): number {
  const line = metrics
    .split('\n')
    .find((item) => item.startsWith(`tollgate_mirror_requests_total{result="${result}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

describe('Gateway API RequestMirror cases with the suite’s manifests, through the built process', () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let refused: RefusedAddress;

  const serviceFor = (name: string, port: number) =>
    applyBackendService(api, { name, namespace: INFRA, port });
  const accepted = (name: string) =>
    waitRouteAccepted(api, {
      namespace: INFRA,
      route: name,
      gateway: 'same-namespace',
      timeoutMs: SETTLE_MS,
    });
  const received = (backend: string, path: string) =>
    (upstreams.get(backend) as Upstream).requests.filter((item) => item.url === path);

  /**
   * One request of the suite's table, with a request id of its own (AddRequestIDQueryParam): the
   * client gets infra-backend-v1's answer, and each of `mirrors` receives the same path and headers.
   */
  const expectMirrored = async (
    prefix: string,
    mirrors: readonly string[],
    modified: boolean,
  ): Promise<void> => {
    const path = `${prefix}?X-Echo-Request-Id=${Math.random().toString(36).slice(2)}`;
    let last = '';
    await waitFor(async () => {
      const res = await request(`${tollgate.proxyUrl}${path}`, {
        headers: { host: 'example.test', ...(modified ? MODIFIED.headers : {}) },
      });
      last = `status ${res.status} ${res.body}`;
      return res.status === 200 && res.json<{ server: string }>().server === 'infra-backend-v1';
    }, SETTLE_MS).catch(() => assert.fail(`${path}: expected infra-backend-v1, got ${last}`));
    for (const backend of mirrors) {
      await waitFor(() => received(backend, path).length > 0, SETTLE_MS).catch(() =>
        assert.fail(`${backend} received no copy of ${path}`),
      );
      const copy = received(backend, path)[0];
      assert.equal(copy?.method, 'GET');
      assert.equal(copy?.headers.host, 'example.test');
      if (modified) {
        for (const [name, value] of Object.entries(MODIFIED.upstreamHeaders))
          assert.equal(String(copy?.headers[name]).replaceAll(', ', ','), value, name);
        for (const name of MODIFIED.absentHeaders) assert.equal(copy?.headers[name], undefined, name);
      }
    }
    // The main backend got exactly one request of this id: the mirror is a copy, not a retry.
    assert.equal(received('infra-backend-v1', path).length, 1);
  };

  before(async () => {
    for (const name of ['infra-backend-v1', 'infra-backend-v2', 'infra-backend-v3', 'late-mirror'])
      upstreams.set(name, await startUpstream({ name }));
    refused = await refusedAddress();
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(INFRA, { 'gateway-conformance': 'infra' }));
    api.applyRaw(gatewayClassObject());
    for (const [name, upstream] of upstreams) serviceFor(name, upstream.port);
    serviceFor('mirror-refused', refused.port);
    for (const object of manifests(SAME_NAMESPACE_GATEWAY)) api.applyRaw(object);
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-mirror-'));
    tollgate = await startGatewayTollgate(api, { dir, namespace: INFRA });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    await refused?.release();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('HTTPRouteRequestMirror: the client gets infra-backend-v1, infra-backend-v2 a copy, with the rule’s headers', async () => {
    for (const object of manifests(REQUEST_MIRROR)) api.applyRaw(object);
    await accepted('request-mirror');
    await expectMirrored('/mirror', ['infra-backend-v2'], false);
    await expectMirrored('/mirror-and-modify-headers', ['infra-backend-v2'], true);
  });

  it('HTTPRouteRequestMultipleMirrors: a copy to infra-backend-v2 and one to infra-backend-v3', async () => {
    for (const object of manifests(MULTIPLE_MIRRORS)) api.applyRaw(object);
    await accepted('request-multiple-mirrors');
    await expectMirrored('/multi-mirror', ['infra-backend-v2', 'infra-backend-v3'], false);
    await expectMirrored(
      '/multi-mirror-and-modify-request-headers',
      ['infra-backend-v2', 'infra-backend-v3'],
      true,
    );
  });

  it('HTTPRouteRequestPercentageMirror: percent 20, fraction 25/50 and percent 35 roughly hold over 200 requests each', async () => {
    for (const object of manifests(PERCENTAGE_MIRROR)) api.applyRaw(object);
    await accepted('request-percentage-mirror');
    const REQUESTS = 200;
    for (const [prefix, share, modified] of [
      ['/percent-mirror', 0.2, false],
      ['/percent-mirror-fraction', 0.5, false],
      ['/percent-mirror-and-modify-headers', 0.35, true],
    ] as const) {
      // Live once one request answers from infra-backend-v1 (its copy, if drawn, has the same id).
      const path = `${prefix}?X-Echo-Request-Id=${prefix.slice(1)}`;
      await waitFor(async () => {
        const res = await request(`${tollgate.proxyUrl}${path}`, { headers: { host: 'example.test' } });
        return res.status === 200 && res.json<{ server: string }>().server === 'infra-backend-v1';
      }, SETTLE_MS);
      const sentBefore = mirrorCount(await tollgate.metrics(), 'sent');
      const seenBefore = received('infra-backend-v2', path).length;
      for (let i = 0; i < REQUESTS; i++) {
        const res = await request(`${tollgate.proxyUrl}${path}`, {
          headers: { host: 'example.test', ...(modified ? MODIFIED.headers : {}) },
        });
        assert.equal(res.json<{ server: string }>().server, 'infra-backend-v1');
      }
      // Every copy counted as sent was received: wait until the backend saw as many as were counted.
      let copies = 0;
      await waitFor(async () => {
        const sent = mirrorCount(await tollgate.metrics(), 'sent') - sentBefore;
        copies = received('infra-backend-v2', path).length - seenBefore;
        return sent > 0 && copies === sent;
      }, SETTLE_MS);
      // Wide bounds (the expected count ± about 5 standard deviations): never a flake, yet an
      // unmirrored (0) or always-mirrored (200) route fails.
      const expected = REQUESTS * share;
      const spread = 5 * Math.sqrt(REQUESTS * share * (1 - share));
      assert.ok(
        copies >= expected - spread && copies <= expected + spread,
        `${prefix}: ${copies} copies of ${REQUESTS} requests, expected about ${expected}`,
      );
      assert.equal(received('infra-backend-v1', path).length - seenBefore >= REQUESTS, true);
    }
  });

  it('HTTPRouteRequestMirror: a mirror that refuses connections costs the client nothing', async () => {
    for (const object of manifests(REFUSED_MIRROR)) api.applyRaw(object);
    await accepted('refused-mirror');
    const failedBefore = mirrorCount(await tollgate.metrics(), 'failed');
    await waitFor(async () => {
      const res = await request(`${tollgate.proxyUrl}/mirror-refused`, { headers: { host: 'example.test' } });
      return res.status === 200 && res.json<{ server: string }>().server === 'infra-backend-v1';
    }, SETTLE_MS);
    for (let i = 0; i < 5; i++) {
      const res = await request(`${tollgate.proxyUrl}/mirror-refused/${i}`, {
        headers: { host: 'example.test' },
      });
      assert.equal(res.status, 200);
      assert.equal(res.json<{ server: string }>().server, 'infra-backend-v1');
    }
    // The copies did go out, and failed.
    await waitFor(async () => mirrorCount(await tollgate.metrics(), 'failed') >= failedBefore + 5, SETTLE_MS);
  });

  it('HTTPRouteRequestMirror: a mirror Service that does not exist is ResolvedRefs False (BackendNotFound); the rule still serves', async () => {
    for (const object of manifests(MISSING_MIRROR)) api.applyRaw(object);
    try {
      await api.waitFor(
        () => {
          const conditions = routeParentConditions(
            api.get('httproutes', INFRA, 'missing-mirror'),
            'same-namespace',
          );
          return (
            hasCondition(conditions, 'Accepted', 'True') &&
            hasCondition(conditions, 'ResolvedRefs', 'False', 'BackendNotFound')
          );
        },
        'missing-mirror ResolvedRefs False',
        SETTLE_MS,
      );
    } catch {
      assert.fail(JSON.stringify(api.get('httproutes', INFRA, 'missing-mirror')?.status));
    }
    await waitFor(async () => {
      const res = await request(`${tollgate.proxyUrl}/mirror-missing`, { headers: { host: 'example.test' } });
      return res.status === 200 && res.json<{ server: string }>().server === 'infra-backend-v1';
    }, SETTLE_MS);
  });

  it('HTTPRouteRequestMirror: a mirror added to a served route by an edit gets its copies (its Service is watched from then on)', async () => {
    for (const object of manifests(UNMIRRORED)) api.applyRaw(object);
    await accepted('edited-mirror');
    await waitFor(async () => {
      const res = await request(`${tollgate.proxyUrl}/mirror-edit`, { headers: { host: 'example.test' } });
      return res.status === 200 && res.json<{ server: string }>().server === 'infra-backend-v1';
    }, SETTLE_MS);
    // The edit names one Service more, as a mirror only: the route's own Service is the same.
    for (const object of manifests(EDITED_TO_MIRROR)) api.applyRaw(object);
    // The route answers before and after the edit alike: live once a request's copy arrives.
    await waitFor(async () => {
      const path = `/mirror-edit?live=${Math.random().toString(36).slice(2)}`;
      await request(`${tollgate.proxyUrl}${path}`, { headers: { host: 'example.test' } });
      await waitFor(() => received('late-mirror', path).length > 0, 500).catch(() => undefined);
      return received('late-mirror', path).length > 0;
    }, SETTLE_MS).catch(() => assert.fail('late-mirror never received a copy after the edit'));
    await expectMirrored('/mirror-edit', ['late-mirror'], false);
  });
});
