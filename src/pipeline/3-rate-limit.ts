import { Redis } from 'ioredis';
import {
  type RateLimiterLike,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { MainConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import { rateLimitBackendUp, rateLimitedTotal } from '../observe/metrics.ts';
import type { Stage, StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import { ClusterCounter } from './cluster-counters.ts';
import { PASS, refuse } from './verdict.ts';

/**
 * Rate limits (docs/configuration.md `rate_limit`): `rate_limit` requests per second per client IP per host, counted in
 * a fixed one-second window that opens at the client's first request (rate-limiter-flexible).
 *
 * - The key is the route's host KEY (not the Host header, which the client controls: spraying Host
 *   values at a DEFAULT route must not buy fresh budgets) plus the client IP, as decided by
 *   the route stage from trusted_proxies. Paths of a host with the same limit share one budget; a path
 *   whose `rate_limit` differs has its own (limiters are per limit value, see below).
 * - Limits come from the hot-reloadable routing table, so limiters are created lazily, one per
 *   distinct value, and cached; the set of values ever configured is tiny.
 * - With `rate_limit_redis`, counters live in Redis so every replica shares one budget. Each Redis
 *   limiter carries an in-memory `insuranceLimiter`: when Redis is unreachable, requests are limited
 *   locally (per replica) instead of failing. The outage is logged once and shown by
 *   tollgate_rate_limit_backend_up.
 */

export interface RateLimitStageDeps {
  main: Pick<MainConfig, 'rateLimitRedis'>;
  logger: Logger;
  env?: NodeJS.ProcessEnv;
  /**
   * Where in-memory counters live: in this process, or (`cluster`, a worker of a primary) in the
   * primary, so a budget is one for every worker (docs/workers.md). Redis, when configured, is shared
   * either way; these counters are then its insurance.
   */
  shared?: 'process' | 'cluster' | undefined;
}

/**
 * Env variable holding the Redis URL. It wins over main.yaml's `rate_limit_redis`, because the URL
 * usually carries a password and main.yaml is a ConfigMap in Kubernetes: the Helm chart passes the
 * URL from a Secret this way (docs/deployment.md).
 */
export const RATE_LIMIT_REDIS_ENV = 'TOLLGATE_RATE_LIMIT_REDIS';

/** The Redis URL in use, or null for in-memory counters. Never echoes the URL (it may hold a password). */
export function rateLimitRedisUrl(
  main: Pick<MainConfig, 'rateLimitRedis'>,
  env: NodeJS.ProcessEnv = process.env,
): string | null {
  const fromEnv = env[RATE_LIMIT_REDIS_ENV];
  if (fromEnv === undefined || fromEnv === '') return main.rateLimitRedis;
  let host = '';
  try {
    host = /^rediss?:\/\//.test(fromEnv) ? new URL(fromEnv).hostname : '';
  } catch {
    // reported below
  }
  if (host === '') {
    throw new Error(
      `${RATE_LIMIT_REDIS_ENV} is not a valid redis URL (redis://[user:password@]host[:port][/db] or rediss://)`,
    );
  }
  return fromEnv;
}

/**
 * The brute-force guard of `auth_failure_limit` (docs/configuration.md#auth_failure_limit): failed
 * authentications per client IP per host key, counted in a one-minute window that opens at the first
 * failure, in the same stores as the rate limits (this process, the workers' primary, or Redis).
 */
export interface AuthFailureGuard {
  /** Milliseconds until this client may try this host again, or 0 when it is not blocked. */
  blockedFor(request: StageRequest, limit: number): Promise<number>;
  /**
   * Counts one failed authentication; resolves once counted, so the client's next request (to any
   * worker) sees it. Never rejects.
   */
  record(request: StageRequest, limit: number): Promise<void>;
}

export interface RateLimitStage {
  stage: Stage;
  authFailures: AuthFailureGuard;
  /** Disconnects from Redis (if any). The memory limiters hold only unref'd timers. */
  close(): Promise<void>;
}

/** Redis key prefix; the limit value is part of it so two limits never share a counter. */
const REDIS_PREFIX = 'tollgate:rl';
/** The same for auth_failure_limit's counters. */
const FAILURES_PREFIX = 'tollgate:af';
const FAILURE_WINDOW_SECONDS = 60;
/** A Redis that takes longer than this per command is treated as down for that request. */
const REDIS_COMMAND_TIMEOUT_MS = 250;

/**
 * A worker whose primary does not answer within this lets the request through (logged), as
 * rate-limiter-flexible's own cluster limiter does by default. The primary only counts, so a slower
 * answer means it is starved of CPU, and a shorter wait would turn a busy moment into requests that
 * escape their limit.
 */
const CLUSTER_TIMEOUT_MS = 5000;

export function createRateLimitStage({
  main,
  logger,
  env,
  shared = 'process',
}: RateLimitStageDeps): RateLimitStage {
  const redisUrl = rateLimitRedisUrl(main, env);
  const redis = redisUrl ? connectRedis(redisUrl, logger) : null;
  // In-memory counters are always available: 1 keeps a single `== 0` alert valid for both setups.
  if (!redis) rateLimitBackendUp.set(1);
  const limiters = new Map<string, RateLimiterLike>();

  /** One limiter per (prefix, points), created on first use and kept (the set of values is tiny). */
  function cachedLimiter(prefix: string, points: number, duration: number): RateLimiterLike {
    const keyPrefix = `${prefix}:${points}`;
    let limiter = limiters.get(keyPrefix);
    if (limiter) return limiter;
    const memory =
      shared === 'cluster'
        ? new ClusterCounter({ points, duration, keyPrefix, timeoutMs: CLUSTER_TIMEOUT_MS })
        : new RateLimiterMemory({ points, duration, keyPrefix });
    limiter = redis
      ? new RateLimiterRedis({
          storeClient: redis,
          points,
          duration,
          keyPrefix,
          rejectIfRedisNotReady: true,
          insuranceLimiter: memory,
        })
      : memory;
    limiters.set(keyPrefix, limiter);
    return limiter;
  }
  const limiterFor = (points: number) => cachedLimiter(REDIS_PREFIX, points, 1);
  const failuresFor = (limit: number) => cachedLimiter(FAILURES_PREFIX, limit, FAILURE_WINDOW_SECONDS);
  const clientKey = (request: StageRequest) => `${request.route.hostKey}|${request.clientIp}`;

  const authFailures: AuthFailureGuard = {
    async blockedFor(request, limit) {
      try {
        const state = await failuresFor(limit).get(clientKey(request));
        return state !== null && state.consumedPoints >= limit ? Math.max(1, state.msBeforeNext) : 0;
      } catch (error) {
        // No store answered: the guard cannot say, and authentication itself still runs.
        logger.error({ err: String(error) }, 'auth failure counter unavailable; request not held back');
        return 0;
      }
    },
    async record(request, limit) {
      await failuresFor(limit)
        .consume(clientKey(request))
        .then(
          () => {},
          (rejection: unknown) => {
            // Over the limit already: that is what blockedFor will see. Anything else is a store failure.
            if (!(rejection instanceof RateLimiterRes)) {
              logger.error(
                { err: String(rejection) },
                'auth failure counter unavailable; failure not counted',
              );
            }
          },
        );
    },
  };

  async function consume(request: StageRequest, points: number): Promise<Verdict> {
    const key = clientKey(request);
    try {
      await limiterFor(points).consume(key);
      return PASS;
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) {
        // Both Redis and the insurance limiter failed: rate limiting must never fail a request.
        logger.error({ err: String(rejection) }, 'rate limiter failed; request let through');
        return PASS;
      }
      rateLimitedTotal.inc({ route: request.route.id });
      return refuse('rate_limited', rateLimitHeaders(points, rejection.msBeforeNext));
    }
  }

  const stage: Stage = (request) => {
    const points = request.route.rateLimit;
    // Unlimited routes stay synchronous: no promise, no allocation on the hot path.
    if (points === null) return PASS;
    return consume(request, points);
  };

  return {
    stage,
    authFailures,
    async close() {
      redis?.disconnect();
    },
  };
}

/**
 * 429 headers: `Retry-After` (RFC 9110, whole seconds, rounded up so a client that obeys it is not
 * refused again) and the IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers-07 names).
 */
export function rateLimitHeaders(points: number, msBeforeNext: number): Record<string, string> {
  const seconds = String(Math.max(1, Math.ceil(msBeforeNext / 1000)));
  return {
    'retry-after': seconds,
    'ratelimit-limit': String(points),
    'ratelimit-remaining': '0',
    'ratelimit-reset': seconds,
    'ratelimit-policy': `${points};w=1`,
  };
}

/**
 * One ioredis client for every limiter. No offline queue and a short command timeout: while Redis is
 * away a request must fall through to the insurance limiter at once, never wait for a reconnect.
 * The connection state drives the gauge and one log line per outage (not per request, and not per
 * reconnect attempt: ioredis emits an error for each).
 */
function connectRedis(url: string, logger: Logger): Redis {
  rateLimitBackendUp.set(0);
  const client = new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: 2000,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  // The URL may hold a password: log only that a store is configured, never the URL.
  let state: 'connecting' | 'up' | 'down' = 'connecting';
  client.on('ready', () => {
    if (state === 'down') logger.info('rate-limit store (Redis) reachable again: shared limits restored');
    else logger.info('rate-limit store (Redis) connected');
    state = 'up';
    rateLimitBackendUp.set(1);
  });
  const markDown = (err?: Error) => {
    rateLimitBackendUp.set(0);
    if (state === 'down') return;
    state = 'down';
    logger.warn(
      { err: err ? err.message : 'connection closed' },
      'rate-limit store (Redis) unreachable: falling back to per-replica local limits',
    );
  };
  client.on('error', markDown);
  client.on('close', () => {
    if (state === 'up') markDown();
  });
  return client;
}
