import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import {
  endpointSlice,
  type FakeKubeApi,
  ingress,
  ingressClass,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { request, type SimpleResponse, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { PROCESS_START_MS } from '../helpers/workers.ts';

/** How long a change may take to show on a loaded machine (docs/ingress.md promises 1 s; not the subject here). */
const SETTLE_MS = 10_000;

/** `count` distinct addresses nothing is ever sent to (no request goes to big.test). */
const addresses = (count: number, second: number) =>
  Array.from({ length: count }, (_, i) => `10.${second}.${i >> 8}.${i & 255}:80`);

/**
 * upstreams.yaml holding 49,999 route servers, one under the 50,000 cap (docs/security.md), in a few
 * kilobytes: 49 paths share one list of 1,000 servers by alias (each use counts), one path has 999.
 */
function nearlyFullUpstreams(last = 999): string {
  const lines = ['upstreams:', '  big.test:', '    paths:'];
  lines.push(`      /p0:`, `        servers: &s [${addresses(1000, 1).join(', ')}]`);
  for (let i = 1; i < 49; i++) lines.push(`      /p${i}:`, '        servers: *s');
  lines.push('      /last:', `        servers: [${addresses(last, 2).join(', ')}]`);
  return `${lines.join('\n')}\n`;
}

/**
 * The compiled-size cap holds for the table with the Kubernetes routes, not only for upstreams.yaml
 * (sources/kubernetes/merge.ts): a change that would break it is refused with one error line, and the
 * last table that passed keeps serving.
 */
describe('the merged routing table is validated (built process, fake API)', () => {
  const scope = testScope();
  let api: FakeKubeApi;
  let tollgate: Tollgate;

  const get = (host: string): Promise<SimpleResponse> =>
    request(`${tollgate.proxyUrl}/`, { headers: { host } });
  const serverOf = (res: SimpleResponse) =>
    res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  const refusals = () =>
    tollgate.logs().filter((line) => String(line.msg).startsWith('kubernetes routes refused'));

  before(async () => {
    const app = await scope.upstream({ name: 'app' });
    api = scope.keep(await startFakeKubeApi());
    api.apply(ingressClass());
    api.apply(
      service({ name: 'app', namespace: 'apps', ports: [{ name: 'http', port: 80, targetPort: app.port }] }),
    );
    api.apply(
      endpointSlice({
        service: 'app',
        namespace: 'apps',
        ports: [{ name: 'http', port: app.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-merge-validation-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    tollgate = await scope.tollgate({
      main: {
        access_log: false,
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps'), ingress_class: 'tollgate' },
      },
      upstreams: nearlyFullUpstreams(),
      env: { KUBECONFIG: '' },
      readyTimeoutMs: PROCESS_START_MS,
    });
  });

  it('an Ingress that would take the table past the cap is refused; the last table that passed keeps serving', async () => {
    // 49,999 + 1: exactly the cap, served.
    api.apply(
      ingress({
        name: 'first',
        namespace: 'apps',
        rules: [{ host: 'first.test', paths: [{ path: '/', service: 'app', port: 80 }] }],
      }),
    );
    await waitFor(async () => serverOf(await get('first.test')) === 'app', SETTLE_MS);
    assert.equal(refusals().length, 0);

    // One more path: 50,001 route servers. Refused, said once, in one line naming the count and the cap.
    api.apply(
      ingress({
        name: 'second',
        namespace: 'apps',
        rules: [{ host: 'second.test', paths: [{ path: '/', service: 'app', port: 80 }] }],
      }),
    );
    await waitFor(() => refusals().length > 0, SETTLE_MS);
    const [line] = refusals();
    assert.equal(line?.level, 'error');
    assert.match(String(line?.msg), /would hold 50001 route servers .*more than 50000/);
    assert.match(String(line?.msg), /the previous routing table keeps serving/);
    assert.equal((await get('second.test')).status, 404);
    assert.equal(serverOf(await get('first.test')), 'app');

    // Endpoint changes still reach the table that serves, and the refusal is not said again.
    const other = await scope.upstream({ name: 'app-2' });
    api.apply(
      service({
        name: 'app',
        namespace: 'apps',
        ports: [{ name: 'http', port: 80, targetPort: other.port }],
      }),
    );
    api.apply(
      endpointSlice({
        service: 'app',
        namespace: 'apps',
        ports: [{ name: 'http', port: other.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    await waitFor(async () => serverOf(await get('first.test')) === 'app-2', SETTLE_MS);
    assert.equal((await get('second.test')).status, 404);
    assert.equal(refusals().length, 1);

    // Back under the cap: the waiting Ingress is served.
    api.delete('ingresses', 'apps', 'first');
    await waitFor(async () => serverOf(await get('second.test')) === 'app-2', SETTLE_MS);
    assert.ok(tollgate.logs().some((entry) => entry.msg === 'kubernetes routes accepted again'));

    // An upstreams.yaml within the cap alone (50,000) that leaves no room for the Ingress served: the
    // reload is refused like an invalid file, and the previous config keeps serving.
    await tollgate.writeUpstreams(nearlyFullUpstreams(1000));
    await waitFor(
      () =>
        tollgate
          .logs()
          .some((entry) => entry.msg === 'upstreams.yaml not reloaded; the previous config keeps serving'),
      SETTLE_MS,
    );
    assert.ok(
      tollgate
        .logs()
        .some((entry) => entry.level === 'error' && /would hold 50001 route servers/.test(String(entry.msg))),
    );
    assert.equal(serverOf(await get('second.test')), 'app-2');
  });
});
