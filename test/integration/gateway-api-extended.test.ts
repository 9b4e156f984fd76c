/**
 * Extended HTTPRoute features as the Gateway API conformance suite (v1.6) tests them, ported case by
 * case (kubernetes-sigs/gateway-api conformance/tests: HTTPRoute303Redirect, HTTPRoute307Redirect,
 * HTTPRoute308Redirect, HTTPRouteRedirectPortAndScheme, HTTPRouteNamedRule,
 * HTTPRouteInvalidParentRefSectionNameNotMatchingPort, HTTPRouteBackendRequestHeaderModifier,
 * HTTPRouteCORS, HTTPRouteTimeoutBackendRequest, HTTPRouteBackendProtocolH2C,
 * HTTPRouteBackendProtocolWebSocket, HTTPRouteRequestHeaderModifierBackendWeights,
 * HTTPRouteBackendURLRewrite, HTTPRouteBackendRequestRedirect; and the core HTTPRouteExactPathMatching,
 * HTTPRoutePathMatchOrder, HTTPRouteNoBackendRefs, HTTPRouteInvalidReferenceGrant), through the built process and a fake API server. Each test is named by the upstream
 * case it ports: scripts/conformance-report.ts reads those names (docs/gateway-api.md#conformance).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';
import {
  gatewayClassObject,
  gatewayObject,
  hasCondition,
  httpRouteObject,
  namespaceObject,
  referenceGrantObject,
  routeParentConditions,
} from '../helpers/fake-gateway-api.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  type StoredObject,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { connectHttp2, h2Request } from '../helpers/h2-client.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';
import { type EchoUpstream, mustOpen, nextMessage, startEchoUpstream } from '../helpers/websocket.ts';

const INFRA = 'gateway-conformance-infra';
const WEB = 'gateway-conformance-web-backend';
const SETTLE_MS = 10_000;

function httpsRequest(
  port: number,
  host: string,
  path: string,
  method = 'GET',
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        servername: host,
        headers: { host },
        rejectUnauthorized: false,
        agent: false,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('Gateway API extended HTTPRoute features through the built process', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let volume: SecretVolume;
  let h2cServer: http2.Http2Server;
  let wsEcho: EchoUpstream;
  const fallback = selfSigned('default.test');
  const exampleOrg = selfSigned('example.org');

  const send = (host: string, path = '/', headers: Record<string, string> = {}, method = 'GET') =>
    request(`${tollgate.proxyUrl}${path}`, { method, headers: { host, ...headers } });
  const backendOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  /** The first answer that satisfies `ok`, waiting for the translation to land. */
  const eventually = async (
    what: string,
    attempt: () => Promise<SimpleResponse>,
    ok: (res: SimpleResponse) => boolean,
  ) => {
    let last: SimpleResponse | null = null;
    try {
      await waitFor(async () => {
        last = await attempt();
        return ok(last);
      }, SETTLE_MS);
    } catch {
      const seen = last as SimpleResponse | null;
      assert.fail(`${what}: got ${seen?.status} ${JSON.stringify(seen?.headers)}`);
    }
    return last as unknown as SimpleResponse;
  };
  const applied: StoredObject[] = [];
  const apply = (...objects: StoredObject[]) => {
    for (const object of objects) {
      api.applyRaw(object);
      applied.push(object);
    }
  };
  const cleanUp = async () => {
    for (const object of applied.splice(0).reverse()) {
      const resource = object.kind === 'ReferenceGrant' ? 'referencegrants' : 'httproutes';
      if (api.get(resource, object.metadata.namespace, object.metadata.name))
        api.delete(resource, object.metadata.namespace, object.metadata.name);
    }
    await waitFor(async () => (await send('cleanup.test', '/')).status === 404, SETTLE_MS);
  };
  const route = (
    name: string,
    rules: Array<Record<string, unknown>>,
    hostnames?: string[],
    parentRefs: Array<Record<string, unknown>> = [{ name: 'same-namespace' }],
  ) => httpRouteObject({ name, namespace: INFRA, parentRefs, rules, hostnames });
  const backend = (name: string, extra: Record<string, unknown> = {}) => ({ name, port: 8080, ...extra });
  const prefix = (value: string) => ({ path: { type: 'PathPrefix', value } });
  const parentConditions = (name: string, gateway = 'same-namespace', section?: string) =>
    routeParentConditions(api.get('httproutes', INFRA, name), gateway, section);

  before(async () => {
    for (const name of ['infra-backend-v1', 'infra-backend-v2', 'infra-backend-v3'])
      upstreams.set(name, await startUpstream({ name }));
    // Answers after `?delay=` (as the suite's echo backend: `500ms`, `1s`).
    upstreams.set(
      'delay-backend',
      await startUpstream({
        name: 'delay-backend',
        handler: async (req, res) => {
          const delay = /[?&]delay=(\d+)(ms|s)\b/.exec(req.url ?? '');
          const ms = delay === null ? 0 : Number(delay[1]) * (delay[2] === 's' ? 1000 : 1);
          await new Promise((resolve) => setTimeout(resolve, ms));
          res.end('done');
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
    api.applyRaw(
      gatewayObject({
        name: 'same-namespace-with-https-listener',
        namespace: INFRA,
        listeners: [
          {
            name: 'https',
            port: 443,
            protocol: 'HTTPS',
            allowedRoutes: { namespaces: { from: 'Same' } },
            tls: { certificateRefs: [{ name: 'tls-validity-checks-certificate' }] },
          },
        ],
      }),
    );
    api.apply(
      secret({
        name: 'tls-validity-checks-certificate',
        namespace: INFRA,
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': exampleOrg.cert.toString(), 'tls.key': exampleOrg.key.toString() },
      }),
    );
    api.applyRaw(namespaceObject(WEB, { 'gateway-conformance': 'backend' }));
    upstreams.set('web-backend', await startUpstream({ name: 'web-backend' }));
    for (const [name, upstream] of upstreams) {
      const namespace = name === 'web-backend' ? WEB : INFRA;
      api.apply(
        service({ name, namespace, ports: [{ name: 'http', port: 8080, targetPort: upstream.port }] }),
      );
      api.apply(
        endpointSlice({
          service: name,
          namespace,
          ports: [{ name: 'http', port: upstream.port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
    }
    // Backends by appProtocol: an h2c-only server (HTTP/1.1 is refused) and a WebSocket echo.
    h2cServer = http2.createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ server: 'infra-backend-h2c', httpVersion: req.httpVersion }));
    });
    h2cServer.listen(0, '127.0.0.1');
    await once(h2cServer, 'listening');
    wsEcho = await startEchoUpstream();
    for (const [name, port, appProtocol] of [
      ['infra-backend-h2c', (h2cServer.address() as AddressInfo).port, 'kubernetes.io/h2c'],
      ['infra-backend-ws', Number(wsEcho.address.split(':')[1]), 'kubernetes.io/ws'],
    ] as const) {
      api.applyRaw({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace: INFRA },
        spec: {
          type: 'ClusterIP',
          clusterIP: '10.96.0.11',
          ports: [{ name: 'app', port: 8081, targetPort: port, protocol: 'TCP', appProtocol }],
        },
      });
      api.apply(
        endpointSlice({
          service: name,
          namespace: INFRA,
          ports: [{ name: 'app', port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
    }
    volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-extended-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        http2_cleartext: true,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
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
    await wsEcho?.close();
    if (h2cServer) await new Promise((resolve) => h2cServer.close(resolve));
    volume?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('HTTPRoute303Redirect, HTTPRoute307Redirect, HTTPRoute308Redirect: a POST redirected with the status asked for', async () => {
    const redirect = (path: string, statusCode: number) => ({
      matches: [prefix(path)],
      filters: [{ type: 'RequestRedirect', requestRedirect: { statusCode } }],
    });
    apply(
      route(
        'redirect-codes',
        [redirect('/see-other', 303), redirect('/temporary', 307), redirect('/permanent', 308)],
        ['codes.test'],
      ),
    );
    for (const [path, status] of [
      ['/see-other', 303],
      ['/temporary', 307],
      ['/permanent', 308],
    ] as const) {
      const res = await eventually(
        `POST ${path}`,
        () => send('codes.test', path, {}, 'POST'),
        (r) => r.status === status,
      );
      assert.equal(res.headers.location, `http://codes.test${path}`);
    }
    await api.waitFor(
      () => {
        const conditions = parentConditions('redirect-codes');
        return (
          hasCondition(conditions, 'Accepted', 'True') && hasCondition(conditions, 'ResolvedRefs', 'True')
        );
      },
      'Accepted and ResolvedRefs',
      SETTLE_MS,
    );
    // Any other code is still refused, with the rule: UnsupportedValue.
    apply(route('redirect-305', [redirect('/proxy', 305)], ['codes305.test']));
    await api.waitFor(
      () => hasCondition(parentConditions('redirect-305'), 'Accepted', 'False', 'UnsupportedValue'),
      '305 refused',
      SETTLE_MS,
    );
    await cleanUp();
  });

  it('HTTPRouteRedirectPortAndScheme: the port follows the scheme asked for, else the port the client addressed', async () => {
    const to = (path: string, requestRedirect: Record<string, unknown>) => ({
      matches: [prefix(path)],
      filters: [
        { type: 'RequestRedirect', requestRedirect: { hostname: 'example.org', ...requestRedirect } },
      ],
    });
    // The plain listener (port 80). The suite's second Gateway, an HTTP listener on 8080, is the same
    // route addressed as port 8080 by the client (Tollgate's listeners are its own; the port the
    // client addressed is the listener's port as the client sees it).
    const plainRules = [
      to('/scheme-nil-and-port-nil', {}),
      to('/scheme-nil-and-port-80', { port: 80 }),
      to('/scheme-nil-and-port-8080', { port: 8080 }),
      to('/scheme-https-and-port-nil', { scheme: 'https' }),
      to('/scheme-https-and-port-443', { scheme: 'https', port: 443 }),
      to('/scheme-https-and-port-8443', { scheme: 'https', port: 8443 }),
    ];
    apply(
      route('http-route-for-listener-on-port-80', plainRules, ['redirect80.test']),
      route('http-route-for-listener-on-port-8080', plainRules, ['redirect8080.test']),
      route(
        'http-route-for-listener-on-port-443',
        [
          to('/scheme-nil-and-port-nil', {}),
          to('/scheme-nil-and-port-443', { port: 443 }),
          to('/scheme-nil-and-port-8443', { port: 8443 }),
          to('/scheme-http-and-port-nil', { scheme: 'http' }),
          to('/scheme-http-and-port-80', { scheme: 'http', port: 80 }),
          to('/scheme-http-and-port-8080', { scheme: 'http', port: 8080 }),
        ],
        ['example.org'],
        [{ name: 'same-namespace-with-https-listener' }],
      ),
    );
    const plain = async (host: string, path: string) =>
      String(
        (
          await eventually(
            `${host}${path}`,
            () => send(host, path),
            (r) => r.status === 302,
          )
        ).headers.location,
      );
    const on80: Array<[string, string]> = [
      ['/scheme-nil-and-port-nil', 'http://example.org/scheme-nil-and-port-nil'],
      ['/scheme-nil-and-port-80', 'http://example.org/scheme-nil-and-port-80'],
      ['/scheme-nil-and-port-8080', 'http://example.org:8080/scheme-nil-and-port-8080'],
      ['/scheme-https-and-port-nil', 'https://example.org/scheme-https-and-port-nil'],
      ['/scheme-https-and-port-443', 'https://example.org/scheme-https-and-port-443'],
      ['/scheme-https-and-port-8443', 'https://example.org:8443/scheme-https-and-port-8443'],
    ];
    for (const [path, location] of on80) assert.equal(await plain('redirect80.test', path), location, path);
    const on8080: Array<[string, string]> = [
      ['/scheme-nil-and-port-nil', 'http://example.org:8080/scheme-nil-and-port-nil'],
      ['/scheme-nil-and-port-80', 'http://example.org/scheme-nil-and-port-80'],
      ['/scheme-https-and-port-nil', 'https://example.org/scheme-https-and-port-nil'],
    ];
    for (const [path, location] of on8080)
      assert.equal(await plain('redirect8080.test:8080', path), location, path);
    const tlsPort = tollgate.tlsPort as number;
    const on443: Array<[string, string]> = [
      ['/scheme-nil-and-port-nil', 'https://example.org/scheme-nil-and-port-nil'],
      ['/scheme-nil-and-port-443', 'https://example.org/scheme-nil-and-port-443'],
      ['/scheme-nil-and-port-8443', 'https://example.org:8443/scheme-nil-and-port-8443'],
      ['/scheme-http-and-port-nil', 'http://example.org/scheme-http-and-port-nil'],
      ['/scheme-http-and-port-80', 'http://example.org/scheme-http-and-port-80'],
      ['/scheme-http-and-port-8080', 'http://example.org:8080/scheme-http-and-port-8080'],
    ];
    for (const [path, location] of on443) {
      let last: { status: number; headers: Record<string, unknown> } | null = null;
      await waitFor(async () => {
        last = await httpsRequest(tlsPort, 'example.org', path);
        return last.status === 302;
      }, SETTLE_MS);
      assert.equal(
        (last as unknown as { headers: Record<string, unknown> }).headers.location,
        location,
        path,
      );
    }
    await cleanUp();
  });

  it('HTTPRouteNamedRule: a named and an unnamed rule both serve; the route is Accepted', async () => {
    apply(
      route(
        'http-named-rules',
        [
          { name: 'named-rule', matches: [prefix('/named')], backendRefs: [backend('infra-backend-v1')] },
          { matches: [prefix('/unnamed')], backendRefs: [backend('infra-backend-v2')] },
        ],
        ['named.test'],
      ),
    );
    await eventually(
      '/named',
      () => send('named.test', '/named'),
      (r) => backendOf(r) === 'infra-backend-v1',
    );
    await eventually(
      '/unnamed',
      () => send('named.test', '/unnamed'),
      (r) => backendOf(r) === 'infra-backend-v2',
    );
    await api.waitFor(
      () => {
        const conditions = parentConditions('http-named-rules');
        return (
          hasCondition(conditions, 'Accepted', 'True') && hasCondition(conditions, 'ResolvedRefs', 'True')
        );
      },
      'Accepted',
      SETTLE_MS,
    );
    await cleanUp();
  });

  it('HTTPRouteInvalidParentRefSectionNameNotMatchingPort: a sectionName and a port that disagree are NoMatchingParent; a matching port attaches', async () => {
    apply(
      route(
        'httproute-listener-section-name-not-matching-port',
        [{ backendRefs: [backend('infra-backend-v1', { kind: 'Service' })] }],
        ['mismatch.test'],
        [{ name: 'same-namespace', namespace: INFRA, sectionName: 'http', port: 81 }],
      ),
      route(
        'httproute-parent-ref-port',
        [{ backendRefs: [backend('infra-backend-v2')] }],
        ['parentport.test'],
        [{ name: 'same-namespace', sectionName: 'http', port: 80 }],
      ),
    );
    await api.waitFor(
      () =>
        hasCondition(
          parentConditions('httproute-listener-section-name-not-matching-port', 'same-namespace', 'http'),
          'Accepted',
          'False',
          'NoMatchingParent',
        ),
      'NoMatchingParent',
      SETTLE_MS,
    );
    await eventually(
      'port 80',
      () => send('parentport.test', '/'),
      (r) => backendOf(r) === 'infra-backend-v2',
    );
    assert.equal((await send('mismatch.test', '/')).status, 404);
    await cleanUp();
  });

  it('HTTPRouteBackendRequestHeaderModifier: set, add and remove on the backendRef, after the rule', async () => {
    const modifier = (
      path: string,
      requestHeaderModifier: Record<string, unknown>,
      ruleFilter?: unknown,
    ) => ({
      matches: [prefix(path)],
      ...(ruleFilter ? { filters: [ruleFilter] } : {}),
      backendRefs: [
        backend('infra-backend-v1', { filters: [{ type: 'RequestHeaderModifier', requestHeaderModifier }] }),
      ],
    });
    apply(
      route(
        'request-header-modifier',
        [
          modifier('/set', { set: [{ name: 'X-Header-Set', value: 'set-overwrites-values' }] }),
          modifier('/add', { add: [{ name: 'X-Header-Add', value: 'add-appends-values' }] }),
          modifier('/remove', { remove: ['X-Header-Remove'] }),
          modifier('/multiple', {
            set: [
              { name: 'X-Header-Set-1', value: 'header-set-1' },
              { name: 'X-Header-Set-2', value: 'header-set-2' },
            ],
            add: [
              { name: 'X-Header-Add-1', value: 'header-add-1' },
              { name: 'X-Header-Add-2', value: 'header-add-2' },
            ],
            remove: ['X-Header-Remove-1', 'X-Header-Remove-2'],
          }),
          modifier('/case-insensitivity', {
            set: [{ name: 'X-Header-Set', value: 'header-set' }],
            add: [{ name: 'X-Header-Add', value: 'header-add' }],
            remove: ['X-Header-Remove'],
          }),
          // Both levels: the backendRef's acts after the rule's.
          modifier(
            '/both',
            { set: [{ name: 'X-Layer', value: 'backend' }], add: [{ name: 'X-Rule-Add', value: 'backend' }] },
            {
              type: 'RequestHeaderModifier',
              requestHeaderModifier: {
                set: [{ name: 'X-Layer', value: 'rule' }],
                add: [{ name: 'X-Rule-Add', value: 'rule' }],
              },
            },
          ),
          // A ResponseHeaderModifier beside another weighted backend is refused: the response side
          // does not know which Service answered.
          {
            matches: [prefix('/weighted')],
            backendRefs: [
              backend('infra-backend-v1', {
                filters: [
                  {
                    type: 'ResponseHeaderModifier',
                    responseHeaderModifier: { set: [{ name: 'B', value: '1' }] },
                  },
                ],
              }),
              backend('infra-backend-v2'),
            ],
          },
        ],
        ['backend-headers.test'],
      ),
    );
    const seen = async (path: string, headers: Record<string, string> = {}) => {
      const res = await eventually(
        path,
        () => send('backend-headers.test', path, headers),
        (r) => backendOf(r) === 'infra-backend-v1',
      );
      return res.json<{ headers: Record<string, string> }>().headers;
    };
    assert.equal(
      (await seen('/set', { 'X-Header-Set': 'some-other-value' }))['x-header-set'],
      'set-overwrites-values',
    );
    assert.equal(
      (await seen('/add', { 'X-Header-Add': 'some-other-value' }))['x-header-add'],
      'some-other-value, add-appends-values',
    );
    assert.equal((await seen('/remove', { 'X-Header-Remove': 'val' }))['x-header-remove'], undefined);
    const multiple = await seen('/multiple', {
      'X-Header-Set-2': 'set-val',
      'X-Header-Add-2': 'add-val',
      'X-Header-Remove-2': 'remove-val',
    });
    assert.equal(multiple['x-header-set-1'], 'header-set-1');
    assert.equal(multiple['x-header-set-2'], 'header-set-2');
    assert.equal(multiple['x-header-add-1'], 'header-add-1');
    assert.equal(multiple['x-header-add-2'], 'add-val, header-add-2');
    assert.equal(multiple['x-header-remove-2'], undefined);
    const cased = await seen('/case-insensitivity', {
      'x-header-set': 'original',
      'x-header-add': 'original',
      'x-header-remove': 'gone',
    });
    assert.equal(cased['x-header-set'], 'header-set');
    assert.equal(cased['x-header-add'], 'original, header-add');
    assert.equal(cased['x-header-remove'], undefined);
    const both = await seen('/both');
    assert.equal(both['x-layer'], 'backend');
    assert.equal(both['x-rule-add'], 'rule, backend');
    assert.equal((await send('backend-headers.test', '/weighted')).status, 404);
    await api.waitFor(
      () => {
        const conditions = parentConditions('request-header-modifier');
        return (
          hasCondition(conditions, 'Accepted', 'True') &&
          hasCondition(conditions, 'PartiallyInvalid', 'True', 'UnsupportedValue')
        );
      },
      'the weighted rule refused, the others served',
      SETTLE_MS,
    );
    await cleanUp();
  });
  it('HTTPRouteCORS: preflights answered from the filter, simple requests carry the headers, wildcards as the spec says', async () => {
    const cors = (path: string, spec: Record<string, unknown>) => ({
      matches: [prefix(path)],
      filters: [{ type: 'CORS', cors: spec }],
      backendRefs: [backend('infra-backend-v1')],
    });
    apply(
      route(
        'cors-multiple-origins-methods-headers',
        [
          cors('/cors-1', {
            allowOrigins: ['https://www.foo.com', 'https://*.bar.com'],
            allowMethods: ['GET', 'OPTIONS'],
            allowHeaders: ['x-header-1', 'x-header-2'],
            exposeHeaders: ['x-header-3', 'x-header-4'],
            allowCredentials: true,
            maxAge: 3600,
          }),
        ],
        ['cors.test'],
      ),
      route(
        'cors-wildcard-methods',
        [cors('/cors-2', { allowOrigins: ['https://www.foo.com'], allowMethods: ['*'] })],
        ['cors.test'],
      ),
      route(
        'cors-wildcard-origin',
        [
          cors('/cors-wildcard-origin', {
            allowOrigins: ['*'],
            allowMethods: ['PUT'],
            allowCredentials: false,
          }),
        ],
        ['cors.test'],
      ),
      route(
        'cors-wildcard-methods-headers',
        [
          cors('/cors-wildcard-methods-headers', {
            allowOrigins: ['*'],
            allowMethods: ['*'],
            allowHeaders: ['*'],
            allowCredentials: true,
          }),
          cors('/cors-wildcard-methods-headers-unauth', {
            allowOrigins: ['*'],
            allowMethods: ['*'],
            allowHeaders: ['*'],
            allowCredentials: false,
          }),
        ],
        ['cors.test'],
      ),
      // A malformed origin refuses its rule, as upstreams.yaml's reader would refuse the file.
      route(
        'cors-bad-origin',
        [cors('/cors-bad', { allowOrigins: ['https://evil.test/path'] })],
        ['cors.test'],
      ),
    );
    const preflight = (path: string, origin: string, method: string, headers?: string) =>
      eventually(
        `preflight ${path} from ${origin}`,
        () =>
          send(
            'cors.test',
            path,
            {
              origin,
              'access-control-request-method': method,
              ...(headers ? { 'access-control-request-headers': headers } : {}),
            },
            'OPTIONS',
          ),
        (r) => r.status === 204 || r.status === 200,
      );
    const simple = (path: string, origin: string, method = 'GET') =>
      eventually(
        `${method} ${path} from ${origin}`,
        () => send('cors.test', path, { origin }, method),
        (r) => r.status === 200,
      );
    const cors1 = {
      'access-control-allow-methods': 'GET, OPTIONS',
      'access-control-allow-headers': 'x-header-1, x-header-2',
      'access-control-expose-headers': 'x-header-3, x-header-4',
      'access-control-max-age': '3600',
      'access-control-allow-credentials': 'true',
    };
    for (const origin of ['https://www.foo.com', 'https://www.bar.com', 'https://xpto.www.bar.com']) {
      const res = await preflight('/cors-1', origin, 'GET', 'x-header-1, x-header-2');
      assert.equal(res.headers['access-control-allow-origin'], origin);
      for (const [name, value] of Object.entries(cors1))
        assert.equal(res.headers[name], value, `${origin} ${name}`);
    }
    const refused = await preflight('/cors-1', 'https://foobar.com', 'GET');
    assert.equal(refused.headers['access-control-allow-origin'], undefined);
    assert.equal(
      (await simple('/cors-1', 'https://www.foo.com')).headers['access-control-allow-origin'],
      'https://www.foo.com',
    );
    assert.equal(
      (await simple('/cors-1', 'https://www.bar.com')).headers['access-control-allow-origin'],
      'https://www.bar.com',
    );
    assert.equal(
      (await simple('/cors-1', 'https://foobar.com')).headers['access-control-allow-origin'],
      undefined,
    );

    const anyMethod = await preflight('/cors-2', 'https://www.foo.com', 'POST');
    assert.equal(anyMethod.headers['access-control-allow-methods'], 'POST');
    assert.equal(anyMethod.headers['access-control-allow-origin'], 'https://www.foo.com');
    assert.equal(anyMethod.headers['access-control-allow-credentials'], undefined);

    for (const origin of ['https://foobar.com', 'https://foobar.com:12345']) {
      const res = await preflight('/cors-wildcard-origin', origin, 'PUT');
      assert.equal(res.headers['access-control-allow-origin'], '*');
      assert.equal(res.headers['access-control-allow-methods'], 'PUT');
      assert.equal(res.headers['access-control-allow-credentials'], undefined);
      const put = await simple('/cors-wildcard-origin', origin, 'PUT');
      assert.equal(put.headers['access-control-allow-origin'], '*');
      assert.equal(put.headers['access-control-allow-credentials'], undefined);
    }

    const credentialed = await preflight(
      '/cors-wildcard-methods-headers',
      'https://other.foo.com',
      'PUT',
      'x-header-1, x-header-2',
    );
    assert.equal(credentialed.headers['access-control-allow-origin'], 'https://other.foo.com');
    assert.equal(credentialed.headers['access-control-allow-methods'], 'PUT');
    assert.equal(credentialed.headers['access-control-allow-headers'], 'x-header-1, x-header-2');
    assert.equal(credentialed.headers['access-control-allow-credentials'], 'true');
    const anonymous = await preflight(
      '/cors-wildcard-methods-headers-unauth',
      'https://other.foo.com',
      'PUT',
      'x-header-1, x-header-2',
    );
    assert.equal(anonymous.headers['access-control-allow-origin'], '*');
    assert.equal(anonymous.headers['access-control-allow-methods'], 'PUT');
    assert.equal(anonymous.headers['access-control-allow-headers'], 'x-header-1, x-header-2');
    assert.equal(anonymous.headers['access-control-allow-credentials'], undefined);
    const withCookies = await simple('/cors-wildcard-methods-headers', 'https://other.foo.com');
    assert.equal(withCookies.headers['access-control-allow-origin'], 'https://other.foo.com');
    assert.equal(withCookies.headers['access-control-allow-credentials'], 'true');
    const without = await simple('/cors-wildcard-methods-headers-unauth', 'https://other.foo.com');
    assert.equal(without.headers['access-control-allow-origin'], '*');
    assert.equal(without.headers['access-control-allow-credentials'], undefined);

    await api.waitFor(
      () => hasCondition(parentConditions('cors-bad-origin'), 'Accepted', 'False', 'UnsupportedValue'),
      'a malformed origin refused',
      SETTLE_MS,
    );
    assert.equal((await send('cors.test', '/cors-bad')).status, 404);
    await cleanUp();
  });
  it('HTTPRouteTimeoutBackendRequest: timeouts.backendRequest bounds the wait (504); 0s switches it off', async () => {
    apply(
      route(
        'backend-request-timeout',
        [
          {
            matches: [prefix('/backend-timeout')],
            backendRefs: [backend('delay-backend')],
            timeouts: { backendRequest: '500ms' },
          },
          {
            matches: [prefix('/disable-backend-timeout')],
            backendRefs: [backend('delay-backend')],
            timeouts: { backendRequest: '0s' },
          },
        ],
        ['timeouts.test'],
      ),
    );
    await eventually(
      '/backend-timeout',
      () => send('timeouts.test', '/backend-timeout'),
      (r) => r.status === 200,
    );
    assert.equal((await send('timeouts.test', '/backend-timeout?delay=1s')).status, 504);
    assert.equal((await send('timeouts.test', '/disable-backend-timeout?delay=1s')).status, 200);
    await cleanUp();
  });
  it('HTTPRouteExactPathMatching: Exact paths match only themselves, case and trailing slash included', async () => {
    apply(
      route(
        'exact-matching',
        [
          {
            matches: [{ path: { type: 'Exact', value: '/one' } }],
            backendRefs: [backend('infra-backend-v1')],
          },
          {
            matches: [{ path: { type: 'Exact', value: '/two' } }],
            backendRefs: [backend('infra-backend-v2')],
          },
        ],
        ['exact.test'],
      ),
    );
    await eventually(
      '/one',
      () => send('exact.test', '/one'),
      (r) => backendOf(r) === 'infra-backend-v1',
    );
    await eventually(
      '/two',
      () => send('exact.test', '/two'),
      (r) => backendOf(r) === 'infra-backend-v2',
    );
    for (const path of ['/', '/one/example', '/two/', '/Two'])
      assert.equal((await send('exact.test', path)).status, 404, path);
    await cleanUp();
  });

  it('HTTPRoutePathMatchOrder: an Exact path over prefixes, then the longest prefix', async () => {
    const rule = (type: string, value: string, to: string) => ({
      matches: [{ path: { type, value } }],
      backendRefs: [backend(to)],
    });
    apply(
      route(
        'path-matching-order',
        [
          rule('Exact', '/match', 'infra-backend-v1'),
          rule('Exact', '/match/exact', 'infra-backend-v2'),
          rule('Exact', '/match/exact/one', 'infra-backend-v3'),
          rule('PathPrefix', '/match/', 'infra-backend-v3'),
          rule('PathPrefix', '/match/prefix/', 'infra-backend-v1'),
          rule('PathPrefix', '/match/prefix/one', 'infra-backend-v2'),
        ],
        ['order.test'],
      ),
    );
    for (const [path, expected] of [
      ['/match/exact/one', 'infra-backend-v3'],
      ['/match/exact', 'infra-backend-v2'],
      ['/match', 'infra-backend-v1'],
      ['/match/prefix/one/any', 'infra-backend-v2'],
      ['/match/prefix/any', 'infra-backend-v1'],
      ['/match/any', 'infra-backend-v3'],
    ] as const)
      await eventually(
        path,
        () => send('order.test', path),
        (r) => backendOf(r) === expected,
      );
    await cleanUp();
  });

  it('HTTPRouteNoBackendRefs: a rule without backendRefs (omitted or empty) answers 500; ResolvedRefs stays True', async () => {
    apply(
      route(
        'omitted-backendrefs',
        [
          { matches: [{ path: { type: 'Exact', value: '/omitted-no-forward' } }] },
          { matches: [{ path: { type: 'Exact', value: '/empty-no-forward' } }], backendRefs: [] },
          { matches: [prefix('/')], backendRefs: [backend('infra-backend-v1')] },
        ],
        ['omitted.test'],
      ),
    );
    await eventually(
      '/forward',
      () => send('omitted.test', '/forward'),
      (r) => backendOf(r) === 'infra-backend-v1',
    );
    assert.equal((await send('omitted.test', '/omitted-no-forward')).status, 500);
    assert.equal((await send('omitted.test', '/empty-no-forward')).status, 500);
    await api.waitFor(
      () => {
        const conditions = parentConditions('omitted-backendrefs');
        return (
          hasCondition(conditions, 'Accepted', 'True') && hasCondition(conditions, 'ResolvedRefs', 'True')
        );
      },
      'Accepted and ResolvedRefs True',
      SETTLE_MS,
    );
    await cleanUp();
  });

  it('HTTPRouteInvalidReferenceGrant: grants that miss in from or to by group, kind, namespace or name allow nothing (500, RefNotPermitted)', async () => {
    const grant = (
      name: string,
      namespace: string,
      from: Record<string, string>,
      to: Record<string, string>,
    ) =>
      referenceGrantObject({
        name,
        namespace,
        from: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', namespace: INFRA, ...from }],
        to: [{ group: '', kind: 'Service', name: 'web-backend', ...to }],
      });
    apply(
      grant('reference-grant-wrong-namespace', INFRA, {}, {}),
      grant('reference-grant-wrong-from-group', WEB, { group: 'not-the-group-youre-looking-for' }, {}),
      grant('reference-grant-wrong-from-kind', WEB, { kind: 'Gateway' }, {}),
      grant(
        'reference-grant-wrong-from-namespace',
        WEB,
        { namespace: 'not-the-namespace-youre-looking-for' },
        {},
      ),
      grant('reference-grant-wrong-to-group', WEB, {}, { group: 'not-the-group-youre-looking-for' }),
      grant('reference-grant-wrong-to-kind', WEB, {}, { kind: 'Secret' }),
      grant('reference-grant-wrong-to-name', WEB, {}, { name: 'not-the-service-youre-looking-for' }),
      route(
        'reference-grant',
        [{ backendRefs: [{ name: 'web-backend', namespace: WEB, port: 8080 }] }],
        ['grants.test'],
      ),
    );
    await api.waitFor(
      () => {
        const conditions = parentConditions('reference-grant');
        return (
          hasCondition(conditions, 'Accepted', 'True') &&
          hasCondition(conditions, 'ResolvedRefs', 'False', 'RefNotPermitted')
        );
      },
      'RefNotPermitted',
      SETTLE_MS,
    );
    await eventually(
      '/',
      () => send('grants.test', '/'),
      (r) => r.status === 500,
    );
    await cleanUp();
  });
  it('HTTPRouteBackendProtocolH2C, HTTPRouteBackendProtocolWebSocket: a Service port of appProtocol kubernetes.io/h2c is spoken to over h2c; kubernetes.io/ws carries WebSockets', async () => {
    apply(
      route(
        'backend-protocol-h2c',
        [{ backendRefs: [{ name: 'infra-backend-h2c', port: 8081 }] }],
        ['h2c.test'],
      ),
      route(
        'backend-protocol-websocket',
        [{ backendRefs: [{ name: 'infra-backend-ws', port: 8081 }] }],
        ['ws.test'],
      ),
    );
    // HTTP/2 with prior knowledge to Tollgate, as the suite sends it; HTTP/1.1 reaches it too.
    await eventually(
      'h2c over HTTP/1.1',
      () => send('h2c.test', '/'),
      (r) => backendOf(r) === 'infra-backend-h2c',
    );
    const session = await connectHttp2(tollgate.proxyUrl);
    try {
      const res = await h2Request(session, { ':method': 'GET', ':path': '/', ':authority': 'h2c.test' });
      assert.equal(res.status, 200);
      assert.deepEqual(res.json(), { server: 'infra-backend-h2c', httpVersion: '2.0' });
    } finally {
      session.close();
    }
    await waitFor(async () => (await send('ws.test', '/')).status === 426, SETTLE_MS);
    const socket = await mustOpen(`${tollgate.proxyUrl.replace('http', 'ws')}/ws`, { host: 'ws.test' });
    try {
      socket.send('hello');
      assert.equal((await nextMessage(socket)).data.toString(), 'hello');
    } finally {
      socket.terminate();
    }
    await cleanUp();
  });
  it('HTTPRouteRequestHeaderModifierBackendWeights: each weighted backendRef sets its own headers on the requests it takes', async () => {
    const marked = (name: string) =>
      backend(name, {
        weight: 10,
        filters: [
          {
            type: 'RequestHeaderModifier',
            requestHeaderModifier: { set: [{ name: 'Backend', value: name }] },
          },
        ],
      });
    apply(
      route(
        'request-header-modifier-backend-weights',
        [
          {
            filters: [
              {
                type: 'RequestHeaderModifier',
                requestHeaderModifier: { add: [{ name: 'X-Rule', value: 'both' }] },
              },
            ],
            backendRefs: [marked('infra-backend-v1'), marked('infra-backend-v2')],
          },
        ],
        ['backend-weights.test'],
      ),
    );
    await eventually(
      'v1',
      () => send('backend-weights.test', '/'),
      (r) => backendOf(r) === 'infra-backend-v1',
    );
    await eventually(
      'v2',
      () => send('backend-weights.test', '/'),
      (r) => backendOf(r) === 'infra-backend-v2',
    );
    const counts = new Map<string, number>();
    for (let i = 0; i < 100; i++) {
      const res = await send('backend-weights.test', '/');
      const seen = res.json<{ server: string; headers: Record<string, string> }>();
      assert.equal(seen.headers.backend, seen.server, `request ${i} went to ${seen.server}`);
      assert.equal(seen.headers['x-rule'], 'both');
      counts.set(seen.server, (counts.get(seen.server) ?? 0) + 1);
    }
    assert.ok((counts.get('infra-backend-v1') ?? 0) >= 30, JSON.stringify([...counts]));
    assert.ok((counts.get('infra-backend-v2') ?? 0) >= 30, JSON.stringify([...counts]));
    await cleanUp();
  });
  it('HTTPRouteBackendURLRewrite, HTTPRouteBackendRequestRedirect: a URLRewrite or RequestRedirect on the one backendRef of a rule', async () => {
    const onBackend = (path: string, filter: Record<string, unknown>) => ({
      matches: [prefix(path)],
      backendRefs: [backend('infra-backend-v1', { filters: [filter] })],
    });
    const rewrite = (path: Record<string, unknown>) => ({ type: 'URLRewrite', urlRewrite: { path } });
    const redirect = (path: Record<string, unknown>) => ({
      type: 'RequestRedirect',
      requestRedirect: { path },
    });
    apply(
      route(
        'backend-url-rewrite',
        [
          onBackend('/full', rewrite({ type: 'ReplaceFullPath', replaceFullPath: '/rewritten-full' })),
          onBackend(
            '/prefix',
            rewrite({ type: 'ReplacePrefixMatch', replacePrefixMatch: '/rewritten-prefix' }),
          ),
        ],
        ['backend-rewrite.test'],
      ),
      route(
        'backend-request-redirect',
        [
          onBackend('/full', redirect({ type: 'ReplaceFullPath', replaceFullPath: '/redirected-full' })),
          onBackend(
            '/prefix',
            redirect({ type: 'ReplacePrefixMatch', replacePrefixMatch: '/redirected-prefix' }),
          ),
        ],
        ['backend-redirect.test'],
      ),
    );
    const upstreamUrl = async (path: string) =>
      (
        await eventually(
          path,
          () => send('backend-rewrite.test', path),
          (r) => backendOf(r) === 'infra-backend-v1',
        )
      ).json<{ url: string }>().url;
    assert.equal(await upstreamUrl('/full/original'), '/rewritten-full');
    assert.equal(await upstreamUrl('/prefix/original'), '/rewritten-prefix/original');
    const location = async (path: string) =>
      String(
        (
          await eventually(
            path,
            () => send('backend-redirect.test', path),
            (r) => r.status === 302,
          )
        ).headers.location,
      );
    assert.equal(await location('/full/original'), 'http://backend-redirect.test/redirected-full');
    assert.equal(
      await location('/prefix/original'),
      'http://backend-redirect.test/redirected-prefix/original',
    );
    await cleanUp();
  });
});
