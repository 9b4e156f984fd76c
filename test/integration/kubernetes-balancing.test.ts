import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { endpointSlice, type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { type RefusedAddress, refusedAddress, startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

interface Answer {
  status: number;
  server: string | null;
  sticky: string | null;
}

/** GET / on a host, with an optional cookie; the answering server and the sticky cookie set, if any. */
function get(port: number, host: string, cookie?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host };
    if (cookie) headers.cookie = cookie;
    const req = http.request({ host: '127.0.0.1', port, path: '/', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => {
        let server: string | null = null;
        try {
          server = String(JSON.parse(body).server);
        } catch {}
        const sticky = (res.headers['set-cookie'] ?? []).find((c) => c.startsWith('tollgate_sticky='));
        resolve({ status: res.statusCode ?? 0, server, sticky: sticky?.split(';')[0] ?? null });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('balancing over discovered endpoints (two replicas, real processes, fake API server)', () => {
  const pods = new Map<string, Upstream>();
  let dead: RefusedAddress;
  let api: FakeKubeApi;
  let dir: string;
  const replicas: Tollgate[] = [];

  before(async () => {
    for (const name of ['a', 'b', 'c']) pods.set(name, await startUpstream({ name }));
    // A pod the API still reports ready but that refuses connections (crashed since its last probe).
    dead = await refusedAddress();
    api = await startFakeKubeApi();
    for (const [name, upstream] of pods) {
      api.apply(
        endpointSlice({
          service: 'web',
          namespace: 'apps',
          name: `web-${name}`,
          ports: [{ name: 'http', port: upstream.port }],
          endpoints: [{ ip: '127.0.0.1', pod: `web-${name}` }],
        }),
      );
    }
    api.apply(
      endpointSlice({
        service: 'flaky',
        namespace: 'apps',
        name: 'flaky-dead',
        ports: [{ name: 'http', port: dead.port }],
        endpoints: [{ ip: '127.0.0.1', pod: 'flaky-dead' }],
      }),
    );
    api.apply(
      endpointSlice({
        service: 'flaky',
        namespace: 'apps',
        name: 'flaky-alive',
        ports: [{ name: 'http', port: (pods.get('a') as Upstream).port }],
        endpoints: [{ ip: '127.0.0.1', pod: 'flaky-alive' }],
      }),
    );
    dir = await mkdtemp(join(tmpdir(), 'tollgate-k8s-balance-'));
    const kubeconfig = api.writeKubeconfig(dir, 'apps');
    for (let i = 0; i < 2; i++) {
      replicas.push(
        await startTollgate({
          main: { access_log: false, kubernetes: { kubeconfig } },
          upstreams: {
            provider: 'kubernetes',
            sticky_sessions: true,
            upstreams: {
              'web.test': { paths: { '/': { service: 'web:http' } } },
              'flaky.test': { paths: { '/': { service: 'flaky:http' } } },
            },
          },
          env: { KUBECONFIG: '' },
        }),
      );
    }
  });

  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await api?.stop();
    await dead?.release();
    await Promise.all([...pods.values()].map((u) => u.close()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('round robin spreads over every ready pod', async () => {
    const [one] = replicas as [Tollgate];
    const seen = new Set<string | null>();
    for (let i = 0; i < 6; i++) seen.add((await get(one.proxyPort, 'web.test')).server);
    assert.deepEqual([...seen].sort(), ['a', 'b', 'c']);
  });

  it('a sticky cookie from one replica pins the same pod on the other (identity = the endpoint)', async () => {
    const [one, two] = replicas as [Tollgate, Tollgate];
    for (let i = 0; i < 3; i++) {
      const first = await get(one.proxyPort, 'web.test');
      assert.ok(first.sticky, 'the first answer sets the cookie');
      for (const replica of [one, two, one, two]) {
        const again = await get(replica.proxyPort, 'web.test', first.sticky);
        assert.equal(again.server, first.server);
      }
    }
  });

  it('passive health: a ready endpoint that refuses connections is skipped, no request fails', async () => {
    const [one] = replicas as [Tollgate];
    for (let i = 0; i < 10; i++) {
      const answer = await get(one.proxyPort, 'flaky.test');
      assert.equal(answer.status, 200);
      assert.equal(answer.server, 'a');
    }
    const metrics = await one.metrics();
    assert.match(
      metrics,
      new RegExp(`tollgate_upstream_up\\{route="flaky.test/",server="127.0.0.1:${dead.port}"\\} 0`),
    );
  });
});
