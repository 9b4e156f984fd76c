import type { CacheOutcome, ResponseCache } from '../cache/response-cache.ts';
import type { Stage, StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import { answer, PASS } from './verdict.ts';

/**
 * The response cache (docs/traffic.md#response-cache) on a route with `cache`: after
 * authentication, the allow rules, the body limit and the rewrite, so a stored response is only
 * ever served to a request that would have been let through; before the server choice, so a fresh
 * copy is served even when no server is. A miss goes on with a tap on the request through which the
 * forwarder shows the cache the upstream's answer.
 */
export function createCacheStage(cache: ResponseCache, pickServer: Stage): Stage {
  return function responseCache(request: StageRequest): Verdict | Promise<Verdict> {
    const config = request.route.policy?.cache;
    if (config == null) return PASS;
    const outcome = cache.handle(request, config, pickServer);
    return outcome instanceof Promise ? outcome.then(toVerdict) : toVerdict(outcome);
  };
}

function toVerdict(outcome: CacheOutcome): Verdict {
  return outcome.kind === 'pass' ? PASS : answer(outcome.status, outcome.headers, outcome.body, true);
}
