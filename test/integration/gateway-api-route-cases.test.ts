/**
 * HTTPRoute cases of the Gateway API conformance suite (kubernetes-sigs/gateway-api v1.6,
 * conformance/tests) with the suite's manifests as written (only `{GATEWAY_CLASS_NAME}` filled in),
 * through the built process and the fake API server, every request of each `.go` file's table:
 * HTTPRouteRewritePath and HTTPRouteRewriteHost (the rewrite combined with a RequestHeaderModifier
 * included, checked on what the backend received), HTTPRouteHeaderMatching,
 * HTTPRouteQueryParamMatching and HTTPRouteMethodMatching.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gatewayClassObject, namespaceObject } from '../helpers/fake-gateway-api.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import {
  applyBackendService,
  CONFORMANCE_INFRA,
  manifests,
  SAME_NAMESPACE_GATEWAY,
  startGatewayTollgate,
  waitRouteAccepted,
} from '../helpers/gateway-conformance.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
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
const pathRule = (prefix: string, rewrite: string, headers = false) => `
  - matches:
    - path:
        type: PathPrefix
        value: ${prefix}
    filters:
    - type: URLRewrite
      urlRewrite:
        path:
${rewrite}${headers ? HEADER_MODIFIER : ''}
    backendRefs:
    - name: infra-backend-v1
      port: 8080`;
const prefixMatch = (value: string) => `          type: ReplacePrefixMatch
          replacePrefixMatch: ${value}`;
const fullPath = (value: string) => `          type: ReplaceFullPath
          replaceFullPath: ${value}`;

// conformance/tests/httproute-rewrite-path.yaml
const REWRITE_PATH = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: rewrite-path
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: same-namespace
  rules:${pathRule('/prefix/one', prefixMatch('/one'))}${pathRule('/strip-prefix', prefixMatch('/'))}${pathRule(
    '/full/one',
    fullPath('/one'),
  )}${pathRule('/full/rewrite-path-and-modify-headers', fullPath('/test'), true)}${pathRule(
    '/prefix/rewrite-path-and-modify-headers',
    prefixMatch('/prefix'),
    true,
  )}
`;

// conformance/tests/httproute-rewrite-host.yaml
const REWRITE_HOST = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: rewrite-host
  namespace: gateway-conformance-infra
spec:
  hostnames:
    - "rewrite.example"
  parentRefs:
    - name: same-namespace
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /one
      filters:
        - type: URLRewrite
          urlRewrite:
            hostname: one.example.org
      backendRefs:
        - name: infra-backend-v1
          port: 8080
    - filters:
        - type: URLRewrite
          urlRewrite:
            hostname: example.org
      backendRefs:
        - name: infra-backend-v2
          port: 8080
    - matches:
        - path:
            type: PathPrefix
            value: /rewrite-host-and-modify-headers
      filters:
        - type: URLRewrite
          urlRewrite:
            hostname: test.example.org
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
              - X-Header-Remove
      backendRefs:
        - name: infra-backend-v2
          port: 8080
`;

// conformance/tests/httproute-header-matching.yaml
const HEADER_MATCHING = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: header-matching
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: same-namespace
  rules:
  - matches:
    - headers:
      - name: version
        value: one
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - headers:
      - name: version
        value: two
    backendRefs:
    - name: infra-backend-v2
      port: 8080
  - matches:
    - headers:
      - name: version
        value: two
      - name: color
        value: orange
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - headers:
      - name: color
        value: blue
    - headers:
      - name: color
        value: green
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - headers:
      - name: color
        value: red
    - headers:
      - name: color
        value: yellow
    backendRefs:
    - name: infra-backend-v2
      port: 8080
`;

// conformance/tests/httproute-query-param-matching.yaml
const QUERY_PARAM_MATCHING = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: query-param-matching
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: same-namespace
  rules:
  - matches:
    - queryParams:
      - name: animal
        value: whale
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - queryParams:
      - name: animal
        value: dolphin
    backendRefs:
    - name: infra-backend-v2
      port: 8080
  - matches:
    - queryParams:
      - name: animal
        value: dolphin
      - name: color
        value: blue
    - queryParams:
      - name: ANIMAL
        value: Whale
    backendRefs:
    - name: infra-backend-v3
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /path1
      queryParams:
      - name: animal
        value: whale
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - headers:
      - name: version
        value: one
      queryParams:
      - name: animal
        value: whale
    backendRefs:
    - name: infra-backend-v2
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /path2
      headers:
      - name: version
        value: two
      queryParams:
      - name: animal
        value: whale
    backendRefs:
    - name: infra-backend-v3
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /path3
      queryParams:
      - name: animal
        value: shark
    - path:
        type: PathPrefix
        value: /path4
      headers:
      - name: version
        value: three
      queryParams:
      - name: animal
        value: kraken
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /path5
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - queryParams:
      - name: animal
        value: hydra
    backendRefs:
    - name: infra-backend-v2
      port: 8080
  - matches:
    - headers:
      - name: version
        value: four
    backendRefs:
    - name: infra-backend-v3
      port: 8080
`;

// conformance/tests/httproute-method-matching.yaml
const METHOD_MATCHING = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: method-matching
  namespace: gateway-conformance-infra
spec:
  parentRefs:
  - name: same-namespace
  rules:
  - matches:
    - method: POST
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - method: GET
    backendRefs:
    - name: infra-backend-v2
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /path1
      method: GET
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - headers:
      - name: version
        value: one
      method: PUT
    backendRefs:
    - name: infra-backend-v2
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /path2
      headers:
      - name: version
        value: two
      method: POST
    backendRefs:
    - name: infra-backend-v3
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /path3
      method: PATCH
    - path:
        type: PathPrefix
        value: /path4
      headers:
      - name: version
        value: three
      method: DELETE
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /path5
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - method: PATCH
    backendRefs:
    - name: infra-backend-v2
      port: 8080
  - matches:
    - headers:
      - name: version
        value: four
    backendRefs:
    - name: infra-backend-v3
      port: 8080
`;

/** A row of a matching table: method, path, headers, and the backend (or `status 404`) expected. */
type Row = [method: string, path: string, headers: Record<string, string>, expected: string];
const v1 = 'infra-backend-v1';
const v2 = 'infra-backend-v2';
const v3 = 'infra-backend-v3';
const NOT_FOUND = 'status 404';

/** One row of the suite's table: the request sent, and what the backend must have received. */
interface Expected {
  host: string;
  path: string;
  headers?: Record<string, string>;
  backend: string;
  upstreamPath: string;
  upstreamHost?: string;
  upstreamHeaders?: Record<string, string>;
  absentHeaders?: string[];
}

const MODIFIED_HEADERS = {
  headers: {
    'X-Header-Remove': 'remove-val',
    'X-Header-Add-Append': 'append-val-1',
    'X-Header-Set': 'set-val',
  },
  upstreamHeaders: {
    'x-header-add': 'header-val-1',
    'x-header-add-append': 'append-val-1,header-val-2',
    'x-header-set': 'set-overwrites-values',
  },
  absentHeaders: ['x-header-remove'],
};

describe('Gateway API HTTPRoute cases with the suite’s manifests and tables, through the built process', () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;

  const serviceFor = (name: string) =>
    applyBackendService(api, { name, namespace: INFRA, port: (upstreams.get(name) as Upstream).port });
  /** MakeRequestAndExpectEventuallyConsistentResponse with an ExpectedRequest. */
  const expectRequest = async (expected: Expected) => {
    let last = '';
    try {
      await waitFor(async () => {
        const res = await request(`${tollgate.proxyUrl}${expected.path}`, {
          headers: { host: expected.host, ...expected.headers },
        });
        if (res.status !== 200) {
          last = `status ${res.status}`;
          return false;
        }
        const seen = res.json<{ server: string; url: string; headers: Record<string, string | undefined> }>();
        last = JSON.stringify(seen);
        // Repeated headers may reach the backend as one list (`a,b`) or joined by Node (`a, b`).
        const same = (got: string | undefined, want: string) => got?.replaceAll(', ', ',') === want;
        return (
          seen.server === expected.backend &&
          seen.url === expected.upstreamPath &&
          (expected.upstreamHost === undefined || seen.headers.host === expected.upstreamHost) &&
          Object.entries(expected.upstreamHeaders ?? {}).every(([name, value]) =>
            same(seen.headers[name], value),
          ) &&
          (expected.absentHeaders ?? []).every((name) => seen.headers[name] === undefined)
        );
      }, SETTLE_MS);
    } catch {
      assert.fail(`${expected.host}${expected.path}: expected ${JSON.stringify(expected)}, got ${last}`);
    }
  };
  /** Each row, served rows first (once they answer the route is live, and a 404 is the match's). */
  const expectRows = async (rows: readonly Row[]) => {
    const ordered = [
      ...rows.filter(([, , , expected]) => expected !== NOT_FOUND),
      ...rows.filter(([, , , expected]) => expected === NOT_FOUND),
    ];
    for (const [method, path, headers, expected] of ordered) {
      let last = '';
      try {
        await waitFor(async () => {
          const res = await request(`${tollgate.proxyUrl}${path}`, {
            method,
            headers: { host: 'example.test', ...headers },
          });
          last = res.status === 200 ? String(res.json().server) : `status ${res.status}`;
          return last === expected;
        }, SETTLE_MS);
      } catch {
        assert.fail(`${method} ${path} ${JSON.stringify(headers)}: expected ${expected}, got ${last}`);
      }
    }
  };
  const accepted = (route: string) =>
    waitRouteAccepted(api, { namespace: INFRA, route, gateway: 'same-namespace', timeoutMs: SETTLE_MS });

  before(async () => {
    for (const name of ['infra-backend-v1', 'infra-backend-v2', 'infra-backend-v3'])
      upstreams.set(name, await startUpstream({ name }));
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(INFRA, { 'gateway-conformance': 'infra' }));
    api.applyRaw(gatewayClassObject());
    serviceFor('infra-backend-v1');
    serviceFor('infra-backend-v2');
    serviceFor('infra-backend-v3');
    for (const object of manifests(SAME_NAMESPACE_GATEWAY)) api.applyRaw(object);
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-rewrite-'));
    tollgate = await startGatewayTollgate(api, { dir, namespace: INFRA });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('HTTPRouteRewritePath: ReplacePrefixMatch and ReplaceFullPath, alone and with a RequestHeaderModifier', async () => {
    for (const object of manifests(REWRITE_PATH)) api.applyRaw(object);
    try {
      await accepted('rewrite-path');
      const host = 'example.test';
      const backend = 'infra-backend-v1';
      for (const expected of [
        { host, backend, path: '/prefix/one/two', upstreamPath: '/one/two' },
        { host, backend, path: '/strip-prefix/three', upstreamPath: '/three' },
        { host, backend, path: '/strip-prefix', upstreamPath: '/' },
        { host, backend, path: '/full/one/two', upstreamPath: '/one' },
        {
          host,
          backend,
          path: '/full/rewrite-path-and-modify-headers/test',
          upstreamPath: '/test',
          ...MODIFIED_HEADERS,
        },
        {
          host,
          backend,
          path: '/prefix/rewrite-path-and-modify-headers/one',
          upstreamPath: '/prefix/one',
          ...MODIFIED_HEADERS,
        },
      ] satisfies Expected[])
        await expectRequest(expected);
    } finally {
      api.delete('httproutes', INFRA, 'rewrite-path');
    }
  });

  it('HTTPRouteRewriteHost: the hostname rewritten per rule, alone and with a RequestHeaderModifier', async () => {
    for (const object of manifests(REWRITE_HOST)) api.applyRaw(object);
    try {
      await accepted('rewrite-host');
      const host = 'rewrite.example';
      for (const expected of [
        {
          host,
          path: '/one',
          backend: 'infra-backend-v1',
          upstreamPath: '/one',
          upstreamHost: 'one.example.org',
        },
        {
          host,
          path: '/two',
          backend: 'infra-backend-v2',
          upstreamPath: '/two',
          upstreamHost: 'example.org',
        },
        {
          host,
          path: '/rewrite-host-and-modify-headers',
          backend: 'infra-backend-v2',
          upstreamPath: '/rewrite-host-and-modify-headers',
          upstreamHost: 'test.example.org',
          headers: { 'X-Header-Remove': 'remove-val', 'X-Header-Add-Append': 'append-val-1' },
          upstreamHeaders: MODIFIED_HEADERS.upstreamHeaders,
          absentHeaders: MODIFIED_HEADERS.absentHeaders,
        },
      ] satisfies Expected[])
        await expectRequest(expected);
    } finally {
      api.delete('httproutes', INFRA, 'rewrite-host');
    }
  });

  it('HTTPRouteHeaderMatching: exact header matches, ANDed within a match and ORed across matches; more headers win', async () => {
    for (const object of manifests(HEADER_MATCHING)) api.applyRaw(object);
    try {
      await accepted('header-matching');
      await expectRows([
        ['GET', '/', { Version: 'one' }, v1],
        ['GET', '/', { Version: 'two' }, v2],
        ['GET', '/', { Version: 'two', Color: 'orange' }, v1],
        ['GET', '/', { Version: 'two', Color: 'blue' }, v2],
        ['GET', '/', { Color: 'orange' }, NOT_FOUND],
        ['GET', '/', { 'Some-Other-Header': 'one' }, NOT_FOUND],
        ['GET', '/', { Color: 'blue' }, v1],
        ['GET', '/', { Color: 'green' }, v1],
        ['GET', '/', { Color: 'red' }, v2],
        ['GET', '/', { Color: 'yellow' }, v2],
        ['GET', '/', { Color: 'purple' }, NOT_FOUND],
      ]);
    } finally {
      api.delete('httproutes', INFRA, 'header-matching');
    }
  });

  it('HTTPRouteQueryParamMatching: exact and case-sensitive query matches, with paths and headers, in the spec’s precedence', async () => {
    for (const object of manifests(QUERY_PARAM_MATCHING)) api.applyRaw(object);
    try {
      await accepted('query-param-matching');
      await expectRows([
        ['GET', '/?animal=whale', {}, v1],
        ['GET', '/?animal=dolphin', {}, v2],
        ['GET', '/?animal=dolphin&color=blue', {}, v3],
        ['GET', '/?ANIMAL=Whale', {}, v3],
        ['GET', '/?animal=whale&otherparam=irrelevant', {}, v1],
        ['GET', '/?animal=dolphin&color=yellow', {}, v2],
        ['GET', '/?color=blue', {}, NOT_FOUND],
        ['GET', '/?animal=dog', {}, NOT_FOUND],
        ['GET', '/?animal=whaledolphin', {}, NOT_FOUND],
        ['GET', '/', {}, NOT_FOUND],
        ['GET', '/path1?animal=whale', {}, v1],
        ['GET', '/?animal=whale', { version: 'one' }, v2],
        ['GET', '/path2?animal=whale', { version: 'two' }, v3],
        ['GET', '/path3?animal=shark', {}, v1],
        ['GET', '/path4?animal=kraken', { version: 'three' }, v1],
        ['GET', '/?animal=shark', {}, NOT_FOUND],
        ['GET', '/path4?animal=kraken', {}, NOT_FOUND],
        ['GET', '/path5?animal=hydra', {}, v1],
        ['GET', '/?animal=hydra', { version: 'four' }, v3],
      ]);
    } finally {
      api.delete('httproutes', INFRA, 'query-param-matching');
    }
  });

  it('HTTPRouteMethodMatching: method matches alone and with paths and headers; HEAD is not GET; the spec’s precedence', async () => {
    for (const object of manifests(METHOD_MATCHING)) api.applyRaw(object);
    try {
      await accepted('method-matching');
      await expectRows([
        ['POST', '/', {}, v1],
        ['GET', '/', {}, v2],
        ['HEAD', '/', {}, NOT_FOUND],
        ['GET', '/path1', {}, v1],
        ['PUT', '/', { version: 'one' }, v2],
        ['POST', '/path2', { version: 'two' }, v3],
        ['PATCH', '/path3', {}, v1],
        ['DELETE', '/path4', { version: 'three' }, v1],
        ['PUT', '/', {}, NOT_FOUND],
        ['DELETE', '/path4', {}, NOT_FOUND],
        ['PATCH', '/path5', {}, v1],
        ['PATCH', '/', { version: 'four' }, v2],
      ]);
    } finally {
      api.delete('httproutes', INFRA, 'method-matching');
    }
  });
});
