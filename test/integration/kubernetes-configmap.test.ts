import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { configMap, endpointSlice, type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/** Which upstream answers GET / on this host (fetch cannot set Host). */
function serverFor(port: number, host: string): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/', headers: { host }, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => {
          try {
            resolve(res.statusCode === 200 ? String(JSON.parse(body).server) : null);
          } catch {
            resolve(null);
          }
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const metricValue = (text: string, series: string): number =>
  Number(
    text
      .split('\n')
      .find((l) => l.startsWith(`${series} `))
      ?.slice(series.length + 1) ?? 0,
  );

const routeTo = (upstream: Upstream) =>
  stringify({ upstreams: { 'cm.test': { paths: { '/': { servers: [upstream.address] } } } } });

describe('upstreams.yaml from a ConfigMap through the API (real process, fake API server)', () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  const up = (name: string) => upstreams.get(name) as Upstream;
  const putConfigMap = (text: string | null) =>
    api.apply(
      configMap({
        name: 'tollgate-upstreams',
        namespace: 'apps',
        data: text === null ? { other: 'x' } : { 'upstreams.yaml': text },
      }),
    );

  before(async () => {
    for (const name of ['file', 'a', 'b', 'c']) upstreams.set(name, await startUpstream({ name }));
    api = await startFakeKubeApi();
    putConfigMap(routeTo(up('a')));
    dir = await mkdtemp(join(tmpdir(), 'tollgate-k8s-cm-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        kubernetes: {
          kubeconfig: api.writeKubeconfig(dir, 'apps'),
          upstreams_configmap: 'tollgate-upstreams',
        },
      },
      // What the mounted file says at start; the API's copy replaces it before readiness.
      upstreams: routeTo(up('file')),
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await Promise.all([...upstreams.values()].map((u) => u.close()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('ready means the ConfigMap read through the API is live, read by name in the namespace', async () => {
    assert.equal(await serverFor(tollgate.proxyPort, 'cm.test'), 'a');
    const requests = new Set(api.requests.map((r) => `${r.path}?${r.query.fieldSelector}`));
    assert.deepEqual([...requests], ['/api/v1/namespaces/apps/configmaps?metadata.name=tollgate-upstreams']);
  });

  it('an edit through the API is live within 1 s', async () => {
    const edited = Date.now();
    putConfigMap(routeTo(up('b')));
    await waitFor(async () => (await serverFor(tollgate.proxyPort, 'cm.test')) === 'b', 10_000);
    const elapsed = Date.now() - edited;
    assert.ok(elapsed < 1000, `live after ${elapsed} ms`);
  });

  it('an invalid ConfigMap, or one without the key, is kept out: the last good config keeps serving', async () => {
    const failuresBefore = metricValue(
      await tollgate.metrics(),
      'tollgate_config_reloads_total{file="upstreams.yaml",result="failure"}',
    );
    putConfigMap('upstreams:\n  cm.test:\n    paths:\n      /:\n        servrs: ["127.0.0.1:1"]\n');
    await waitFor(
      async () =>
        metricValue(
          await tollgate.metrics(),
          'tollgate_config_reloads_total{file="upstreams.yaml",result="failure"}',
        ) > failuresBefore,
      10_000,
    );
    // Named where the user has to look: the ConfigMap and its key, with line and column.
    await waitFor(() =>
      tollgate
        .logs()
        .some((l) =>
          String(l.msg).startsWith(
            "configmap/apps/tollgate-upstreams/upstreams.yaml:5:9: upstreams.cm.test.paths./.servrs: unknown key 'servrs'",
          ),
        ),
    );
    assert.equal(await serverFor(tollgate.proxyPort, 'cm.test'), 'b');
    putConfigMap(null);
    await waitFor(
      async () =>
        metricValue(
          await tollgate.metrics(),
          'tollgate_config_reloads_total{file="upstreams.yaml",result="failure"}',
        ) >
        failuresBefore + 1,
      10_000,
    );
    assert.equal(await serverFor(tollgate.proxyPort, 'cm.test'), 'b');
    assert.equal((await fetch(`${tollgate.adminUrl}/readyz`)).status, 200);
  });

  it('a ConfigMap that switches to service: paths starts the watches it names', async () => {
    api.apply(
      endpointSlice({
        service: 'web',
        namespace: 'apps',
        ports: [{ name: 'http', port: up('c').port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    putConfigMap(
      stringify({
        provider: 'kubernetes',
        upstreams: { 'cm.test': { paths: { '/': { service: 'web:http' } } } },
      }),
    );
    await waitFor(async () => (await serverFor(tollgate.proxyPort, 'cm.test')) === 'c', 10_000);
    assert.ok(
      api.requests.some((r) => r.path.endsWith('/namespaces/apps/endpointslices')),
      'the EndpointSlice watch started',
    );
  });
});

describe('readiness waits for the first sync of every watch (real process)', () => {
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let upstream: Upstream;

  before(async () => {
    upstream = await startUpstream({ name: 'pod' });
    api = await startFakeKubeApi();
    api.apply(
      endpointSlice({
        service: 'web',
        namespace: 'apps',
        ports: [{ name: 'http', port: upstream.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    api.failWith(403);
    dir = await mkdtemp(join(tmpdir(), 'tollgate-k8s-ready-'));
    tollgate = await startTollgate({
      main: { kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps') } },
      upstreams: {
        provider: 'kubernetes',
        upstreams: { 'web.test': { paths: { '/': { service: 'web:http' } } } },
      },
      env: { KUBECONFIG: '' },
      waitReady: 'listening',
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('503 while the API refuses (RBAC missing), with the refusal logged once; 200 once listed', async () => {
    await waitFor(
      () => tollgate.logs().some((l) => String(l.msg).startsWith('kubernetes watch down')),
      20_000,
    );
    assert.equal((await fetch(`${tollgate.adminUrl}/readyz`)).status, 503);
    const down = tollgate.logs().find((l) => String(l.msg).startsWith('kubernetes watch down'));
    assert.equal(down?.reason, 'forbidden');
    assert.match(String(down?.error), /cannot list resource "endpointslices" in the namespace "apps"/);
    // Serving does not wait for readiness: the route exists, its Service has no known endpoint yet.
    assert.equal(await serverFor(tollgate.proxyPort, 'web.test'), null);

    api.failWith(null);
    await waitFor(async () => (await fetch(`${tollgate.adminUrl}/readyz`)).status === 200, 60_000);
    assert.equal(await serverFor(tollgate.proxyPort, 'web.test'), 'pod');
    assert.equal(tollgate.logs().filter((l) => String(l.msg).startsWith('kubernetes watch down')).length, 1);
  });
});

describe('upstreams_configmap with no upstreams.yaml file mounted', () => {
  let api: FakeKubeApi;
  let dir: string;
  let upstream: Upstream;
  let tollgate: Tollgate | undefined;

  before(async () => {
    upstream = await startUpstream({ name: 'from-api' });
    api = await startFakeKubeApi();
    dir = await mkdtemp(join(tmpdir(), 'tollgate-k8s-nofile-'));
  });
  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('starts, answers /readyz 503 until the ConfigMap arrives, then serves it', async () => {
    tollgate = await startTollgate({
      main: {
        kubernetes: {
          kubeconfig: api.writeKubeconfig(dir, 'apps'),
          upstreams_configmap: 'tollgate-upstreams',
        },
      },
      upstreams: '',
      // Nothing is written there: the file is not mounted.
      upstreamsPath: join(dir, 'not-mounted', 'upstreams.yaml'),
      env: { KUBECONFIG: '' },
      waitReady: 'listening',
    });
    const running = tollgate;
    const readyz = async () => (await fetch(`${running.adminUrl}/readyz`)).status;
    const exited = () => (running.child.exitCode !== null ? `exited: ${running.stderr()}` : null);
    // Listening, and the ConfigMap watch has listed (finding nothing): still not ready.
    await waitFor(async () => (await readyz()) === 503, 30_000, exited);
    await waitFor(
      () => api.requests.some((r) => r.path === '/api/v1/namespaces/apps/configmaps'),
      30_000,
      exited,
    );
    await waitFor(
      () => running.logs().some((l) => String(l.msg).startsWith('no upstreams.yaml file')),
      10_000,
    );
    assert.equal(await readyz(), 503);

    api.apply(
      configMap({
        name: 'tollgate-upstreams',
        namespace: 'apps',
        data: { 'upstreams.yaml': routeTo(upstream) },
      }),
    );
    await waitFor(async () => (await readyz()) === 200, 10_000, exited);
    assert.equal(await serverFor(running.proxyPort, 'cm.test'), 'from-api');
  });
});
