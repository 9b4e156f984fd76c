import type { StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import { PASS, refuse } from './verdict.ts';

/**
 * `rewrite` and `x-forwarded-prefix` (docs/policies.md#rewrite): the path the upstream receives.
 * Last before picking a server, so every earlier decision (routing, source ranges, CORS,
 * authentication) was taken on the path the client sent; the access log keeps that path too. A
 * rewrite whose result is not a valid path is refused with 400 rather than forwarded as something
 * the upstream might read differently.
 */
export function rewriteStage(request: StageRequest): Verdict {
  const policy = request.route.policy;
  if (policy == null) return PASS;
  if (policy.forwardedPrefix !== null) {
    // The client's own copy never reaches the upstream: only the configured value is sent.
    request.consumedHeaders.push('x-forwarded-prefix');
    request.upstreamHeaders = [
      ...(request.upstreamHeaders ?? []),
      'x-forwarded-prefix',
      policy.forwardedPrefix,
    ];
  }
  if (policy.rewrite === null) return PASS;
  const path = policy.rewrite(request.path, request.route.prefix);
  if (path === null) return refuse('bad_path', {}, 'the rewritten path is not a valid path');
  request.upstreamPath = path;
  return PASS;
}
