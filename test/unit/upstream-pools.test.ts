import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDnsCache } from '../../src/upstream/dns-cache.ts';
import { UpstreamPools } from '../../src/upstream/pools.ts';
import { fakeServer, fakeTable } from '../helpers/fake-routes.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const timeouts = {
  upstreamConnectMs: 5_000,
  upstreamResponseHeadersMs: 5_000,
  clientKeepAliveMs: 5_000,
  clientHeadersMs: 5_000,
  clientFirstByteMs: 5_000,
  clientBodyIdleMs: 5_000,
  clientSendMs: 5_000,
};
const limits = { maxConnectionsPerServer: 4, maxConnectionsPerRoute: 3, queueSize: 1, queueTimeoutMs: 1_000 };

describe('upstream pools', () => {
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream();
  });
  after(() => upstream.close());

  it('connect to servers named by host through the DNS cache: one lookup for many connections', async () => {
    const lookedUp: string[] = [];
    const dns = createDnsCache({
      resolve: (name, callback) => {
        lookedUp.push(name);
        setImmediate(() => callback(null, [{ address: '127.0.0.1', family: 4 }]));
      },
    });
    const pools = new UpstreamPools({ timeouts, limits, dns });
    const server = fakeServer(`backend.test:${upstream.port}`);
    try {
      for (let i = 0; i < 3; i++) {
        // `connection: close` makes every request open a new connection, so each one needs the address.
        const response = await pools
          .get(server)
          .request({ path: `/n${i}`, method: 'GET', headers: { host: 'backend.test', connection: 'close' } });
        assert.equal(response.statusCode, 200);
        await response.body.dump();
      }
      assert.deepEqual(lookedUp, ['backend.test']);
    } finally {
      await pools.close();
    }
  });

  it('one set of slots per server origin, with the configured limits; waiters are refused on removal', async () => {
    const pools = new UpstreamPools({ timeouts, limits });
    const server = fakeServer(upstream.address);
    const slots = pools.slots(server);
    assert.equal(pools.slots(fakeServer(upstream.address)), slots, 'shared by every route naming it');
    for (let i = 0; i < 3; i++) assert.ok(slots.tryAcquire('r'));
    assert.equal(slots.tryAcquire('r'), null, 'route share of 3');
    assert.ok(slots.tryAcquire('other'));
    let refused = false;
    slots.wait('r', (outcome) => {
      refused = !outcome.ok;
    });
    pools.retainOnly(fakeTable([]));
    assert.equal(refused, true);
    assert.notEqual(pools.slots(server), slots, 'a server configured again starts afresh');
    await pools.close();
  });
});
