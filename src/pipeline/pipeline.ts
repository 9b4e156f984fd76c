import type { IncomingMessage, ServerResponse } from 'node:http';
import { markIfUrlCarriesToken } from '../auth/browser-links.ts';
import type { Clock } from '../auth/clock.ts';
import type { RevocationList } from '../auth/revocation.ts';
import type { ResponseCache } from '../cache/response-cache.ts';
import type { MainConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import { withAuthOutcome } from '../observe/tracing.ts';
import type { Tracing } from '../observe/tracing-types.ts';
import type { ProxyRequest, Routed, Stage } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import type { RoutingTable } from '../routing/types.ts';
import { createTrustTest } from '../upstream/client-address.ts';
import type { ServerHealth } from '../upstream/health.ts';
import { routeRequest } from './1-route.ts';
import { sourceRangesStage } from './1a-source-ranges.ts';
import { corsStage } from './1b-cors.ts';
import { createToHttpsStage } from './2-to-https.ts';
import { appRootStage } from './2b-app-root.ts';
import { createRateLimitStage } from './3-rate-limit.ts';
import { createAuthStage } from './4-auth.ts';
import { bodyLimitStage } from './4c-body-limit.ts';
import { rewriteStage } from './4d-rewrite.ts';
import { createCacheStage } from './4e-cache.ts';
import { createPickServerStage } from './5-pick-server.ts';
import { PASS, refuse } from './verdict.ts';

export interface PipelineDeps {
  main: MainConfig;
  /** The live routing table; read once per request, at arrival. */
  table: () => RoutingTable;
  health: ServerHealth;
  /** The current masterkey (it may change on reload), or null when none is configured. */
  masterkey: () => string | null;
  /** Revoked token ids (revoked_tokens_file); none when absent. */
  revocations?: RevocationList;
  clock?: Clock;
  logger: Logger;
  /** Where rate-limit counters live: this process, or the workers' primary (docs/workers.md). */
  rateLimitShared?: 'process' | 'cluster';
  /** Starts each routed request's spans (docs/observability.md#tracing); null without tracing. */
  tracing?: Tracing | null;
  /** The response cache of the routes with `cache` (docs/traffic.md#response-cache); null = none. */
  cache?: ResponseCache | null;
}

/**
 * The request pipeline (docs/architecture.md): route → source ranges → CORS → to_https/redirects →
 * app root → rate limit → auth → body limit → rewrite → cache → pick server (docs/policies.md for the
 * policies, docs/traffic.md#response-cache for the cache).
 * Each stage lives in its own file, numbered in this order, and only returns a Verdict; the first
 * verdict that is not PASS is the answer. Forwarding is not a stage: it comes after, in upstream/.
 */
export interface Pipeline {
  /** The route stage: a ProxyRequest for the route this request matches, or the 400/404 to send. */
  route(req: IncomingMessage, res: ServerResponse, startedAt: number): Routed;
  /** The other stages in order. Stays synchronous while every stage is (the common case). */
  run(request: ProxyRequest): Verdict | Promise<Verdict>;
  /** Releases what the stages hold (the rate-limit store connection). */
  close(): Promise<void>;
}

export function createPipeline(deps: PipelineDeps): Pipeline {
  const { main, logger } = deps;
  const tracing = deps.tracing ?? null;
  const isTrustedProxy = createTrustTest(main.trustedProxies);
  const rateLimit = createRateLimitStage({ main, logger, shared: deps.rateLimitShared });
  const auth = createAuthStage({
    tokenParam: main.tokenParam,
    masterkey: deps.masterkey,
    revocations: deps.revocations,
    now: deps.clock,
    logger,
    failureGuard: rateLimit.authFailures,
    main,
  });
  const pickServer = createPickServerStage({ health: deps.health });
  const cache = deps.cache ?? null;
  const stages: readonly Stage[] = Object.freeze([
    sourceRangesStage,
    corsStage,
    createToHttpsStage(main),
    appRootStage,
    rateLimit.stage,
    tracing === null ? auth.stage : withAuthOutcome(auth.stage),
    bodyLimitStage,
    rewriteStage,
    ...(cache === null ? [] : [createCacheStage(cache, pickServer)]),
    pickServer,
  ]);
  const failed = (error: unknown): Verdict => {
    logger.error({ err: error }, 'request failed inside the proxy');
    return refuse('internal_error');
  };
  return {
    route: (req, res, startedAt) => {
      const routed = routeRequest(req, res, deps.table(), isTrustedProxy, startedAt);
      markIfUrlCarriesToken(req.url, main.tokenParam, res, routed.ok ? routed.request : null);
      if (tracing !== null && routed.ok) routed.request.trace = tracing.start(routed.request);
      return routed;
    },
    run(request) {
      try {
        const verdict = runStages(stages, request, 0);
        return verdict instanceof Promise ? verdict.catch(failed) : verdict;
      } catch (error) {
        return failed(error);
      }
    },
    close: async () => {
      await Promise.all([rateLimit.close(), auth.close()]);
    },
  };
}

/** Runs `stages` from `from` on; goes async only at the first stage that returns a promise. */
function runStages(
  stages: readonly Stage[],
  request: ProxyRequest,
  from: number,
): Verdict | Promise<Verdict> {
  for (let i = from; i < stages.length; i++) {
    const verdict = (stages[i] as Stage)(request);
    if (verdict instanceof Promise) {
      return verdict.then((settled) =>
        settled.kind === 'pass' ? runStages(stages, request, i + 1) : settled,
      );
    }
    if (verdict.kind !== 'pass') return verdict;
  }
  return PASS;
}
