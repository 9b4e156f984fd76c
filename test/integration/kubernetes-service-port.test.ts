import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { endpointSlice, service, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { request, waitFor } from '../helpers/tollgate.ts';

describe('service: "<name>:<number>" is the pod port, or else the Service port (built process)', () => {
  const scope = testScope();

  it('web:80 in front of pods on another port is served through the Service port mapping', async () => {
    const pod = await scope.upstream({ name: 'pod' });
    const api = scope.keep(await startFakeKubeApi());
    api.apply(
      service({ name: 'web', namespace: 'apps', ports: [{ name: 'http', port: 80, targetPort: pod.port }] }),
    );
    api.apply(service({ name: 'bare', namespace: 'apps', ports: [{ port: 81, targetPort: pod.port }] }));
    for (const [name, portName] of [
      ['web', 'http'],
      ['bare', undefined],
    ] as const) {
      api.apply(
        endpointSlice({
          service: name,
          namespace: 'apps',
          ports: [{ name: portName, port: pod.port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
    }
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-svc-port-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    const tollgate = await scope.tollgate({
      main: { access_log: false, kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps') } },
      upstreams: {
        provider: 'kubernetes',
        upstreams: {
          'service-port.test': { paths: { '/': { service: 'web:80' } } },
          'unnamed.test': { paths: { '/': { service: 'bare:81' } } },
          'pod-port.test': { paths: { '/': { service: `web:${pod.port}` } } },
          'no-such-port.test': { paths: { '/': { service: 'web:9' } } },
        },
      },
      env: { KUBECONFIG: '' },
    });
    const get = (host: string) => request(tollgate.proxyUrl, { headers: { host } });
    await waitFor(async () => (await get('service-port.test')).status === 200, 5_000);
    assert.equal((await get('service-port.test')).json().server, 'pod');
    assert.equal((await get('unnamed.test')).json().server, 'pod');
    assert.equal((await get('pod-port.test')).json().server, 'pod', 'a pod port number works as before');
    const none = await get('no-such-port.test');
    assert.equal(none.status, 503);
    assert.equal(none.json().error, 'no_ready_endpoints');
    await waitFor(() =>
      tollgate
        .logs()
        .some(
          (line) =>
            String(line.msg).includes('neither a pod port') && line.kubernetes_service === 'web.apps:9',
        ),
    );
    // The Service was read by name, once per reference that needed it: no list, no watch of Services.
    const serviceReads = api.requests.filter((r) => r.path.includes('/services'));
    assert.ok(serviceReads.every((r) => /\/namespaces\/apps\/services\/(web|bare)$/.test(r.path)));
  });
});
