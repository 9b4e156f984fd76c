/**
 * The Redis URL for shared rate limits can come from env TOLLGATE_RATE_LIMIT_REDIS (in Kubernetes: a
 * Secret, since the URL carries a password and main.yaml is a ConfigMap). It wins over main.yaml.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RATE_LIMIT_REDIS_ENV, rateLimitRedisUrl } from '../../src/pipeline/3-rate-limit.ts';
import { type RedisServer, startRedis } from '../helpers/redis-server.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

function hasRedisServer(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('rateLimitRedisUrl', () => {
  const main = { rateLimitRedis: 'redis://from-main-yaml:6379' };
  it('takes the env variable over main.yaml, and main.yaml when the variable is unset or empty', () => {
    assert.equal(
      rateLimitRedisUrl(main, { [RATE_LIMIT_REDIS_ENV]: 'rediss://u:p@r.example:6380/2' }),
      'rediss://u:p@r.example:6380/2',
    );
    assert.equal(rateLimitRedisUrl(main, {}), 'redis://from-main-yaml:6379');
    assert.equal(rateLimitRedisUrl(main, { [RATE_LIMIT_REDIS_ENV]: '' }), 'redis://from-main-yaml:6379');
    assert.equal(rateLimitRedisUrl({ rateLimitRedis: null }, {}), null);
  });

  it('refuses a value that is not a redis URL, without echoing it', () => {
    for (const bad of ['http://u:secretpw@host', 'redis://', 'secretpw']) {
      assert.throws(
        () => rateLimitRedisUrl(main, { [RATE_LIMIT_REDIS_ENV]: bad }),
        (error: Error) =>
          /TOLLGATE_RATE_LIMIT_REDIS is not a valid redis URL/.test(error.message) &&
          !error.message.includes('secretpw'),
      );
    }
  });
});

describe('TOLLGATE_RATE_LIMIT_REDIS in a running proxy', {
  skip: hasRedisServer() ? false : 'no redis-server',
}, () => {
  let redis: RedisServer;
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    redis = await startRedis();
    upstream = await startUpstream();
    tollgate = await startTollgate({
      // Start-up is sub-second; the margin is for a machine under heavy parallel load.
      readyTimeoutMs: 30_000,
      // main.yaml names no Redis at all: the env variable alone turns shared counters on.
      main: { access_log: false },
      env: { [RATE_LIMIT_REDIS_ENV]: redis.url },
      upstreams: {
        rate_limit: 5,
        upstreams: { 'api.test': { paths: { '/': { servers: [upstream.address] } } } },
      },
    });
  });
  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
    await redis?.stop();
  });

  it('keeps its rate-limit counters in that Redis', async () => {
    await waitFor(async () => /^tollgate_rate_limit_backend_up 1/m.test(await tollgate.metrics()), 10_000);
    const res = await request(`${tollgate.proxyUrl}/`, { headers: { host: 'api.test' } });
    assert.equal(res.status, 200);
    const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await client.connect();
      const keys = await client.keys('tollgate:rl*');
      assert.ok(keys.length > 0, 'no rate-limit key in Redis');
    } finally {
      client.disconnect();
    }
  });

  it('a malformed value stops the start with a message naming the variable, not the value', async () => {
    const broken = await startTollgate({
      waitReady: false,
      env: { [RATE_LIMIT_REDIS_ENV]: 'http://user:secretpw@nowhere' },
      upstreams: { upstreams: { DEFAULT: { paths: { '/': { servers: [upstream.address] } } } } },
    });
    const code = await broken.exited;
    assert.equal(code, 1);
    assert.match(broken.stderr(), /TOLLGATE_RATE_LIMIT_REDIS is not a valid redis URL/);
    assert.equal(`${broken.stdout()}${broken.stderr()}`.includes('secretpw'), false);
  });
});
