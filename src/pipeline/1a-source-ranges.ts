import type { StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import { PASS, refuse } from './verdict.ts';

/**
 * `source_ranges` / `deny_ranges` (docs/policies.md#source-ranges): right after routing, before CORS,
 * redirects and authentication, so a client outside the ranges learns nothing about the route but
 * 403 `source_denied`. The address is the one the route stage computed (trusted_proxies honoured).
 */
export function sourceRangesStage(request: StageRequest): Verdict {
  const ranges = request.route.policy?.sourceRanges;
  if (ranges == null || ranges.admits(request.clientIp)) return PASS;
  return refuse('source_denied');
}
