/**
 * Gateway API matching precedence, filters, weights and timeouts: cases ported from the conformance
 * suite (kubernetes-sigs/gateway-api conformance/tests: HTTPRouteMatchingAcrossRoutes,
 * HTTPRouteHeaderMatching, HTTPRouteQueryParamMatching, HTTPRouteMethodMatching,
 * HTTPRouteRequestHeaderModifier, HTTPRouteResponseHeaderModifier, HTTPRouteRedirect*,
 * HTTPRouteRewritePath, HTTPRouteRewriteHost, HTTPRouteWeight, HTTPRouteTimeoutRequest), plus the
 * refusals Tollgate adds (a RegularExpression path), through the built process.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  gatewayClassObject,
  gatewayObject,
  hasCondition,
  httpRouteObject,
  namespaceObject,
  routeParentConditions,
} from '../helpers/fake-gateway-api.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  type StoredObject,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const INFRA = 'gateway-conformance-infra';
const SETTLE_MS = 10_000;

describe('Gateway API matching, filters, weights and timeouts through the built process', () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;

  const send = (host: string, path = '/', headers: Record<string, string> = {}, method = 'GET') =>
    request(`${tollgate.proxyUrl}${path}`, { method, headers: { host, ...headers } });
  const backendOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  const expectBackend = async (
    host: string,
    path: string,
    expected: string,
    headers: Record<string, string> = {},
    method = 'GET',
  ) => {
    let last = '';
    try {
      await waitFor(async () => {
        last = backendOf(await send(host, path, headers, method));
        return last === expected;
      }, SETTLE_MS);
    } catch {
      assert.fail(`${method} ${host}${path} ${JSON.stringify(headers)}: expected ${expected}, got ${last}`);
    }
  };
  const applied: StoredObject[] = [];
  const apply = (...objects: StoredObject[]) => {
    for (const object of objects) {
      api.applyRaw(object);
      applied.push(object);
    }
  };
  const cleanUp = async () => {
    for (const object of applied.splice(0).reverse())
      if (api.get('httproutes', object.metadata.namespace, object.metadata.name))
        api.delete('httproutes', object.metadata.namespace, object.metadata.name);
    await waitFor(async () => (await send('cleanup.test', '/')).status === 404, SETTLE_MS);
  };
  const route = (name: string, rules: Array<Record<string, unknown>>, hostnames?: string[]) =>
    httpRouteObject({ name, namespace: INFRA, parentRefs: [{ name: 'same-namespace' }], rules, hostnames });
  const backend = (name: string, extra: Record<string, unknown> = {}) => ({ name, port: 8080, ...extra });
  const prefix = (value: string) => ({ path: { type: 'PathPrefix', value } });

  before(async () => {
    for (const name of ['infra-backend-v1', 'infra-backend-v2', 'infra-backend-v3'])
      upstreams.set(name, await startUpstream({ name }));
    // A backend that answers with headers to modify, and one that takes its time (timeouts).
    upstreams.set(
      'headers-backend',
      await startUpstream({
        name: 'headers-backend',
        handler: (_req, res) => {
          res.writeHead(200, {
            'x-header-remove': 'gone',
            'x-header-set': 'original',
            'content-type': 'text/plain',
          });
          res.end('ok');
        },
      }),
    );
    upstreams.set(
      'slow-backend',
      await startUpstream({
        name: 'slow-backend',
        handler: async (_req, res) => {
          await new Promise((resolve) => setTimeout(resolve, 1500));
          res.end('late');
        },
      }),
    );
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(INFRA, { 'gateway-conformance': 'infra' }));
    api.applyRaw(gatewayClassObject());
    api.applyRaw(
      gatewayObject({
        name: 'same-namespace',
        namespace: INFRA,
        listeners: [
          { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'Same' } } },
        ],
      }),
    );
    for (const [name, upstream] of upstreams) {
      api.apply(
        service({ name, namespace: INFRA, ports: [{ name: 'http', port: 8080, targetPort: upstream.port }] }),
      );
      api.apply(
        endpointSlice({
          service: name,
          namespace: INFRA,
          ports: [{ name: 'http', port: upstream.port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
    }
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-filters-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, INFRA), gateway_class: 'tollgate' },
      },
      upstreams: {
        upstreams: {
          'cleanup.test': {
            paths: { '/never': { servers: [(upstreams.get('infra-backend-v3') as Upstream).address] } },
          },
        },
      },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('HTTPRouteMatchingAcrossRoutes: matches of two routes on one host merge in precedence order', async () => {
    apply(
      route(
        'matching-part1',
        [
          {
            matches: [prefix('/'), { headers: [{ name: 'version', value: 'one' }] }],
            backendRefs: [backend('infra-backend-v1')],
          },
        ],
        ['example.com', 'example.net'],
      ),
      route(
        'matching-part2',
        [
          {
            matches: [prefix('/v2'), { headers: [{ name: 'version', value: 'two' }] }],
            backendRefs: [backend('infra-backend-v2')],
          },
        ],
        ['example.com'],
      ),
    );
    await expectBackend('example.com', '/', 'infra-backend-v1');
    await expectBackend('example.com', '/example', 'infra-backend-v1');
    await expectBackend('example.net', '/example', 'infra-backend-v1');
    await expectBackend('example.com', '/example', 'infra-backend-v1', { Version: 'one' });
    await expectBackend('example.com', '/v2', 'infra-backend-v2');
    await expectBackend('example.net', '/v2', 'infra-backend-v1');
    await expectBackend('example.com', '/v2/example', 'infra-backend-v2');
    await expectBackend('example.com', '/', 'infra-backend-v2', { Version: 'two' });
    await cleanUp();
  });

  it('HTTPRouteHeaderMatching, HTTPRouteQueryParamMatching, HTTPRouteMethodMatching: more conditions win; a request matching none gets 404', async () => {
    apply(
      route(
        'header-matching',
        [
          {
            matches: [{ headers: [{ name: 'version', value: 'one' }] }],
            backendRefs: [backend('infra-backend-v1')],
          },
          {
            matches: [{ headers: [{ name: 'version', value: 'two' }] }],
            backendRefs: [backend('infra-backend-v2')],
          },
          {
            matches: [
              {
                headers: [
                  { name: 'version', value: 'two' },
                  { name: 'color', value: 'orange' },
                ],
              },
            ],
            backendRefs: [backend('infra-backend-v1')],
          },
          {
            matches: [{ queryParams: [{ name: 'animal', value: 'whale' }] }],
            backendRefs: [backend('infra-backend-v3')],
          },
          { matches: [{ method: 'POST' }], backendRefs: [backend('infra-backend-v3')] },
          {
            matches: [{ path: { type: 'Exact', value: '/exact' }, method: 'GET' }],
            backendRefs: [backend('infra-backend-v2')],
          },
        ],
        ['match.test'],
      ),
    );
    await expectBackend('match.test', '/', 'infra-backend-v1', { version: 'one' });
    await expectBackend('match.test', '/', 'infra-backend-v2', { version: 'two' });
    await expectBackend('match.test', '/', 'infra-backend-v1', { version: 'two', color: 'orange' });
    await expectBackend('match.test', '/', 'infra-backend-v2', { version: 'two', color: 'blue' });
    await expectBackend('match.test', '/', 'status 404', { version: 'three' });
    await expectBackend('match.test', '/?animal=whale', 'infra-backend-v3');
    await expectBackend('match.test', '/?animal=dolphin', 'status 404');
    await expectBackend('match.test', '/', 'infra-backend-v3', {}, 'POST');
    // A method match ranks above header matches (the spec's order): POST with version one is v3.
    await expectBackend('match.test', '/', 'infra-backend-v3', { version: 'one' }, 'POST');
    await expectBackend('match.test', '/exact', 'infra-backend-v2');
    await expectBackend('match.test', '/exact', 'status 404', {}, 'PUT');
    await cleanUp();
  });

  it('HTTPRouteRequestHeaderModifier and HTTPRouteResponseHeaderModifier: set, add and remove', async () => {
    apply(
      route(
        'header-modifier',
        [
          {
            matches: [prefix('/set')],
            filters: [
              {
                type: 'RequestHeaderModifier',
                requestHeaderModifier: {
                  set: [{ name: 'X-Header-Set', value: 'set-overwrites-values' }],
                  add: [{ name: 'X-Header-Add', value: 'add-appends-values' }],
                  remove: ['X-Header-Remove'],
                },
              },
            ],
            backendRefs: [backend('infra-backend-v1')],
          },
          {
            matches: [prefix('/response')],
            filters: [
              {
                type: 'ResponseHeaderModifier',
                responseHeaderModifier: {
                  set: [{ name: 'X-Header-Set', value: 'set-overwrites-values' }],
                  add: [{ name: 'X-Header-Add', value: 'header-add' }],
                  remove: ['X-Header-Remove'],
                },
              },
            ],
            backendRefs: [backend('headers-backend')],
          },
        ],
        ['headers.test'],
      ),
    );
    await expectBackend('headers.test', '/set', 'infra-backend-v1');
    const seen = (
      await send('headers.test', '/set', {
        'x-header-set': 'original',
        'x-header-add': 'original',
        'x-header-remove': 'secret',
      })
    ).json<{ headers: Record<string, string> }>().headers;
    assert.equal(seen['x-header-set'], 'set-overwrites-values');
    assert.equal(seen['x-header-add'], 'original, add-appends-values');
    assert.equal(seen['x-header-remove'], undefined);
    await waitFor(async () => (await send('headers.test', '/response')).status === 200, SETTLE_MS);
    const answered = await send('headers.test', '/response');
    assert.equal(answered.headers['x-header-set'], 'set-overwrites-values');
    assert.equal(answered.headers['x-header-add'], 'header-add');
    assert.equal(answered.headers['x-header-remove'], undefined);
    await cleanUp();
  });

  it('HTTPRouteRedirectPath, HTTPRouteRedirectHostAndStatus, HTTPRouteRedirectScheme, HTTPRouteRedirectPort: Location built from the request, query kept', async () => {
    const redirect = (path: string, requestRedirect: Record<string, unknown>) => ({
      matches: [prefix(path)],
      filters: [{ type: 'RequestRedirect', requestRedirect }],
    });
    apply(
      route(
        'redirect',
        [
          redirect('/original-prefix', {
            path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/replacement-prefix' },
          }),
          redirect('/full', { path: { type: 'ReplaceFullPath', replaceFullPath: '/full-path-replacement' } }),
          redirect('/path-and-host', {
            hostname: 'example.org',
            path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/replacement-prefix' },
          }),
          redirect('/path-and-status', {
            path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/replacement-prefix' },
            statusCode: 301,
          }),
          redirect('/scheme', { scheme: 'https' }),
          redirect('/port', { port: 8083 }),
          redirect('/scheme-and-port', { scheme: 'https', port: 8443 }),
        ],
        ['redirect.test'],
      ),
    );
    const location = async (path: string, status = 302) => {
      let res: SimpleResponse | null = null;
      await waitFor(async () => {
        res = await send('redirect.test', path);
        return res.status === status;
      }, SETTLE_MS);
      return String((res as unknown as SimpleResponse).headers.location);
    };
    assert.equal(await location('/original-prefix/lemon'), 'http://redirect.test/replacement-prefix/lemon');
    assert.equal(await location('/full/path/original?x=1'), 'http://redirect.test/full-path-replacement?x=1');
    assert.equal(await location('/path-and-host'), 'http://example.org/replacement-prefix');
    assert.equal(await location('/path-and-status', 301), 'http://redirect.test/replacement-prefix');
    assert.equal(await location('/scheme'), 'https://redirect.test/scheme');
    assert.equal(await location('/port'), 'http://redirect.test:8083/port');
    assert.equal(await location('/scheme-and-port'), 'https://redirect.test:8443/scheme-and-port');
    await cleanUp();
  });

  it('HTTPRouteRewritePath and HTTPRouteRewriteHost: ReplacePrefixMatch, ReplaceFullPath, hostname', async () => {
    const rewrite = (path: string, urlRewrite: Record<string, unknown>) => ({
      matches: [prefix(path)],
      filters: [{ type: 'URLRewrite', urlRewrite }],
      backendRefs: [backend('infra-backend-v1')],
    });
    apply(
      route(
        'rewrite-path',
        [
          rewrite('/prefix/one', { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/one' } }),
          rewrite('/strip-prefix', { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/' } }),
          rewrite('/full/one', { path: { type: 'ReplaceFullPath', replaceFullPath: '/one' } }),
          rewrite('/host', { hostname: 'one.example.org' }),
        ],
        ['rewrite.test'],
      ),
    );
    const upstreamSaw = async (path: string) => {
      await expectBackend('rewrite.test', path, 'infra-backend-v1');
      return (await send('rewrite.test', path)).json<{ url: string; headers: Record<string, string> }>();
    };
    assert.equal((await upstreamSaw('/prefix/one/two')).url, '/one/two');
    assert.equal((await upstreamSaw('/strip-prefix/three')).url, '/three');
    assert.equal((await upstreamSaw('/strip-prefix')).url, '/');
    assert.equal((await upstreamSaw('/full/one/two?q=1')).url, '/one?q=1');
    assert.equal((await upstreamSaw('/host/x')).headers.host, 'one.example.org');
    await cleanUp();
  });

  it('HTTPRouteWeight: 70/30 between two backends, none to a weight of 0', async () => {
    apply(
      route(
        'weighted-backends',
        [
          {
            backendRefs: [
              backend('infra-backend-v1', { weight: 70 }),
              backend('infra-backend-v2', { weight: 30 }),
              backend('infra-backend-v3', { weight: 0 }),
            ],
          },
        ],
        ['weight.test'],
      ),
    );
    await expectBackend('weight.test', '/', 'infra-backend-v1');
    await waitFor(async () => backendOf(await send('weight.test', '/')) === 'infra-backend-v2', SETTLE_MS);
    const counts = new Map<string, number>();
    for (let i = 0; i < 100; i++) {
      const name = backendOf(await send('weight.test', '/'));
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    const v1 = counts.get('infra-backend-v1') ?? 0;
    const v2 = counts.get('infra-backend-v2') ?? 0;
    assert.equal(v1 + v2, 100, JSON.stringify([...counts]));
    assert.ok(v1 >= 60 && v1 <= 80, `v1 took ${v1} of 100`);
    await cleanUp();
  });

  it('an unresolvable backendRef beside resolvable ones keeps its share of requests, as 500s', async () => {
    apply(
      route(
        'partly-unresolvable',
        [
          {
            backendRefs: [
              backend('infra-backend-v1', { weight: 1 }),
              backend('does-not-exist', { weight: 1 }),
              backend('infra-backend-v2', { weight: 2 }),
            ],
          },
        ],
        ['share.test'],
      ),
    );
    await expectBackend('share.test', '/', 'infra-backend-v2');
    await api.waitFor(
      () =>
        hasCondition(
          routeParentConditions(api.get('httproutes', INFRA, 'partly-unresolvable'), 'same-namespace'),
          'ResolvedRefs',
          'False',
          'BackendNotFound',
        ),
      'BackendNotFound',
      SETTLE_MS,
    );
    const counts = new Map<string, number>();
    for (let i = 0; i < 100; i++) {
      const name = backendOf(await send('share.test', '/'));
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    const errors = counts.get('status 500') ?? 0;
    assert.ok(errors >= 24 && errors <= 26, `a quarter answered 500: ${JSON.stringify([...counts])}`);
    assert.ok((counts.get('infra-backend-v2') ?? 0) >= 40, JSON.stringify([...counts]));
    assert.ok((counts.get('infra-backend-v1') ?? 0) >= 15, JSON.stringify([...counts]));
    await cleanUp();
  });

  it('HTTPRouteTimeoutRequest: timeouts.request bounds the wait for the backend (504)', async () => {
    apply(
      route(
        'request-timeout',
        [
          {
            matches: [prefix('/slow')],
            timeouts: { request: '500ms' },
            backendRefs: [backend('slow-backend')],
          },
          {
            matches: [prefix('/patient')],
            timeouts: { request: '5s' },
            backendRefs: [backend('slow-backend')],
          },
        ],
        ['timeout.test'],
      ),
    );
    await waitFor(async () => (await send('timeout.test', '/slow')).status === 504, SETTLE_MS);
    assert.equal((await send('timeout.test', '/patient')).status, 200);
    await cleanUp();
  });

  it('a RegularExpression path or an unknown filter: the rule is refused with UnsupportedValue and an Event; the rest serves', async () => {
    apply(
      route(
        'partly-invalid',
        [
          {
            matches: [{ path: { type: 'RegularExpression', value: '/re/[a-z]+' } }],
            backendRefs: [backend('infra-backend-v2')],
          },
          {
            matches: [prefix('/extension')],
            filters: [
              { type: 'ExtensionRef', extensionRef: { group: 'example.com', kind: 'Filter', name: 'x' } },
            ],
            backendRefs: [backend('infra-backend-v2')],
          },
          { matches: [prefix('/fine')], backendRefs: [backend('infra-backend-v1')] },
        ],
        ['invalid.test'],
      ),
      route(
        'all-invalid',
        [
          {
            matches: [{ path: { type: 'RegularExpression', value: '.*' } }],
            backendRefs: [backend('infra-backend-v2')],
          },
        ],
        ['invalid2.test'],
      ),
      route('neighbour', [{ backendRefs: [backend('infra-backend-v3')] }], ['neighbour.test']),
      // What no CRD schema would let through, but a fake (or an older) API server stores: never a crash.
      {
        ...route('malformed', [], ['malformed.test']),
        spec: {
          parentRefs: [{ name: 'same-namespace' }],
          hostnames: 'malformed.test',
          rules: { not: 'a list' },
        },
      },
    );
    await expectBackend('invalid.test', '/fine', 'infra-backend-v1');
    await expectBackend('neighbour.test', '/', 'infra-backend-v3');
    assert.equal((await send('invalid.test', '/re/abc')).status, 404);
    assert.equal((await send('invalid.test', '/extension')).status, 404);
    await api.waitFor(
      () => {
        const conditions = routeParentConditions(
          api.get('httproutes', INFRA, 'partly-invalid'),
          'same-namespace',
        );
        return (
          hasCondition(conditions, 'Accepted', 'True') &&
          hasCondition(conditions, 'PartiallyInvalid', 'True', 'UnsupportedValue')
        );
      },
      'partly invalid',
      SETTLE_MS,
    );
    await api.waitFor(
      () =>
        hasCondition(
          routeParentConditions(api.get('httproutes', INFRA, 'all-invalid'), 'same-namespace'),
          'Accepted',
          'False',
          'UnsupportedValue',
        ),
      'all invalid',
      SETTLE_MS,
    );
    await api.waitFor(
      () =>
        api.events.some(
          (event) =>
            event.involvedObject.name === 'partly-invalid' &&
            event.reason === 'PartlyServed' &&
            /RegularExpression/.test(event.message),
        ),
      'an Event naming the refused rule',
      SETTLE_MS,
    );
    assert.ok(
      api.events.some((event) => event.involvedObject.name === 'all-invalid' && event.reason === 'Rejected'),
    );
    await api.waitFor(
      () =>
        api.events.some(
          (event) => event.involvedObject.name === 'malformed' && /malformed/.test(event.message),
        ),
      'an Event on the malformed route',
      SETTLE_MS,
    );
    // The others kept serving through it, and changes still apply.
    await expectBackend('neighbour.test', '/', 'infra-backend-v3');
    await cleanUp();
  });
});
