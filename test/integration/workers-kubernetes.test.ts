import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { endpointSlice, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { request, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';
import { accessLinesByWorker, PROCESS_START_MS } from '../helpers/workers.ts';

describe('workers: Service endpoints from the Kubernetes API reach every worker', () => {
  const scope = testScope();

  it('the primary alone watches the API; endpoint changes are served by every worker', async () => {
    const pods = new Map<string, Upstream>();
    for (const name of ['a', 'b', 'c']) pods.set(name, await scope.upstream({ name }));
    const podSlice = (name: string) =>
      endpointSlice({
        service: 'web',
        namespace: 'apps',
        name: `web-${name}`,
        ports: [{ name: 'http', port: (pods.get(name) as Upstream).port }],
        endpoints: [{ ip: '127.0.0.1', ready: true, serving: true, terminating: false, pod: `web-${name}` }],
      });
    const api = scope.keep(await startFakeKubeApi());
    api.apply(podSlice('a'));
    api.apply(podSlice('b'));
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-workers-k8s-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    const tollgate = await scope.tollgate({
      main: { workers: 2, kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps') } },
      upstreams: {
        provider: 'kubernetes',
        upstreams: { 'web.test': { paths: { '/': { service: 'web:http' } } } },
      },
      env: { KUBECONFIG: '' },
      readyTimeoutMs: PROCESS_START_MS,
    });
    /** Which pods answered 40 requests, each on a connection of its own (both workers take some). */
    const servedBy = async () => {
      const answers = await Promise.all(
        Array.from({ length: 40 }, () =>
          request(tollgate.proxyUrl, { headers: { host: 'web.test', connection: 'close' } }),
        ),
      );
      for (const answer of answers) assert.equal(answer.status, 200, answer.body);
      return new Set(answers.map((answer) => answer.json<{ server: string }>().server));
    };
    const ready = async () => (await request(`${tollgate.adminUrl}/readyz`)).status === 200;

    assert.deepEqual(await servedBy(), new Set(['a', 'b']));
    // One watch per resource: the primary's, not one per worker.
    await api.waitFor(() => api.openWatches() === 1, 'one EndpointSlice watch');

    api.apply(podSlice('c'));
    api.delete('endpointslices', 'apps', 'web-a');
    // Once every worker confirmed the new servers readiness is back, and no worker still sends to a.
    await waitFor(async () => {
      const served = await servedBy();
      return served.has('c') && !served.has('a');
    }, PROCESS_START_MS);
    await waitFor(ready, PROCESS_START_MS);
    assert.deepEqual(await servedBy(), new Set(['b', 'c']));
    assert.equal(accessLinesByWorker(tollgate).size, 2);
    assert.equal(api.openWatches(), 1);
  });
});
