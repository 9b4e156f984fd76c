import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type RedisServer, startRedis } from '../helpers/redis-server.ts';
import { request, startTollgates, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

function hasRedisServer(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const LIMIT = 10;

async function backendUp(tollgate: Tollgate): Promise<number> {
  return Number(/^tollgate_rate_limit_backend_up (\d+)/m.exec(await tollgate.metrics())?.[1]);
}

describe('rate limit shared through Redis by two proxy processes', {
  skip: hasRedisServer() ? false : 'no redis-server',
}, () => {
  let redis: RedisServer;
  let upstream: Upstream;
  let first: Tollgate;
  let second: Tollgate;

  before(async () => {
    redis = await startRedis();
    upstream = await startUpstream();
    const config = {
      main: { rate_limit_redis: redis.url, access_log: false },
      upstreams: {
        rate_limit: LIMIT,
        auth_failure_limit: 3,
        upstreams: {
          'api.test': {
            paths: {
              '/': { servers: [upstream.address] },
              '/private': {
                servers: [upstream.address],
                authorization: { type: 'apikey', creds: 'right-key' },
              },
            },
          },
        },
      },
    };
    [first, second] = await startTollgates(config, config);
    await waitFor(async () => (await backendUp(first)) === 1 && (await backendUp(second)) === 1, 10_000);
  });
  after(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
    await upstream?.close();
    await redis?.stop();
  });

  it('auth_failure_limit counts failures across both replicas', async () => {
    const send = (replica: Tollgate, key: string) =>
      request(`${replica.proxyUrl}/private`, {
        headers: { host: 'api.test', 'x-api-key': key },
        localAddress: '127.0.0.7',
      });
    assert.equal((await send(first, 'wrong-1')).status, 401);
    assert.equal((await send(second, 'wrong-2')).status, 401);
    assert.equal((await send(first, 'wrong-3')).status, 401);
    // Three failures, spread over both replicas: the second replica blocks the client too.
    const blocked = await send(second, 'right-key');
    assert.equal(blocked.status, 429);
    assert.equal(blocked.json().error, 'auth_failures');
  });

  it('gives one client one budget across both replicas', async (t) => {
    // 3 × LIMIT requests at once, alternating replicas: one shared budget allows LIMIT per window,
    // where independent replicas would allow twice as many.
    const offered = 3 * LIMIT;
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: offered }, (_, i) =>
        request(`${(i % 2 === 0 ? first : second).proxyUrl}/`, {
          headers: { host: 'api.test' },
          localAddress: '127.0.0.6',
        }),
      ),
    );
    const windows = Math.floor((performance.now() - started) / 1000) + 1;
    const ok = answers.filter((res) => res.status === 200).length;
    const limited = answers.filter((res) => res.status === 429).length;
    t.diagnostic(`allowed ${ok} of ${offered} across two replicas over at most ${windows} window(s)`);
    assert.equal(ok + limited, offered, 'only 200 or 429');
    assert.ok(ok >= LIMIT && ok <= LIMIT * windows, `allowed ${ok}`);
    if (windows === 1) assert.equal(ok, LIMIT);
  });

  it('falls back to local limits when Redis goes away, says so once, and never fails a request', async () => {
    await redis.stop();
    await waitFor(async () => (await backendUp(first)) === 0, 10_000);
    const started = performance.now();
    const statuses = (
      await Promise.all(
        Array.from({ length: LIMIT + 5 }, () =>
          request(`${first.proxyUrl}/`, { headers: { host: 'api.test' }, localAddress: '127.0.0.7' }),
        ),
      )
    ).map((res) => res.status);
    const windows = Math.floor((performance.now() - started) / 1000) + 1;
    const ok = statuses.filter((s) => s === 200).length;
    assert.ok(ok >= LIMIT && ok <= LIMIT * windows, `local limit applies: ${statuses.join(',')}`);
    if (windows === 1) assert.equal(ok, LIMIT);
    assert.equal(statuses.filter((s) => s !== 200 && s !== 429).length, 0);
    await sleep(600); // reconnect attempts continue meanwhile
    const outageLines = first
      .logs()
      .filter((line) => String(line.msg).includes('falling back to per-replica local limits'));
    assert.equal(outageLines.length, 1);
    assert.ok(!first.stdout().includes(redis.url), 'the Redis URL (which may hold a password) is not logged');
  });

  it('goes back to the shared store when Redis returns', async () => {
    redis = await startRedis(redis.port);
    await waitFor(async () => (await backendUp(first)) === 1 && (await backendUp(second)) === 1, 15_000);
    assert.ok(first.logs().some((line) => String(line.msg).includes('reachable again')));
  });
});
