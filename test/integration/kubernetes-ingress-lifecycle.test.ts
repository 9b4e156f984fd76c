import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { endpointSlice, ingress, ingressClass, service, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { request, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';
import { PROCESS_START_MS } from '../helpers/workers.ts';

const metricValue = (text: string, series: string): number | null => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
};

describe('Ingress: readiness, API outages, workers and status (built process)', () => {
  const scope = testScope();

  it('readiness waits for the Ingress watches; workers serve the routes; an outage keeps them; status from publish_service', async () => {
    const pods = new Map<string, Upstream>();
    for (const name of ['a', 'b']) pods.set(name, await scope.upstream({ name }));
    const api = scope.keep(await startFakeKubeApi());
    api.apply(ingressClass());
    for (const [name, pod] of [
      ['web', 'a'],
      ['other', 'b'],
    ] as const) {
      const port = (pods.get(pod) as Upstream).port;
      api.apply(service({ name, namespace: 'apps', ports: [{ name: 'http', port: 80, targetPort: port }] }));
      api.apply(
        endpointSlice({
          service: name,
          namespace: 'apps',
          ports: [{ name: 'http', port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
    }
    api.apply(
      service({
        name: 'tollgate',
        namespace: 'edge',
        ports: [{ name: 'http', port: 80, targetPort: 8080 }],
        loadBalancer: [{ ip: '198.51.100.20' }],
      }),
    );
    api.apply(
      ingress({
        name: 'web',
        namespace: 'apps',
        rules: [{ host: 'web.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    // The Ingress list is refused (RBAC not there yet): not ready, and no Ingress route served.
    api.failWith(403, 'ingresses');
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-ingress-life-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    const tollgate = await scope.tollgate({
      main: {
        workers: 2,
        access_log: false,
        kubernetes: {
          kubeconfig: api.writeKubeconfig(dir, 'apps'),
          ingress_class: 'tollgate',
          watch_namespaces: ['apps'],
          publish_service: 'edge/tollgate',
        },
      },
      upstreams: {
        upstreams: { 'file.test': { paths: { '/': { servers: [(pods.get('b') as Upstream).address] } } } },
      },
      env: { KUBECONFIG: '' },
      waitReady: 'listening',
    });
    const get = (host: string) => request(tollgate.proxyUrl, { headers: { host, connection: 'close' } });
    const readyz = async () => (await request(`${tollgate.adminUrl}/readyz`)).status;
    await waitFor(
      async () =>
        metricValue(await tollgate.metrics(), 'tollgate_kubernetes_watch_up{resource="ingresses"}') === 0,
      PROCESS_START_MS,
    );
    assert.equal(await readyz(), 503);
    // Only namespaced lists were asked for: watch_namespaces narrows Ingresses and Services.
    const ingressPaths = new Set(api.requests.filter((r) => r.path.includes('ingresses')).map((r) => r.path));
    assert.deepEqual([...ingressPaths], ['/apis/networking.k8s.io/v1/namespaces/apps/ingresses']);

    api.failWith(null);
    await waitFor(async () => (await readyz()) === 200, 30_000);
    // Both workers serve the Ingress route (connection: close spreads requests over them).
    const answers = await Promise.all(Array.from({ length: 20 }, () => get('web.test')));
    for (const answer of answers) assert.equal(answer.json<{ server: string }>().server, 'a');
    await waitFor(() => {
      const stored = api.get('ingresses', 'apps', 'web') as {
        status?: { loadBalancer?: { ingress?: unknown } };
      };
      return (
        JSON.stringify(stored.status?.loadBalancer?.ingress) === JSON.stringify([{ ip: '198.51.100.20' }])
      );
    });

    // The API goes away: the routes keep serving, the watch says it is down.
    await api.stop();
    await waitFor(
      async () =>
        metricValue(await tollgate.metrics(), 'tollgate_kubernetes_watch_up{resource="ingresses"}') === 0,
      30_000,
    );
    assert.equal((await get('web.test')).json<{ server: string }>().server, 'a');
    assert.equal(await readyz(), 200, 'an outage after the first sync keeps readiness');

    // Back, with a change made meanwhile: it is picked up and served by every worker.
    api.apply(
      ingress({
        name: 'web',
        namespace: 'apps',
        rules: [{ host: 'web.test', paths: [{ service: 'other', port: 80 }] }],
      }),
    );
    await api.restart();
    await waitFor(async () => {
      const again = await Promise.all(Array.from({ length: 10 }, () => get('web.test')));
      return again.every(
        (answer) => answer.status === 200 && answer.json<{ server: string }>().server === 'b',
      );
    }, 30_000);
  });
});
