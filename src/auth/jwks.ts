import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  errors,
  type FetchImplementation,
  type JWTVerifyGetKey,
} from 'jose';
import { readJwksFile } from '../config/file-checks.ts';
import type { Logger } from '../log.ts';
import { jwksRefreshesTotal } from '../observe/metrics.ts';

/**
 * Key sets of external issuers (docs/tokens.md#external-issuers). jose's remote JWK set does the
 * fetching, parsing and key selection; this module only decides WHEN it refetches, because jose's own
 * schedule would fail every token once the cache aged while the issuer is unreachable:
 *
 * - keys are refreshed in the background every `refreshMs` (a request never waits for it, and a
 *   failed refresh keeps the keys already held: an unreachable JWKS never breaks verifiable tokens);
 * - a token whose `kid` is unknown triggers a refresh at once, unless one already ran in the last
 *   `cooldownMs` (so garbage kids cannot make us hammer the issuer);
 * - before any key was ever fetched, a failed fetch is retried at most every `cooldownMs` too.
 */
export const UNKNOWN_KID_COOLDOWN_MS = 30_000;
export const REFRESH_INTERVAL_MS = 5 * 60_000;
const FETCH_TIMEOUT_MS = 5_000;

export interface RemoteKeySetOptions {
  /** Metric and log label. */
  issuer: string;
  logger: Logger;
  cooldownMs?: number;
  refreshMs?: number;
  /** Milliseconds clock, for tests. */
  nowMs?: () => number;
  /** The fetch to use (an OpenID provider's with its private CA); the runtime's by default. */
  fetch?: FetchImplementation;
}

/**
 * A key set with what a verification cache needs to stay true to it: `generation()` changes whenever
 * a refresh brought a different set of keys (a key removed must stop verifying at once, cached
 * verifications included), and `refreshIfDue()` starts the periodic refresh from a cache hit, so a
 * busy cache cannot keep the keys from ever being refreshed.
 */
export interface KeySet extends JWTVerifyGetKey {
  generation(): number;
  refreshIfDue(): void;
}

export function createRemoteKeySet(uri: string, options: RemoteKeySetOptions): KeySet {
  const cooldownMs = options.cooldownMs ?? UNKNOWN_KID_COOLDOWN_MS;
  const refreshMs = options.refreshMs ?? REFRESH_INTERVAL_MS;
  const nowMs = options.nowMs ?? Date.now;
  // Infinite ages: jose never refetches on its own; every fetch goes through reload() below.
  const remote = createRemoteJWKSet(new URL(uri), {
    cacheMaxAge: Number.POSITIVE_INFINITY,
    cooldownDuration: Number.POSITIVE_INFINITY,
    timeoutDuration: FETCH_TIMEOUT_MS,
    ...(options.fetch === undefined ? {} : { [customFetch]: options.fetch }),
  });
  let lastFetch = Number.NEGATIVE_INFINITY;
  let lastUnknownKidRefresh = Number.NEGATIVE_INFINITY;
  let lastFirstFetch = Number.NEGATIVE_INFINITY;

  let generation = 0;
  let heldKeys = '';

  const reload = async (why: string): Promise<void> => {
    lastFetch = nowMs();
    try {
      await remote.reload();
      const keys = JSON.stringify(remote.jwks() ?? null);
      if (keys !== heldKeys) {
        heldKeys = keys;
        generation += 1;
      }
      jwksRefreshesTotal.inc({ issuer: options.issuer, result: 'success' });
      options.logger.info({ event: 'jwks_refreshed', issuer: options.issuer, why }, 'issuer keys fetched');
    } catch (error) {
      jwksRefreshesTotal.inc({ issuer: options.issuer, result: 'failure' });
      options.logger.warn(
        { event: 'jwks_refresh_failed', issuer: options.issuer, why, err: (error as Error).message },
        'fetching the issuer keys failed; keeping the keys already held',
      );
      throw error;
    }
  };
  const haveKeys = () => remote.jwks() !== undefined;
  const refreshIfDue = (now: number) => {
    if (haveKeys() && now - lastFetch >= refreshMs && !remote.reloading) reload('periodic').catch(() => {});
  };

  const getKey = async (...[header, token]: Parameters<JWTVerifyGetKey>) => {
    const now = nowMs();
    if (!haveKeys()) {
      if (now - lastFirstFetch < cooldownMs) throw new errors.JWKSNoMatchingKey();
      lastFirstFetch = now;
      await reload('first use');
    } else refreshIfDue(now);
    try {
      return await remote(header, token);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey) || now - lastUnknownKidRefresh < cooldownMs)
        throw error;
      lastUnknownKidRefresh = now;
      await reload('unknown kid');
      return remote(header, token);
    }
  };
  return Object.assign(getKey, {
    generation: () => generation,
    refreshIfDue: () => refreshIfDue(nowMs()),
  });
}

/** A key set read from a file (a mounted ConfigMap): re-read when the configuration is reloaded. */
export function createFileKeySet(path: string): KeySet {
  // The reader validation uses (config/file-checks), so a key set that validated loads here. A changed
  // file comes with a reload, which builds new checkers (and caches) around a new key set.
  return Object.assign(createLocalJWKSet(readJwksFile(path)), {
    generation: () => 0,
    refreshIfDue: () => {},
  });
}
