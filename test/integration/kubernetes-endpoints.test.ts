import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { endpointSlice, type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/** Bounded on purpose: loopback only, a few clients, stopped by the test or after 60 s at most. */
const CLIENTS = 3;
const MAX_LOAD_MS = 60_000;

interface Outcome {
  startedAt: number;
  status: number;
  server: string | null;
  error: string | null;
  body: string;
}

/** Steady load on one host until stop(): every answer recorded with when its request started. */
function steadyLoad(port: number, host: string) {
  const outcomes: Outcome[] = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  let running = true;
  const deadline = Date.now() + MAX_LOAD_MS;
  const once = () =>
    new Promise<void>((resolve) => {
      const startedAt = Date.now();
      const record = (status: number, body: string, error: string | null) => {
        let server: string | null = null;
        try {
          server = String(JSON.parse(body).server);
        } catch {}
        outcomes.push({ startedAt, status, server, error, body });
        resolve();
      };
      const req = http.request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => record(res.statusCode ?? 0, body, null));
        res.on('error', (e) => record(0, body, e.message));
      });
      req.on('error', (e) => record(0, '', e.message));
      req.end();
    });
  const clients = Array.from({ length: CLIENTS }, async () => {
    while (running && Date.now() < deadline) await once();
  });
  return {
    outcomes,
    /** Answers to requests started at or after `since`. */
    since: (since: number) => outcomes.filter((o) => o.startedAt >= since),
    async stop() {
      running = false;
      await Promise.all(clients);
      agent.destroy();
    },
  };
}

/** GET / with a Host header (fetch cannot set Host). */
function get(port: number, host: string): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/', headers: { host }, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(body || '{}') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const metricValue = (text: string, series: string): number | null => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
};

describe('Service endpoints from the Kubernetes API (real process, fake API server)', () => {
  const upstreams = new Map<string, Upstream>();
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;

  /** One slice per pod: each test upstream listens on its own port, named `http` like the Service's. */
  const podSlice = (name: string, ready = true) =>
    endpointSlice({
      service: 'web',
      namespace: 'apps',
      name: `web-${name}`,
      ports: [{ name: 'http', port: (upstreams.get(name) as Upstream).port }],
      endpoints: [{ ip: '127.0.0.1', ready, serving: true, terminating: !ready, pod: `web-${name}` }],
    });

  before(async () => {
    for (const name of ['a', 'b', 'c']) upstreams.set(name, await startUpstream({ name }));
    api = await startFakeKubeApi();
    api.apply(podSlice('a'));
    api.apply(podSlice('b'));
    dir = await mkdtemp(join(tmpdir(), 'tollgate-k8s-'));
    tollgate = await startTollgate({
      main: { access_log: false, kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps') } },
      upstreams: {
        provider: 'kubernetes',
        upstreams: {
          'web.test': { paths: { '/': { service: 'web:http' } } },
          'empty.test': { paths: { '/': { service: 'nobody.apps:http' } } },
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

  it('asks the API only for the namespace the config names: one EndpointSlice watch, Service slices only', () => {
    const paths = new Set(api.requests.map((r) => `${r.path}?${r.query.labelSelector}`));
    assert.deepEqual([...paths].sort(), [
      '/apis/discovery.k8s.io/v1/namespaces/apps/endpointslices?kubernetes.io/service-name',
    ]);
  });

  it('a Service with no ready endpoint answers 503 no_ready_endpoints', async () => {
    const res = await get(tollgate.proxyPort, 'empty.test');
    assert.equal(res.status, 503);
    assert.equal(res.json.error, 'no_ready_endpoints');
  });

  it('endpoints added, made not-ready and removed shift traffic within 1 s, with no failed request', async () => {
    const load = steadyLoad(tollgate.proxyPort, 'web.test');
    try {
      await waitFor(() => new Set(load.outcomes.map((o) => o.server)).size >= 2, 10_000);
      assert.deepEqual(new Set(load.outcomes.map((o) => o.server)), new Set(['a', 'b']));

      // Added: c starts receiving requests within 1 s of the API event.
      const added = Date.now();
      api.apply(podSlice('c'));
      await waitFor(() => load.since(added).some((o) => o.server === 'c'), 10_000);
      const firstC = load.since(added).find((o) => o.server === 'c') as Outcome;
      assert.ok(
        firstC.startedAt - added < 1000,
        `c first served ${firstC.startedAt - added} ms after the event`,
      );

      // Not ready (terminating): b gets no request that started more than 1 s after the event.
      const drained = Date.now();
      api.apply(podSlice('b', false));
      await waitFor(() => {
        const recent = load.since(drained + 1000);
        return recent.length >= 30 && recent.every((o) => o.server !== 'b');
      }, 15_000);
      const lastB = load
        .since(drained)
        .filter((o) => o.server === 'b')
        .at(-1);
      assert.ok(lastB === undefined || lastB.startedAt - drained < 1000, 'b still served after 1 s');

      // Removed: a's slice deleted; only c remains.
      const removed = Date.now();
      api.delete('endpointslices', 'apps', 'web-a');
      await waitFor(() => {
        const recent = load.since(removed + 1000);
        return recent.length >= 30 && recent.every((o) => o.server === 'c');
      }, 15_000);
    } finally {
      await load.stop();
    }
    const failed = load.outcomes.filter((o) => o.status !== 200);
    assert.deepEqual(failed.slice(0, 3), [], `${failed.length} of ${load.outcomes.length} requests failed`);
    assert.ok(load.outcomes.length > 100, `only ${load.outcomes.length} requests under load`);
  });

  it('410 Gone: the watch relists and the change made while expired goes live', async () => {
    await api.waitFor(() => api.openWatches() === 1, 'the namespace watch open');
    api.expireWatches();
    api.apply(podSlice('a'));
    api.compact();
    await waitFor(async () => {
      return (await get(tollgate.proxyPort, 'web.test')).json.server === 'a';
    }, 10_000);
    const metrics = await tollgate.metrics();
    assert.ok(
      (metricValue(
        metrics,
        'tollgate_kubernetes_watch_restarts_total{resource="endpointslices",reason="gone"}',
      ) ?? 0) >= 1,
    );
  });

  it('the API server killed and restarted: the last servers keep serving, readiness unchanged, the watch resumes', async () => {
    await api.stop();
    await waitFor(
      async () =>
        metricValue(await tollgate.metrics(), 'tollgate_kubernetes_watch_up{resource="endpointslices"}') ===
        0,
      20_000,
    );
    const ready = await fetch(`${tollgate.adminUrl}/readyz`);
    assert.equal(ready.status, 200, 'readiness does not follow the API server');
    for (let i = 0; i < 6; i++) {
      const res = await get(tollgate.proxyPort, 'web.test');
      assert.equal(res.status, 200);
      assert.ok(['a', 'c'].includes(String(res.json.server)));
    }
    const down = tollgate.logs().filter((l) => String(l.msg).startsWith('kubernetes watch down'));
    assert.ok(down.length >= 1 && down.length <= 2, `one line per watch that went down, got ${down.length}`);

    await api.restart();
    await waitFor(
      async () =>
        metricValue(await tollgate.metrics(), 'tollgate_kubernetes_watch_up{resource="endpointslices"}') ===
        1,
      60_000,
    );
    api.delete('endpointslices', 'apps', 'web-c');
    await waitFor(async () => {
      return (await get(tollgate.proxyPort, 'web.test')).json.server === 'a';
    }, 10_000);
    for (let i = 0; i < 4; i++) {
      assert.equal((await get(tollgate.proxyPort, 'web.test')).json.server, 'a');
    }
    const metrics = await tollgate.metrics();
    assert.ok(
      (metricValue(metrics, 'tollgate_kubernetes_last_sync_timestamp_seconds{resource="endpointslices"}') ??
        0) > 0,
    );
    assert.ok(
      (metricValue(
        metrics,
        'tollgate_kubernetes_watch_restarts_total{resource="endpointslices",reason="unreachable"}',
      ) ?? 0) >= 1,
    );
  });
});
