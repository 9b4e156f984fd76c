import * as client from 'openid-client';
import { readClientSecret } from '../../config/file-checks.ts';
import type { OidcProviderSettings } from '../../config/types.ts';
import type { Logger } from '../../log.ts';
import type { Clock } from '../clock.ts';
import { createExternalChecker } from '../issuers.ts';
import { createRemoteKeySet } from '../jwks.ts';
import type { TokenChecker } from '../jwt.ts';
import { type ProviderFetch, providerFetch } from './provider-fetch.ts';
import { createProviderHealth, discoveryProblem, type ProviderProblem } from './provider-health.ts';

/** Seconds each provider request may take (discovery, token exchange, refresh). */
const REQUEST_TIMEOUT_SECONDS = 10;
/** Discovery retries after a failure: 1 s, doubling, at most this. */
const MAX_RETRY_MS = 60_000;
/** Metadata is fetched again this often, so a provider's moved endpoints or keys are picked up. */
const REDISCOVER_MS = 3_600_000;
/** How long a request waits for the first discovery still under way before answering 503. */
const FIRST_DISCOVERY_WAIT_MS = 5_000;

/**
 * One `oidc_providers` entry at run time (docs/authentication.md#openid-connect): its discovered
 * metadata (openid-client's Configuration, which also caches the JWKS for ID tokens), retried with
 * backoff while the provider cannot be reached or answers garbage. Until it has metadata its routes
 * answer 503 auth_unavailable; nothing else is affected.
 */
export interface OidcProvider {
  readonly settings: OidcProviderSettings;
  /** The metadata, or null while the provider is unavailable (waits briefly for the first attempt). */
  configuration(): client.Configuration | null | Promise<client.Configuration | null>;
  /** Verifies a Bearer JWT of this issuer with audience client_id (machine clients). */
  bearerChecker(): TokenChecker | null;
  close(): void;
}

export interface ProviderDeps {
  logger: Logger;
  now: Clock;
  /** The discovery function; openid-client's by default. */
  discover?: typeof client.discovery;
}

export function createOidcProvider(settings: OidcProviderSettings, deps: ProviderDeps): OidcProvider {
  const { logger } = deps;
  const discover = deps.discover ?? client.discovery;
  let current: client.Configuration | null = null;
  let bearer: TokenChecker | null = null;
  let first: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let retryMs = 1000;
  let closed = false;
  const health = createProviderHealth(settings.name);

  const schedule = (delayMs: number) => {
    if (closed) return;
    timer = setTimeout(() => {
      void attempt();
    }, delayMs);
    timer.unref();
  };

  const attempt = async (): Promise<void> => {
    let problem: ProviderProblem | null = null;
    try {
      let secret: string;
      try {
        secret = readClientSecret(settings.clientSecretFile);
      } catch (error) {
        problem = 'client_secret';
        throw error;
      }
      const issuer = new URL(settings.issuer);
      let fetchWithCa: ProviderFetch | undefined;
      try {
        fetchWithCa = providerFetch(settings.caFile);
      } catch (error) {
        problem = 'ca_file';
        throw error;
      }
      const configuration = await discover(
        issuer,
        settings.clientId,
        undefined,
        client.ClientSecretBasic(secret),
        {
          timeout: REQUEST_TIMEOUT_SECONDS,
          // Only loopback issuers may be http:// (config/validate-oidc refuses any other).
          ...(issuer.protocol === 'http:' ? { execute: [client.allowInsecureRequests] } : {}),
          ...(fetchWithCa === undefined ? {} : { [client.customFetch]: fetchWithCa }),
        },
      );
      const metadata = configuration.serverMetadata();
      if (typeof metadata.authorization_endpoint !== 'string' || typeof metadata.token_endpoint !== 'string')
        throw new Error('the metadata has no authorization_endpoint or token_endpoint');
      if (current === null)
        logger.info({ event: 'oidc_provider_ready', provider: settings.name }, 'OpenID provider discovered');
      current = configuration;
      bearer =
        typeof metadata.jwks_uri === 'string'
          ? createExternalChecker(
              {
                issuer: metadata.issuer,
                audience: [settings.clientId],
                jwksUri: metadata.jwks_uri,
                jwksFile: null,
                subjectClaim: settings.subjectClaim,
              },
              createRemoteKeySet(metadata.jwks_uri, {
                issuer: metadata.issuer,
                logger,
                ...(fetchWithCa === undefined ? {} : { fetch: fetchWithCa }),
              }),
              { now: deps.now, idTokenFor: settings.clientId },
            )
          : null;
      retryMs = 1000;
      health.discovered();
      schedule(REDISCOVER_MS);
    } catch (error) {
      problem ??= discoveryProblem(error);
      health.failed(problem, current !== null);
      // A provider that was known keeps serving with what it last said; one never reached stays 503.
      logger.warn(
        {
          event: 'oidc_provider_unavailable',
          provider: settings.name,
          issuer: settings.issuer,
          problem,
          err: (error as Error).message,
          retryInSeconds: retryMs / 1000,
        },
        current === null
          ? 'OpenID provider cannot be discovered; its routes answer 503 until it can'
          : 'OpenID provider rediscovery failed; keeping the metadata it gave before',
      );
      schedule(retryMs);
      retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
    }
  };

  first = attempt().finally(() => {
    first = null;
  });

  return {
    settings,
    configuration() {
      if (current !== null || first === null) return current;
      const waiting = first;
      return new Promise((resolve) => {
        const giveUp = setTimeout(() => resolve(current), FIRST_DISCOVERY_WAIT_MS);
        void waiting.then(() => {
          clearTimeout(giveUp);
          resolve(current);
        });
      });
    },
    bearerChecker: () => bearer,
    close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
    },
  };
}
