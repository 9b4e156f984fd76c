import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { request, startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const LIMIT = 20; // requests per second per client IP
const SEND_EVERY_MS = 20; // each client offers 50 requests per second, 2.5× the limit
const DURATION_MS = 2_900; // three one-second windows (a fourth would open at ~3.0 s)

interface Tally {
  ok: number;
  limited: number;
  other: number;
  retryAfter: Set<string>;
}

/** Sends paced requests from one source address for DURATION_MS and counts the answers. */
async function hammer(url: string, headers: Record<string, string>, localAddress?: string): Promise<Tally> {
  const tally: Tally = { ok: 0, limited: 0, other: 0, retryAfter: new Set() };
  const start = performance.now();
  for (let i = 0; ; i++) {
    const due = start + i * SEND_EVERY_MS;
    if (due - start > DURATION_MS) break;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const res = await request(url, { headers, localAddress });
    if (res.status === 200) tally.ok++;
    else if (res.status === 429) {
      tally.limited++;
      tally.retryAfter.add(String(res.headers['retry-after']));
    } else tally.other++;
  }
  return tally;
}

function assertWithinTenPercent(actual: number, expected: number, who: string): void {
  assert.ok(
    Math.abs(actual - expected) <= expected * 0.1,
    `${who}: ${actual} requests allowed, expected ${expected} ±10%`,
  );
}

describe('rate limit in memory, through the proxy', () => {
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    upstream = await startUpstream();
    tollgate = await startTollgate({
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

  it('holds two clients to the limit at the same time, each on its own budget (±10%)', async (t) => {
    const url = `${tollgate.proxyUrl}/items`;
    const headers = { host: 'api.test' };
    // Loopback is 127/8 on Linux: two source addresses are two clients.
    const [a, b] = await Promise.all([hammer(url, headers, '127.0.0.2'), hammer(url, headers, '127.0.0.3')]);
    const expected = LIMIT * Math.ceil(DURATION_MS / 1000);
    t.diagnostic(
      `allowed ${a.ok} and ${b.ok} of ${a.ok + a.limited} and ${b.ok + b.limited}; expected ${expected}`,
    );
    assertWithinTenPercent(a.ok, expected, 'client 127.0.0.2');
    assertWithinTenPercent(b.ok, expected, 'client 127.0.0.3');
    for (const tally of [a, b]) {
      assert.equal(tally.other, 0);
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
    let ok = 0;
    for (let i = 0; i < LIMIT + 5; i++) {
      const res = await request(`${tollgate.proxyUrl}/`, {
        headers: { host: 'open.test' },
        localAddress: '127.0.0.5',
      });
      if (res.status === 200) ok++;
    }
    assert.ok(ok >= LIMIT && ok < LIMIT + 5, `allowed ${ok}`);
  });
});
