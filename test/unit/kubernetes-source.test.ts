import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DiscoveryV1Api, type V1EndpointSlice } from '@kubernetes/client-node';
import { resolveServiceRef } from '../../src/config/service-ref.ts';
import { createLogger } from '../../src/log.ts';
import { connectKube } from '../../src/sources/kubernetes/kubeconfig.ts';
import { startResourceWatch, type WatchTuning } from '../../src/sources/kubernetes/resource-watch.ts';
import {
  type ConfigMapContent,
  createKubernetesSource,
  type EndpointSnapshot,
  type KubernetesSourceOptions,
} from '../../src/sources/kubernetes/source.ts';
import { createWatchHealth, type WatchMetricsSink } from '../../src/sources/kubernetes/watch-health.ts';
import type { RestartReason, WatchedResource } from '../../src/sources/kubernetes/watch-kinds.ts';
import { configMap, endpointSlice, type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';

// Short delays so retries happen within a test; the logic under test is the same as with defaults.
const TUNING: Partial<WatchTuning> = { initialBackoffMs: 20, maxBackoffMs: 200, idleTimeoutMs: 10_000 };

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-kube-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Records what the watches report, as the Prometheus families would show it. */
function recordingMetrics() {
  const up = new Map<WatchedResource, boolean>();
  const restarts: Array<{ resource: WatchedResource; reason: RestartReason }> = [];
  const lastSync = new Map<WatchedResource, number>();
  const sink: WatchMetricsSink = {
    setUp: (resource, value) => up.set(resource, value),
    restarted: (resource, reason) => restarts.push({ resource, reason }),
    setLastSync: (resource, seconds) => lastSync.set(resource, seconds),
  };
  return { sink, up, restarts, lastSync };
}

async function harness(api: FakeKubeApi, options: Partial<KubernetesSourceOptions> = {}) {
  const subdir = mkdtempSync(join(dir, 'case-'));
  const connection = connectKube({ kubeconfig: api.writeKubeconfig(subdir, 'apps'), env: {} });
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line)) });
  const metrics = recordingMetrics();
  const snapshots: EndpointSnapshot[] = [];
  const changes: Array<ReadonlySet<string>> = [];
  const contents: ConfigMapContent[] = [];
  const source = createKubernetesSource({
    connection,
    logger,
    metrics: metrics.sink,
    tuning: TUNING,
    onEndpoints: (snapshot, changed) => {
      snapshots.push(snapshot);
      changes.push(changed);
    },
    onConfigMap: (content) => contents.push(content),
    ...options,
  });
  const servers = (key: string) => (source.endpoints().get(key) ?? []).map((s) => s.raw);
  return { source, lines, metrics, snapshots, changes, contents, servers };
}

const webSlice = (endpoints: Parameters<typeof endpointSlice>[0]['endpoints'], name = 'web-abcde') =>
  endpointSlice({
    service: 'web',
    namespace: 'apps',
    name,
    ports: [{ name: 'http', port: 8080 }],
    endpoints,
  });

test("lists and watches the named Services' namespace (Service slices only) and follows their changes", async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }, { ip: '10.0.0.2', ready: false }]));
  // Objects that must change nothing: another Service of the namespace (seen by the namespace's
  // watch, not used), and the same name in another namespace (never asked for).
  api.apply(
    endpointSlice({
      service: 'db',
      namespace: 'apps',
      ports: [{ port: 5432 }],
      endpoints: [{ ip: '10.0.9.9' }],
    }),
  );
  api.apply(
    endpointSlice({
      service: 'web',
      namespace: 'other',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ ip: '10.1.0.1' }],
    }),
  );
  const h = await harness(api);
  t.after(() => h.source.close());
  assert.equal(h.source.namespace, 'apps', 'namespace from the kubeconfig context');
  h.source.watchServices([resolveServiceRef({ name: 'web', namespace: null, port: 'http' }, 'apps')]);
  await h.source.whenSynced();
  assert.deepEqual(h.servers('web.apps:http'), ['10.0.0.1:8080']);
  assert.equal(h.metrics.up.get('endpointslices'), true);
  assert.ok((h.metrics.lastSync.get('endpointslices') ?? 0) > Date.now() / 1000 - 60);

  for (const request of api.requests) {
    assert.equal(request.path, '/apis/discovery.k8s.io/v1/namespaces/apps/endpointslices');
    // One watch for the namespace: every slice that belongs to a Service, indexed by Service here.
    assert.equal(request.query.labelSelector, 'kubernetes.io/service-name');
    assert.equal(request.authorization, `Bearer ${api.token}`);
  }
  await api.waitFor(() => api.openWatches('endpointslices') === 1, 'the watch');
  const watchRequest = api.requests.find((r) => r.query.watch === 'true');
  assert.equal(watchRequest?.query.allowWatchBookmarks, 'true');
  assert.ok(watchRequest?.query.resourceVersion, 'the watch resumes from the list resourceVersion');

  api.apply(webSlice([{ ip: '10.0.0.1' }, { ip: '10.0.0.2' }]));
  await api.waitFor(() => h.servers('web.apps:http').length === 2, 'the endpoint made ready');
  assert.deepEqual(h.servers('web.apps:http'), ['10.0.0.1:8080', '10.0.0.2:8080']);

  api.apply(
    webSlice([{ ip: '10.0.0.1', ready: false, serving: true, terminating: true }, { ip: '10.0.0.2' }]),
  );
  await api.waitFor(() => h.servers('web.apps:http').length === 1, 'the terminating endpoint dropped');
  assert.deepEqual(h.servers('web.apps:http'), ['10.0.0.2:8080']);

  // A second slice for the same Service joins the first.
  api.apply(webSlice([{ ip: '10.0.0.3' }], 'web-fghij'));
  await api.waitFor(() => h.servers('web.apps:http').length === 2, 'the second slice');
  api.delete('endpointslices', 'apps', 'web-abcde');
  await api.waitFor(() => h.servers('web.apps:http').join() === '10.0.0.3:8080', 'the deleted slice');

  // An unrelated object changes nothing, so no new snapshot is published.
  const published = h.snapshots.length;
  api.apply(
    endpointSlice({
      service: 'db',
      namespace: 'apps',
      ports: [{ port: 5432 }],
      endpoints: [{ ip: '10.0.9.8' }],
    }),
  );
  api.bookmark();
  api.apply(webSlice([{ ip: '10.0.0.4' }], 'web-fghij'));
  await api.waitFor(() => h.servers('web.apps:http').join() === '10.0.0.4:8080', 'the next change');
  assert.equal(h.snapshots.length, published + 1);
  assert.equal(api.requests.filter((r) => r.query.watch !== 'true').length, 1, 'a single list');
});

test('thousands of Services: one EndpointSlice watch per namespace, a change recomputes its Service only', async (t) => {
  const api = await startFakeKubeApi({ tls: false });
  t.after(() => api.stop());
  const count = 300;
  const slice = (name: string, namespace: string, ip: string) =>
    endpointSlice({ service: name, namespace, ports: [{ name: 'http', port: 8080 }], endpoints: [{ ip }] });
  for (let i = 0; i < count; i++) api.apply(slice(`svc-${i}`, 'apps', `10.0.${i >> 8}.${i & 255}`));
  api.apply(slice('api', 'team', '10.9.0.1'));
  const h = await harness(api);
  t.after(() => h.source.close());
  const refs = [
    ...Array.from({ length: count }, (_, i) =>
      resolveServiceRef({ name: `svc-${i}`, namespace: null, port: 'http' }, 'apps'),
    ),
    resolveServiceRef({ name: 'api', namespace: 'team', port: 'http' }, 'apps'),
  ];
  h.source.watchServices(refs);
  await h.source.whenSynced();
  assert.equal(h.source.endpoints().size, count + 1);
  assert.deepEqual(h.servers(`svc-${count - 1}.apps:http`), [`10.0.1.${(count - 1) & 255}:8080`]);
  await api.waitFor(() => api.openWatches('endpointslices') === 2, 'the watches');
  const lists = api.requests.filter((r) => r.path.endsWith('/endpointslices') && r.query.watch !== 'true');
  assert.equal(lists.length, 2, 'one list per namespace, not one per Service');

  const published = h.snapshots.length;
  api.apply(slice('svc-7', 'apps', '10.8.0.7'));
  await api.waitFor(() => h.servers('svc-7.apps:http').join() === '10.8.0.7:8080', 'the change');
  assert.equal(h.snapshots.length, published + 1, 'one snapshot for one change');
  assert.deepEqual([...(h.changes.at(-1) ?? [])], ['svc-7.apps:http'], 'naming the one Service changed');
  assert.deepEqual(h.servers('svc-8.apps:http'), ['10.0.0.8:8080'], 'the other Services keep theirs');
  assert.equal(api.openWatches('endpointslices'), 2, 'still two watches');
});

test('a watch counts as synced only once its objects were handed over (readiness waits for them)', async (t) => {
  const api = await startFakeKubeApi({ tls: false });
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  const connection = connectKube({
    kubeconfig: api.writeKubeconfig(mkdtempSync(join(dir, 'case-')), 'apps'),
    env: {},
  });
  const discovery = connection.kubeConfig.makeApiClient(DiscoveryV1Api);
  const health = createWatchHealth(recordingMetrics().sink);
  let delivered = 0;
  const watch = startResourceWatch<V1EndpointSlice>({
    kubeConfig: connection.kubeConfig,
    resource: 'endpointslices',
    description: 'EndpointSlices in apps',
    path: '/apis/discovery.k8s.io/v1/namespaces/apps/endpointslices',
    list: (options) => discovery.listNamespacedEndpointSlice({ namespace: 'apps' }, options),
    onObjects: () => {
      delivered += 1;
    },
    health,
    logger: createLogger('error', { write: () => {} }),
    tuning: TUNING,
  });
  t.after(() => watch.stop());
  // Checked on every turn of the event loop: a source that sees the watch synced translates at once,
  // and must then already hold its objects (else every Service it names reads as missing).
  const seenSynced = await new Promise<number>((resolve) => {
    const check = () => {
      if (watch.synced || health.allSynced()) resolve(delivered);
      else setImmediate(check);
    };
    check();
  });
  assert.equal(seenSynced, 1, 'the objects were handed over before the watch said synced');
});

test('410 Gone: the watch relists and catches up with what changed meanwhile', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  const h = await harness(api);
  t.after(() => h.source.close());
  h.source.watchServices([resolveServiceRef({ name: 'web', namespace: null, port: 'http' }, 'apps')]);
  await h.source.whenSynced();
  await api.waitFor(() => api.openWatches() === 1, 'the watch');

  // Expire the watch, and change things while no watch is open: only a relist can see it.
  api.expireWatches();
  api.apply(webSlice([{ ip: '10.0.0.5' }]));
  api.compact();
  await api.waitFor(() => h.servers('web.apps:http').join() === '10.0.0.5:8080', 'the relisted state');
  assert.ok(h.metrics.restarts.some((r) => r.reason === 'gone'));
  assert.equal(api.requests.filter((r) => r.query.watch !== 'true').length >= 2, true, 'listed again');
  assert.equal(h.metrics.up.get('endpointslices'), true, 'a 410 is routine, not an outage');
});

test('a dropped watch resumes from its resourceVersion without a relist', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  const h = await harness(api);
  t.after(() => h.source.close());
  h.source.watchServices([resolveServiceRef({ name: 'web', namespace: null, port: 8080 }, 'apps')]);
  await h.source.whenSynced();
  await api.waitFor(() => api.openWatches() === 1, 'the watch');
  api.apply(webSlice([{ ip: '10.0.0.2' }]));
  await api.waitFor(() => h.servers('web.apps:8080').join() === '10.0.0.2:8080', 'the change');
  const watchesBefore = api.requests.filter((r) => r.query.watch === 'true').length;
  api.dropWatches();
  // Written while the connection is down: the resumed watch replays it from history.
  api.apply(webSlice([{ ip: '10.0.0.3' }]));
  await api.waitFor(
    () => h.servers('web.apps:8080').join() === '10.0.0.3:8080',
    'the change made while dropped',
  );
  const resumed = api.requests.filter((r) => r.query.watch === 'true')[watchesBefore];
  assert.ok(resumed && Number(resumed.query.resourceVersion) > 0, 'resumed from a resourceVersion');
  assert.equal(api.requests.filter((r) => r.query.watch !== 'true').length, 1, 'no relist');
  assert.ok(h.metrics.restarts.some((r) => r.reason === 'closed'));
});

test('403 and 500: the last servers stay, the watch is down, one log line per state change', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  const h = await harness(api);
  t.after(() => h.source.close());
  h.source.watchServices([resolveServiceRef({ name: 'web', namespace: null, port: 'http' }, 'apps')]);
  await h.source.whenSynced();
  await api.waitFor(() => api.openWatches() === 1, 'the watch');

  api.failWith(403);
  api.dropWatches();
  await api.waitFor(() => h.metrics.restarts.filter((r) => r.reason === 'forbidden').length >= 3, 'retries');
  assert.equal(h.metrics.up.get('endpointslices'), false);
  assert.deepEqual(h.servers('web.apps:http'), ['10.0.0.1:8080'], 'last known servers kept');
  api.failWith(500);
  await api.waitFor(() => h.metrics.restarts.some((r) => r.reason === 'server_error'), 'a 500');

  api.failWith(null);
  api.apply(webSlice([{ ip: '10.0.0.2' }]));
  await api.waitFor(() => h.servers('web.apps:http').join() === '10.0.0.2:8080', 'recovery');
  await api.waitFor(() => h.metrics.up.get('endpointslices') === true, 'up again');
  const states = h.lines.filter((l) => /kubernetes watch (up|down)/.test(String(l.msg))).map((l) => l.msg);
  assert.deepEqual(states, [
    'kubernetes watch up',
    'kubernetes watch down; serving the last known state',
    'kubernetes watch up',
  ]);
  const down = h.lines.find((l) => String(l.msg).startsWith('kubernetes watch down'));
  assert.equal(down?.reason, 'forbidden');
  assert.match(String(down?.error), /^HTTP 403: /);
  assert.doesNotMatch(JSON.stringify(h.lines), new RegExp(api.token), 'the token is never logged');
});

test('the API server stops and comes back: servers kept, the watch resumes and sees later changes', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  const h = await harness(api);
  t.after(() => h.source.close());
  h.source.watchServices([resolveServiceRef({ name: 'web', namespace: null, port: 'http' }, 'apps')]);
  await h.source.whenSynced();
  await api.waitFor(() => api.openWatches() === 1, 'the watch');
  await api.stop();
  await api.waitFor(() => h.metrics.restarts.some((r) => r.reason === 'unreachable'), 'a refused retry');
  assert.equal(h.metrics.up.get('endpointslices'), false);
  assert.deepEqual(h.servers('web.apps:http'), ['10.0.0.1:8080']);
  assert.equal(h.source.synced(), true, 'still synced: readiness does not depend on the API staying up');
  await api.restart();
  await api.waitFor(() => api.openWatches() === 1, 'the watch reopened');
  api.apply(webSlice([{ ip: '10.0.0.7' }]));
  await api.waitFor(
    () => h.servers('web.apps:http').join() === '10.0.0.7:8080',
    'a change after the restart',
  );
  assert.equal(h.metrics.up.get('endpointslices'), true);
});

test('a silent watch is reopened after the idle timeout', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  const h = await harness(api, { tuning: { ...TUNING, idleTimeoutMs: 300 } });
  t.after(() => h.source.close());
  api.silenceWatches(true);
  h.source.watchServices([resolveServiceRef({ name: 'web', namespace: null, port: 'http' }, 'apps')]);
  await h.source.whenSynced();
  // Changes reach no open stream while it is silent; once reopened, the watch replays them.
  api.apply(webSlice([{ ip: '10.0.0.2' }]));
  await api.waitFor(() => h.metrics.restarts.some((r) => r.reason === 'timeout'), 'the idle timeout');
  api.silenceWatches(false);
  await api.waitFor(
    () => h.servers('web.apps:http').join() === '10.0.0.2:8080',
    'the change after reopening',
  );
});

test('watchServices starts and stops watches as the config names Services', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  api.apply(
    endpointSlice({
      service: 'api',
      namespace: 'team',
      ports: [{ name: 'http', port: 80 }],
      endpoints: [{ ip: '10.2.0.1' }],
    }),
  );
  const h = await harness(api);
  t.after(() => h.source.close());
  const web = resolveServiceRef({ name: 'web', namespace: null, port: 'http' }, 'apps');
  const teamApi = resolveServiceRef({ name: 'api', namespace: 'team', port: 80 }, 'apps');
  h.source.watchServices([web]);
  await h.source.whenSynced();
  await api.waitFor(() => api.openWatches() === 1, 'one watch');
  h.source.watchServices([web, teamApi]);
  assert.equal(h.source.synced(), false, 'a new watch has not listed yet');
  await h.source.whenSynced();
  assert.deepEqual(h.servers('api.team:80'), ['10.2.0.1:80']);
  assert.ok(api.requests.some((r) => r.path === '/apis/discovery.k8s.io/v1/namespaces/team/endpointslices'));
  await api.waitFor(() => api.openWatches() === 2, 'two watches');
  h.source.watchServices([teamApi]);
  await api.waitFor(() => api.openWatches() === 1, 'the web watch closed');
  assert.equal(h.source.endpoints().has('web.apps:http'), false);
});

test('upstreams ConfigMap: read by name through a field selector, followed, problems reported', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(
    configMap({
      name: 'tollgate-upstreams',
      namespace: 'apps',
      data: { 'upstreams.yaml': 'provider: file\n' },
    }),
  );
  api.apply(configMap({ name: 'unrelated', namespace: 'apps', data: { 'upstreams.yaml': 'nope' } }));
  const h = await harness(api, { upstreamsConfigMap: 'tollgate-upstreams' });
  t.after(() => h.source.close());
  await h.source.whenSynced();
  assert.deepEqual(h.source.configMap(), { ok: true, text: 'provider: file\n' });
  const list = api.requests.find((r) => r.query.watch !== 'true');
  assert.equal(list?.path, '/api/v1/namespaces/apps/configmaps');
  assert.equal(list?.query.fieldSelector, 'metadata.name=tollgate-upstreams');

  api.apply(
    configMap({
      name: 'tollgate-upstreams',
      namespace: 'apps',
      data: { 'upstreams.yaml': 'provider: kubernetes\n' },
    }),
  );
  await api.waitFor(() => h.contents.length === 2, 'the update');
  assert.deepEqual(h.contents[1], { ok: true, text: 'provider: kubernetes\n' });
  api.apply(configMap({ name: 'unrelated', namespace: 'apps', data: { 'upstreams.yaml': 'still nope' } }));
  api.apply(configMap({ name: 'tollgate-upstreams', namespace: 'apps', data: { other: 'x' } }));
  await api.waitFor(() => h.contents.length === 3, 'the key removed');
  assert.deepEqual(h.contents[2], {
    ok: false,
    problem: "ConfigMap apps/tollgate-upstreams has no 'upstreams.yaml' key",
  });
  api.delete('configmaps', 'apps', 'tollgate-upstreams');
  await api.waitFor(() => h.contents.length === 4, 'the deletion');
  assert.deepEqual(h.contents[3], { ok: false, problem: 'ConfigMap apps/tollgate-upstreams does not exist' });
});

test('RBAC missing at start: not synced (not ready), the API message logged, synced once granted', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  api.failWith(403, 'endpointslices');
  const h = await harness(api);
  t.after(() => h.source.close());
  h.source.watchServices([resolveServiceRef({ name: 'web', namespace: null, port: 'http' }, 'apps')]);
  await api.waitFor(
    () => h.metrics.restarts.filter((r) => r.reason === 'forbidden').length >= 2,
    'refused lists',
  );

  assert.equal(h.source.synced(), false);
  assert.equal(h.source.endpoints().size, 0);
  const down = h.lines.filter((l) => String(l.msg).startsWith('kubernetes watch down'));
  assert.equal(down.length, 1, 'logged once, not once per retry');
  assert.match(
    String(down[0]?.error),
    /HTTP 403: endpointslices is forbidden: User "system:serviceaccount:apps:tollgate"/,
  );
  api.failWith(null);
  await h.source.whenSynced();
  assert.deepEqual(h.servers('web.apps:http'), ['10.0.0.1:8080']);
});

test('a slow API server: a list that does not answer is abandoned and retried', async (t) => {
  const api = await startFakeKubeApi();
  t.after(() => api.stop());
  api.apply(webSlice([{ ip: '10.0.0.1' }]));
  api.hangRequests(true);
  const h = await harness(api, { tuning: { ...TUNING, listTimeoutMs: 200 } });
  t.after(() => h.source.close());
  h.source.watchServices([resolveServiceRef({ name: 'web', namespace: null, port: 'http' }, 'apps')]);
  await api.waitFor(
    () => h.metrics.restarts.filter((r) => r.reason === 'timeout').length >= 2,
    'list timeouts',
  );
  assert.equal(h.source.synced(), false);
  assert.equal(h.metrics.up.get('endpointslices'), false, 'a list that times out is an outage');
  api.hangRequests(false);
  await h.source.whenSynced();
  assert.deepEqual(h.servers('web.apps:http'), ['10.0.0.1:8080']);
});
