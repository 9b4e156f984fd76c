import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../../src/log.ts';
import { rateLimitBackendUp, rateLimitedTotal } from '../../src/observe/metrics.ts';
import { createRateLimitStage, rateLimitHeaders } from '../../src/pipeline/3-rate-limit.ts';
import { PASS } from '../../src/pipeline/verdict.ts';
import type { ProxyRequest } from '../../src/request/record.ts';
import type { Answer } from '../../src/request/verdict.ts';
import type { Route } from '../../src/routing/types.ts';
import { startRedis } from '../helpers/redis-server.ts';
import { refusedAddress, waitFor } from '../helpers/tollgate.ts';

function fakeRequest(route: Partial<Route>, clientIp: string): { request: ProxyRequest } {
  const fullRoute = { id: 'a.test/', hostKey: 'a.test', rateLimit: null, ...route } as Route;
  return { request: { route: fullRoute, clientIp, host: fullRoute.hostKey } as unknown as ProxyRequest };
}

function capturingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', {
    write(line: string) {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    },
  });
  return { logger, lines };
}

async function passCount(
  stage: ReturnType<typeof createRateLimitStage>['stage'],
  route: Partial<Route>,
  ip: string,
  n: number,
) {
  let passed = 0;
  for (let i = 0; i < n; i++) if ((await stage(fakeRequest(route, ip).request)) === PASS) passed++;
  return passed;
}

async function limitedCount(route: string): Promise<number> {
  const metric = await rateLimitedTotal.get();
  return metric.values.find((v) => v.labels.route === route)?.value ?? 0;
}

describe('rate limit stage (memory)', () => {
  const { logger } = capturingLogger();
  const limiter = createRateLimitStage({ main: { rateLimitRedis: null }, logger });
  after(() => limiter.close());

  it('lets routes without a limit through synchronously', () => {
    const result = limiter.stage(fakeRequest({ rateLimit: null }, '10.0.0.1').request);
    assert.equal(result, PASS);
  });

  it('allows rate_limit requests per second, then answers 429 with Retry-After and RateLimit headers', async () => {
    const route = { id: 'mem.test/', hostKey: 'mem.test', rateLimit: 3 };
    const before = await limitedCount('mem.test/');
    for (let i = 0; i < 3; i++)
      assert.equal(await limiter.stage(fakeRequest(route, '10.0.0.1').request), PASS);
    const answer = (await limiter.stage(fakeRequest(route, '10.0.0.1').request)) as Answer;
    assert.equal(answer.kind, 'answer');
    assert.equal(answer.status, 429);
    assert.equal(JSON.parse(String(answer.body)).error, 'rate_limited');
    assert.equal(answer.headers['retry-after'], '1');
    assert.equal(answer.headers['ratelimit-limit'], '3');
    assert.equal(answer.headers['ratelimit-remaining'], '0');
    assert.equal(answer.headers['ratelimit-reset'], '1');
    assert.equal(answer.headers['ratelimit-policy'], '3;w=1');
    assert.equal((await limitedCount('mem.test/')) - before, 1);
  });

  it('keeps one budget per client IP and per host key', async () => {
    const route = { id: 'ip.test/', hostKey: 'ip.test', rateLimit: 2 };
    assert.equal(await passCount(limiter.stage, route, '10.0.0.2', 5), 2);
    assert.equal(await passCount(limiter.stage, route, '10.0.0.3', 5), 2);
    const otherHost = { id: 'other.test/', hostKey: 'other.test', rateLimit: 2 };
    assert.equal(await passCount(limiter.stage, otherHost, '10.0.0.2', 5), 2);
  });

  it('gives a path with a different limit its own budget, and picks up new limits (hot reload)', async () => {
    const route = { id: 'p.test/', hostKey: 'p.test', rateLimit: 2 };
    assert.equal(await passCount(limiter.stage, route, '10.0.0.4', 3), 2);
    const overridden = { id: 'p.test/v1', hostKey: 'p.test', rateLimit: 4 };
    assert.equal(await passCount(limiter.stage, overridden, '10.0.0.4', 6), 4);
  });

  it('counts in one-second windows that open at the first request (fake clock)', async (t) => {
    t.mock.timers.enable({ apis: ['Date', 'setTimeout'] });
    const windowed = createRateLimitStage({
      main: { rateLimitRedis: null },
      logger: capturingLogger().logger,
    });
    const route = { id: 'w.test/', hostKey: 'w.test', rateLimit: 2 };
    assert.equal(await passCount(windowed.stage, route, '10.0.0.5', 3), 2);
    t.mock.timers.tick(999);
    assert.equal(await passCount(windowed.stage, route, '10.0.0.5', 1), 0, 'still the same window');
    t.mock.timers.tick(2);
    assert.equal(await passCount(windowed.stage, route, '10.0.0.5', 3), 2, 'a fresh budget');
    // Over three windows, a client offering more than the limit gets exactly the limit in each.
    let allowed = 0;
    for (let window = 0; window < 3; window++) {
      t.mock.timers.tick(1_001);
      allowed += await passCount(windowed.stage, route, '10.0.0.6', 5);
    }
    assert.equal(allowed, 6);
    await windowed.close();
  });
});

describe('rateLimitHeaders', () => {
  it('rounds Retry-After up to whole seconds, at least 1', () => {
    assert.equal(rateLimitHeaders(5, 1)['retry-after'], '1');
    assert.equal(rateLimitHeaders(5, 0)['retry-after'], '1');
    assert.equal(rateLimitHeaders(5, 1001)['retry-after'], '2');
  });
});

describe('rate limit stage (Redis)', () => {
  it('falls back to local limits when Redis is unreachable, logs once and reports the backend down', async () => {
    const nobody = await refusedAddress(); // nothing listens there, nor can while it is held
    const { logger, lines } = capturingLogger();
    const limiter = createRateLimitStage({ main: { rateLimitRedis: `redis://${nobody.address}` }, logger });
    try {
      await waitFor(() => lines.some((l) => String(l.msg).includes('unreachable')), 5_000);
      const route = { id: 'down.test/', hostKey: 'down.test', rateLimit: 3 };
      assert.equal(await passCount(limiter.stage, route, '10.1.0.1', 10), 3);
      await sleep(500); // several reconnect attempts happen meanwhile
      assert.equal(lines.filter((l) => String(l.msg).includes('unreachable')).length, 1);
      assert.equal((await rateLimitBackendUp.get()).values[0]?.value, 0);
    } finally {
      await limiter.close();
      await nobody.release();
    }
  });

  it('shares one budget between two proxies through Redis, survives an outage, and recovers', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    const a = capturingLogger();
    const b = capturingLogger();
    const replicaA = createRateLimitStage({ main: { rateLimitRedis: redis.url }, logger: a.logger });
    const replicaB = createRateLimitStage({ main: { rateLimitRedis: redis.url }, logger: b.logger });
    t.after(() => Promise.all([replicaA.close(), replicaB.close()]));
    await waitFor(() => [a, b].every((x) => x.lines.some((l) => String(l.msg).includes('connected'))), 5_000);
    assert.equal((await rateLimitBackendUp.get()).values[0]?.value, 1);

    const route = { id: 'shared.test/', hostKey: 'shared.test', rateLimit: 4 };
    let passed = 0;
    for (let i = 0; i < 10; i++) {
      const stage = i % 2 === 0 ? replicaA.stage : replicaB.stage;
      if ((await stage(fakeRequest(route, '10.2.0.1').request)) === PASS) passed++;
    }
    assert.equal(passed, 4, 'both replicas draw from one budget');

    await redis.stop();
    await waitFor(() => a.lines.some((l) => String(l.msg).includes('unreachable')), 5_000);
    assert.equal((await rateLimitBackendUp.get()).values[0]?.value, 0);
    // Local limits now: each replica applies the limit on its own, and nothing fails.
    const localRoute = { id: 'local.test/', hostKey: 'local.test', rateLimit: 4 };
    assert.equal(await passCount(replicaA.stage, localRoute, '10.2.0.2', 8), 4);
    assert.equal(a.lines.filter((l) => String(l.msg).includes('unreachable')).length, 1);

    const again = await startRedis(redis.port);
    t.after(() => again.stop());
    await waitFor(() => a.lines.some((l) => String(l.msg).includes('reachable again')), 10_000);
    assert.equal((await rateLimitBackendUp.get()).values[0]?.value, 1);
  });
});
