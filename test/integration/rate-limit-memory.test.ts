import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type InProcessTollgate, request, startInProcess } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const LIMIT = 20; // requests per second per client IP

interface Tally {
  ok: number;
  limited: number;
  other: number;
  retryAfter: Set<string>;
}

/** Sends `count` requests at once from one source address and counts the answers. */
async function burst(url: string, headers: Record<string, string>, count: number, localAddress: string) {
  const tally: Tally = { ok: 0, limited: 0, other: 0, retryAfter: new Set() };
  const answers = await Promise.all(
    Array.from({ length: count }, () => request(url, { headers, localAddress })),
  );
  for (const res of answers) {
    if (res.status === 200) tally.ok++;
    else if (res.status === 429) {
      tally.limited++;
      tally.retryAfter.add(String(res.headers['retry-after']));
    } else tally.other++;
  }
  return tally;
}

/**
 * The fixed one-second windows themselves are tested with a fake clock in
 * test/unit/rate-limit-stage.test.ts; here the real proxy shows the budgets, answers and metric.
 */
describe('rate limit in memory, through the proxy', () => {
  let upstream: Upstream;
  let tollgate: InProcessTollgate;

  before(async () => {
    upstream = await startUpstream();
    tollgate = await startInProcess({
      main: { trusted_proxies: ['127.0.0.9/32'], access_log: false },
      upstreams: {
        rate_limit: LIMIT,
        upstreams: {
          'api.test': {
            paths: {
              '/': { servers: [upstream.address] },
              '/strict': { servers: [upstream.address], rate_limit: 2 },
            },
          },
          'open.test': { paths: { '/': { servers: [upstream.address] } } },
        },
      },
    });
  });
  after(async () => {
    await tollgate.stop();
    await upstream.close();
  });

  it('holds two clients to the limit at the same time, each on its own budget', async (t) => {
    const url = `${tollgate.proxyUrl}/items`;
    const headers = { host: 'api.test' };
    const offered = LIMIT * 2;
    // Loopback is 127/8 on Linux: two source addresses are two clients.
    const started = performance.now();
    const [a, b] = await Promise.all([
      burst(url, headers, offered, '127.0.0.2'),
      burst(url, headers, offered, '127.0.0.3'),
    ]);
    // One window when the bursts take under a second (the usual case): exactly LIMIT each. A slow
    // machine may spread them over more windows; each then adds at most LIMIT, never less.
    const windows = Math.floor((performance.now() - started) / 1000) + 1;
    t.diagnostic(`allowed ${a.ok} and ${b.ok} of ${offered} each, over at most ${windows} window(s)`);
    for (const tally of [a, b]) {
      assert.ok(tally.ok >= LIMIT && tally.ok <= LIMIT * windows, `allowed ${tally.ok}`);
      if (windows === 1) assert.equal(tally.ok, LIMIT);
      assert.equal(tally.other, 0);
      assert.equal(tally.ok + tally.limited, offered);
      assert.ok(tally.limited > 0);
      assert.deepEqual([...tally.retryAfter], ['1']);
    }
    const metrics = await tollgate.metrics();
    const limited = Number(/tollgate_rate_limited_total\{route="api\.test\/"\} (\d+)/.exec(metrics)?.[1]);
    assert.equal(limited, a.limited + b.limited);
  });

  it('answers 429 with Retry-After and RateLimit headers, and a path may override the limit', async () => {
    const headers = { host: 'api.test' };
    const statuses: number[] = [];
    let last: Awaited<ReturnType<typeof request>> | null = null;
    for (let i = 0; i < 4; i++) {
      last = await request(`${tollgate.proxyUrl}/strict/x`, { headers, localAddress: '127.0.0.4' });
      statuses.push(last.status);
    }
    assert.deepEqual(statuses, [200, 200, 429, 429]);
    assert.ok(last);
    assert.equal(last.headers['retry-after'], '1');
    assert.equal(last.headers['ratelimit-limit'], '2');
    assert.equal(last.headers['ratelimit-remaining'], '0');
    assert.equal(last.headers['ratelimit-reset'], '1');
    assert.equal(last.headers['ratelimit-policy'], '2;w=1');
    assert.equal(last.json<{ error: string }>().error, 'rate_limited');
  });

  it('counts the client behind a trusted proxy by X-Forwarded-For', async () => {
    const statuses = async (forwardedFor: string) => {
      const out: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await request(`${tollgate.proxyUrl}/strict/y`, {
          headers: { host: 'api.test', 'x-forwarded-for': forwardedFor },
          localAddress: '127.0.0.9',
        });
        out.push(res.status);
      }
      return out;
    };
    assert.deepEqual(await statuses('203.0.113.1'), [200, 200, 429]);
    assert.deepEqual(await statuses('203.0.113.2'), [200, 200, 429], 'another client behind the same proxy');
  });

  it('applies the global rate_limit to hosts without one of their own', async () => {
    const started = performance.now();
    const tally = await burst(`${tollgate.proxyUrl}/`, { host: 'open.test' }, LIMIT + 5, '127.0.0.5');
    const windows = Math.floor((performance.now() - started) / 1000) + 1;
    assert.ok(tally.ok >= LIMIT && tally.ok <= LIMIT * windows, `allowed ${tally.ok}`);
    if (windows === 1) assert.equal(tally.limited, 5);
  });
});
