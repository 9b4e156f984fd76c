import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request, startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Every spelling of a configured host reaches that host's routes, never the open DEFAULT: IPv6 in any
 * textual form, IPv4-mapped IPv6 for an IPv4 key, a trailing dot. Two trailing dots are no host at all
 * (400). Run against the built proxy with real upstreams on loopback.
 */

const CREDS = `Basic ${Buffer.from('admin:s3cret-pw').toString('base64')}`;

describe('canonical hosts: the real process routes every spelling of a host to its own routes', () => {
  let v6: Upstream;
  let v4: Upstream;
  let open: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    [v6, v4, open] = await Promise.all([
      startUpstream({ name: 'v6-protected' }),
      startUpstream({ name: 'v4-protected' }),
      startUpstream({ name: 'open-default' }),
    ]);
    const basic = { type: 'basic', creds: 'admin:s3cret-pw' };
    tollgate = await startTollgate({
      upstreams: {
        upstreams: {
          '0::1': { paths: { '/': { servers: [v6.address], authorization: basic } } },
          '127.0.0.1': { paths: { '/': { servers: [v4.address], authorization: basic } } },
          DEFAULT: { paths: { '/': { servers: [open.address] } } },
        },
      },
      readyTimeoutMs: 30_000,
    });
  });

  after(async () => {
    await tollgate?.stop();
    await Promise.all([v6?.close(), v4?.close(), open?.close()]);
  });

  const get = (host: string, authorization?: string) =>
    request(`${tollgate.proxyUrl}/`, { headers: { host, ...(authorization ? { authorization } : {}) } });

  const cases: [string, () => Upstream][] = [
    ['[::1]', () => v6],
    ['[0:0:0:0:0:0:0:1]', () => v6],
    ['[0000::0001]:8080', () => v6],
    ['127.0.0.1', () => v4],
    ['127.0.0.1.', () => v4],
    ['[::ffff:127.0.0.1]', () => v4],
    ['[::FFFF:7f00:1]:80', () => v4],
  ];
  for (const [host, upstream] of cases) {
    it(`Host ${host} is challenged by its own route and, with credentials, reaches its upstream`, async () => {
      const refused = await get(host);
      assert.equal(refused.status, 401, `Host ${host} fell to another route: ${refused.body}`);
      const admitted = await get(host, CREDS);
      assert.equal(admitted.status, 200, admitted.body);
      assert.equal(JSON.parse(admitted.body).server, upstream().name);
    });
  }

  it('an unknown host still reaches the open DEFAULT (the control case)', async () => {
    const response = await get('other.example');
    assert.equal(response.status, 200);
    assert.equal(JSON.parse(response.body).server, 'open-default');
  });

  for (const host of ['localhost..', '127.0.0.1..', '.localhost', '127.1', '[::1]..']) {
    it(`Host ${host} is refused with 400, not routed to DEFAULT`, async () => {
      const before = open.requests.length;
      const response = await get(host);
      assert.equal(response.status, 400, response.body);
      assert.equal(open.requests.length, before);
    });
  }
});
