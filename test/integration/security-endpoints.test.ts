import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  endpointSlice,
  type FakeKubeApi,
  type StoredObject,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * EndpointSlices are input (docs/security.md, "Discovered endpoints"): every shape below is what a
 * buggy or hostile writer of EndpointSlices can store. None may crash the process, reach Tollgate's
 * own listeners, make it resolve a DNS name, or turn into a 500 per request: each is dropped when
 * the table is built, with a warning and a count by reason.
 */
describe('EndpointSlices from the API are untrusted (real process, fake API server)', () => {
  let api: FakeKubeApi;
  let upstream: Upstream;
  let dir: string;
  let tollgate: Tollgate;

  /** A slice of Service web as the controller writes it, then bent into the shape under test. */
  const raw = (name: string, bend: (slice: Record<string, any>) => void, ip = '127.0.0.1', port = 0) => {
    const slice = endpointSlice({
      service: 'web',
      namespace: 'apps',
      name,
      ports: [{ name: 'http', port: port || upstream.port }],
      endpoints: [{ ip }],
    }).toJSON() as unknown as Record<string, any>;
    bend(slice);
    return slice as StoredObject;
  };
  const same = () => {};
  /** The same slice with an IPv6 address type and this address. */
  const v6 = (name: string, address: string) =>
    raw(name, (s) => {
      s.addressType = 'IPv6';
      s.endpoints[0].addresses = [address];
    });
  const withPort = (name: string, port: number) =>
    raw(name, (s) => {
      s.ports[0].port = port;
    });

  /** The slice of the one good endpoint (the upstream on loopback). */
  const goodSlice = (endpoints: Array<{ ip: string }>) =>
    endpointSlice({
      service: 'web',
      namespace: 'apps',
      name: 'web-good',
      ports: [{ name: 'http', port: upstream.port }],
      endpoints,
    });

  before(async () => {
    upstream = await startUpstream({ name: 'good' });
    api = await startFakeKubeApi();
    api.apply(goodSlice([{ ip: '127.0.0.1' }]));
    // Present before the start: on a vulnerable build these crash the process at every start.
    api.applyRaw(
      raw('null-endpoint', (s) => {
        s.endpoints = [null];
      }),
    );
    api.applyRaw(
      raw('empty-address', (s) => {
        s.endpoints[0].addresses = [{}];
      }),
    );
    api.applyRaw(
      raw('null-port', (s) => {
        s.ports = [null];
      }),
    );
    api.applyRaw(
      raw('endpoints-string', (s) => {
        s.endpoints = 'x';
      }),
    );
    api.applyRaw(
      raw('null-conditions-ok', (s) => {
        s.endpoints[0].conditions = null;
      }),
    );
    dir = await mkdtemp(join(tmpdir(), 'tollgate-k8s-untrusted-'));
    tollgate = await startTollgate({
      main: { access_log: false, kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps') } },
      upstreams: {
        provider: 'kubernetes',
        upstreams: { 'web.test': { paths: { '/': { service: 'web:http' } } } },
      },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const dropped = async (reason: string) => {
    const line = (await tollgate.metrics())
      .split('\n')
      .find((l) => l.startsWith(`tollgate_kubernetes_endpoints_dropped{reason="${reason}"} `));
    return line === undefined ? null : Number(line.split(' ')[1]);
  };

  const warnings = () =>
    tollgate.logs().filter((l) => String(l.msg).startsWith('EndpointSlice entry ignored'));

  /** Every answer for web.test comes from the one good endpoint, none is a 500 or Tollgate itself. */
  const onlyGoodServes = async () => {
    for (let i = 0; i < 12; i++) {
      const res = await request(`${tollgate.proxyUrl}/`, { headers: { host: 'web.test' } });
      assert.equal(res.status, 200, `request ${i}: ${res.status} ${res.body.slice(0, 200)}`);
      assert.equal(res.json().server, 'good', `request ${i} served by ${res.body.slice(0, 200)}`);
    }
  };

  it('malformed slices present at start are ignored with a warning; the process serves', async () => {
    assert.equal(tollgate.child.exitCode, null);
    await onlyGoodServes();
    // null-endpoint, empty-address, null-port, endpoints-string; null conditions read as ready.
    assert.equal(await dropped('malformed'), 4);
    // The log reaches the test through a pipe, possibly after /metrics answered: wait for it.
    const malformed = ['apps/null-endpoint', 'apps/empty-address', 'apps/null-port', 'apps/endpoints-string'];
    await waitFor(() =>
      malformed.every((slice) => warnings().some((l) => l.slice === slice && l.reason === 'malformed')),
    );
    assert.deepEqual(
      new Set(
        warnings()
          .filter((l) => l.reason === 'malformed')
          .map((l) => l.slice),
      ),
      new Set(malformed),
    );
  });

  it("endpoints at Tollgate's own listeners, FQDN slices, bad ports and non-usable addresses are dropped", async () => {
    const shapes: Array<[string, StoredObject, string]> = [
      ['admin', raw('own-admin', same, '127.0.0.1', tollgate.adminPort), 'own_listener'],
      ['api', raw('own-api', same, '127.0.0.1', tollgate.apiPort), 'own_listener'],
      ['proxy', raw('own-proxy', same, '127.0.0.1', tollgate.proxyPort), 'own_listener'],
      ['proxy any', raw('own-proxy-any', same, '127.0.0.2', tollgate.proxyPort), 'own_listener'],
      [
        'fqdn',
        raw('fqdn', (s) => {
          s.addressType = 'FQDN';
          s.endpoints[0].addresses = ['localhost'];
        }),
        'address_type',
      ],
      ['70000', withPort('port-big', 70000), 'port'],
      ['-1', withPort('port-negative', -1), 'port'],
      ['1.5', withPort('port-fraction', 1.5), 'port'],
      ['[::1]', v6('bracketed', '[::1]'), 'not_ip'],
      ['zone', v6('zone', 'fe80::1%eth0'), 'not_ip'],
      ['hostname', raw('hostname', same, 'localhost'), 'not_ip'],
      ['ipv6 in ipv4 slice', raw('family', same, '::1'), 'address_type'],
      ['0.0.0.0', raw('unspecified', same, '0.0.0.0'), 'unspecified'],
      ['::', v6('unspecified6', '::'), 'unspecified'],
      ['metadata', raw('metadata', same, '169.254.169.254'), 'link_local'],
      ['mapped metadata', v6('mapped', '::ffff:169.254.169.254'), 'link_local'],
      ['fe80', v6('link6', 'fe80::1'), 'link_local'],
      ['multicast', raw('multicast', same, '224.0.0.1'), 'multicast'],
      ['multicast6', v6('multicast6', 'ff02::1'), 'multicast'],
      ['broadcast', raw('broadcast', same, '255.255.255.255'), 'broadcast'],
    ];
    for (const [, object] of shapes) api.applyRaw(object);
    const expected = new Map<string, number>();
    for (const [, , reason] of shapes) expected.set(reason, (expected.get(reason) ?? 0) + 1);
    await waitFor(async () => {
      for (const [reason, count] of expected) if ((await dropped(reason)) !== count) return false;
      return true;
    }, 10_000);
    await onlyGoodServes();
    const warned = (slice: string, reason: string) =>
      warnings().some((l) => l.slice === slice && l.reason === reason);
    await waitFor(() => shapes.every(([, object, reason]) => warned(`apps/${object.metadata.name}`, reason)));
    for (const [what, object, reason] of shapes) {
      const slice = `apps/${object.metadata.name}`;
      assert.ok(warned(slice, reason), `${what}: no warning naming ${slice} with reason ${reason}`);
    }
    // Once per endpoint while it stays: a later rebuild warns about the new one only.
    api.apply(goodSlice([{ ip: '127.0.0.1' }, { ip: '0.0.0.0' }]));
    await waitFor(async () => (await dropped('unspecified')) === 3, 10_000);
    await onlyGoodServes();
    await waitFor(() => warned('apps/web-good', 'unspecified'));
    const seen = new Map<string, number>();
    for (const l of warnings()) {
      const key = `${l.slice} ${l.reason} ${l.endpoint}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    assert.deepEqual(
      [...seen].filter(([, count]) => count > 1),
      [],
      'an endpoint was warned about twice',
    );
    assert.equal(tollgate.child.exitCode, null);
  });

  it('a malformed object arriving by watch is ignored too', async () => {
    api.applyRaw(
      raw('late-null', (s) => {
        s.endpoints = [null, { addresses: null }];
      }),
    );
    await waitFor(async () => (await dropped('malformed')) === 6, 10_000);
    await onlyGoodServes();
    assert.equal(tollgate.child.exitCode, null);
  });
});
