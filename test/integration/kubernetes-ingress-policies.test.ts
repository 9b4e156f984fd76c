import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  endpointSlice,
  type FakeKubeApi,
  ingress,
  ingressClass,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * The ingress-nginx annotations of the request policies (docs/ingress.md#request-policies) through
 * the built process and the fake API server: they serve the same policies as upstreams.yaml's keys.
 */

const SETTLE_MS = 10_000;
const NGINX = 'nginx.ingress.kubernetes.io/';

describe('request policy annotations on Ingresses', () => {
  let upstream: Upstream;
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;

  const send = (
    host: string,
    path: string,
    options: { method?: string; headers?: Record<string, string>; body?: string } = {},
  ) => request(`${tollgate.proxyUrl}${path}`, { ...options, headers: { host, ...options.headers } });
  const settled = async (host: string, path: string, expected: (res: SimpleResponse) => boolean) => {
    let last: SimpleResponse | null = null;
    try {
      await waitFor(async () => {
        last = await send(host, path);
        return expected(last);
      }, SETTLE_MS);
    } catch {
      const seen = last as SimpleResponse | null;
      assert.fail(`${host}${path} not as expected (last: ${seen?.status} ${seen?.body})`);
    }
  };
  const serve = (
    name: string,
    host: string,
    annotations: Record<string, string>,
    path = '/',
    pathType?: 'Prefix' | 'ImplementationSpecific',
  ) =>
    api.apply(
      ingress({
        name,
        namespace: 'apps',
        annotations,
        rules: [{ host, paths: [{ path, pathType, service: 'web', port: 80 }] }],
      }),
    );

  before(async () => {
    upstream = await startUpstream({ name: 'web' });
    api = await startFakeKubeApi();
    api.apply(ingressClass());
    api.apply(
      service({
        name: 'web',
        namespace: 'apps',
        ports: [{ name: 'http', port: 80, targetPort: upstream.port }],
      }),
    );
    api.apply(
      endpointSlice({
        service: 'web',
        namespace: 'apps',
        ports: [{ name: 'http', port: upstream.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    dir = await mkdtemp(join(tmpdir(), 'tollgate-ingress-policies-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps'), ingress_class: 'tollgate' },
      },
      upstreams: { upstreams: { 'file.test': { paths: { '/': { servers: [upstream.address] } } } } },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('rewrite-target with a regex path and its captures; x-forwarded-prefix replaces the client copy', async () => {
    serve(
      'rewrite',
      'rewrite.test',
      { [`${NGINX}rewrite-target`]: '/$2', [`${NGINX}x-forwarded-prefix`]: '/api' },
      '/api(/|$)(.*)',
      'ImplementationSpecific',
    );
    await settled('rewrite.test', '/api/users?page=2', (res) => res.status === 200);
    const res = await send('rewrite.test', '/api/users?page=2', {
      headers: { 'x-forwarded-prefix': '/evil' },
    });
    assert.equal(res.json().url, '/users?page=2');
    assert.equal((res.json().headers as Record<string, string>)['x-forwarded-prefix'], '/api');
    assert.equal((await send('rewrite.test', '/api')).json().url, '/');
    assert.equal((await send('rewrite.test', '/apix')).status, 404, 'not under /api on a segment boundary');
  });

  it('use-regex: a regex path, once a 404, is served when the expression matches', async () => {
    serve(
      'regex',
      'regex.test',
      { [`${NGINX}use-regex`]: 'true' },
      '/v[0-9]+/items',
      'ImplementationSpecific',
    );
    await settled('regex.test', '/v2/items', (res) => res.status === 200);
    assert.equal(
      (await send('regex.test', '/V2/items/7')).json().url,
      '/V2/items/7',
      'case-insensitive, prefix',
    );
    assert.equal((await send('regex.test', '/vx/items')).status, 404);
  });

  it('app-root redirects / with 302', async () => {
    serve('root', 'root.test', { [`${NGINX}app-root`]: '/app' });
    await settled('root.test', '/', (res) => res.status === 302);
    const res = await send('root.test', '/?a=1');
    assert.equal(res.headers.location, '/app?a=1');
    assert.equal((await send('root.test', '/app')).status, 200);
  });

  it('proxy-body-size in ingress-nginx units', async () => {
    serve('body', 'body.test', { [`${NGINX}proxy-body-size`]: '1k' });
    await settled('body.test', '/', (res) => res.status === 200);
    const big = await send('body.test', '/up', { method: 'POST', body: 'x'.repeat(1025) });
    assert.equal(big.status, 413);
    assert.equal(big.json().error, 'body_too_large');
    assert.equal(
      (await send('body.test', '/up', { method: 'POST', body: 'x'.repeat(1024) })).json().bodyBytes,
      1024,
    );
  });

  it('enable-cors with cors-* and ingress-nginx defaults', async () => {
    serve('cors', 'cors.test', {
      [`${NGINX}enable-cors`]: 'true',
      [`${NGINX}cors-allow-origin`]: 'https://app.example.com',
      [`${NGINX}cors-expose-headers`]: 'X-Request-Id',
    });
    await settled('cors.test', '/', (res) => res.status === 200);
    const preflight = await send('cors.test', '/x', {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'PUT' },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers['access-control-allow-origin'], 'https://app.example.com');
    assert.equal(preflight.headers['access-control-allow-methods'], 'GET, PUT, POST, DELETE, PATCH, OPTIONS');
    assert.equal(preflight.headers['access-control-allow-credentials'], 'true');
    assert.equal(preflight.headers['access-control-max-age'], '1728000');
    const get = await send('cors.test', '/x', { headers: { origin: 'https://app.example.com' } });
    assert.equal(get.headers['access-control-expose-headers'], 'X-Request-Id');
    const other = await send('cors.test', '/x', { headers: { origin: 'https://evil.test' } });
    assert.equal(other.headers['access-control-allow-origin'], undefined);
  });

  it('whitelist-source-range and denylist-source-range: 403 source_denied', async () => {
    serve('allow', 'allow.test', { [`${NGINX}whitelist-source-range`]: '10.0.0.0/8, 192.0.2.0/24' });
    serve('deny', 'deny.test', { [`${NGINX}denylist-source-range`]: '127.0.0.0/8' });
    serve('local', 'local.test', { [`${NGINX}whitelist-source-range`]: '127.0.0.1/32' });
    await settled('allow.test', '/', (res) => res.status === 403 && res.json().error === 'source_denied');
    await settled('deny.test', '/', (res) => res.status === 403 && res.json().error === 'source_denied');
    await settled('local.test', '/', (res) => res.status === 200);
  });

  it('a value it cannot honour leaves the Ingress out; the Event names the annotation and why', async () => {
    serve('broken', 'broken.test', {
      [`${NGINX}proxy-body-size`]: '8q',
      [`${NGINX}enable-cors`]: 'true',
      [`${NGINX}cors-allow-origin`]: '*',
      [`${NGINX}cors-allow-credentials`]: 'true',
    });
    await waitFor(() =>
      api.events.some((e) => e.involvedObject.name === 'broken' && e.reason === 'Rejected'),
    );
    const message = api.events.find((e) => e.involvedObject.name === 'broken')?.message ?? '';
    assert.match(message, /proxy-body-size: '8q' is not a size/);
    serve('broken-cors', 'broken-cors.test', {
      [`${NGINX}enable-cors`]: 'true',
      [`${NGINX}cors-allow-origin`]: '*',
      [`${NGINX}cors-allow-credentials`]: 'true',
    });
    await waitFor(() =>
      api.events.some((e) => e.involvedObject.name === 'broken-cors' && e.reason === 'Rejected'),
    );
    assert.match(
      api.events.find((e) => e.involvedObject.name === 'broken-cors')?.message ?? '',
      /cors-\*: '\*' with allow_credentials/,
    );
    // An access rule it cannot honour closes the paths rather than leaving them to another route.
    serve('broken-range', 'broken-range.test', { [`${NGINX}whitelist-source-range`]: '10.0.0.0/33' });
    await settled(
      'broken-range.test',
      '/',
      (res) => res.status === 503 && res.json().error === 'auth_misconfigured',
    );
    await waitFor(() =>
      api.events.some((e) => e.involvedObject.name === 'broken-range' && e.type === 'Warning'),
    );
    assert.match(
      api.events.find((e) => e.involvedObject.name === 'broken-range')?.message ?? '',
      /whitelist-source-range: '10\.0\.0\.0\/33': the prefix length must be 0-32/,
    );
    // Left out, their hosts stay theirs, held closed (docs/ingress.md#host-ownership).
    assert.equal((await send('broken.test', '/')).status, 503);
    assert.equal((await send('broken-cors.test', '/')).status, 503);
  });
});
