import type { RetryConfig } from '../../../config/types.ts';
import { gatewayDurationMs } from './filters.ts';
import type { HttpRouteRule } from './objects.ts';

/**
 * A rule's `retry` (docs/gateway-api.md#retries) as the forwarder's RetryConfig (upstream/retry.ts),
 * with the rule's `timeouts.request` as the bound of every attempt together; a string says why it
 * is refused.
 */

/** Retries when `attempts` is not written (the field's default is the implementation's). */
export const DEFAULT_RETRY_ATTEMPTS = 1;
/** The wait before a retry when `backoff` is not written (Envoy's base interval). */
export const DEFAULT_RETRY_BACKOFF_MS = 25;
/** More retries than this are refused: each one is another request to a backend already failing. */
export const MAX_RETRY_ATTEMPTS = 10;
/** A longer backoff is refused: a client waits it out on an open request. */
const MAX_RETRY_BACKOFF_MS = 60_000;

export function retryOf(rule: HttpRouteRule): RetryConfig | null | string {
  const spec = rule.retry;
  if (spec === undefined || spec === null) return null;
  const codes: number[] = [];
  for (const code of spec.codes ?? []) {
    if (typeof code !== 'number' || !Number.isInteger(code) || code < 400 || code > 599)
      return `retry.codes ${String(code)} is not a status code from 400 to 599`;
    if (!codes.includes(code)) codes.push(code);
  }
  const attempts = spec.attempts ?? DEFAULT_RETRY_ATTEMPTS;
  if (
    typeof attempts !== 'number' ||
    !Number.isInteger(attempts) ||
    attempts < 0 ||
    attempts > MAX_RETRY_ATTEMPTS
  )
    return `retry.attempts ${String(attempts)} is not a whole number from 0 to ${MAX_RETRY_ATTEMPTS}`;
  let backoffMs = DEFAULT_RETRY_BACKOFF_MS;
  if (spec.backoff !== undefined) {
    const ms = typeof spec.backoff === 'string' ? gatewayDurationMs(spec.backoff) : null;
    if (ms === null || ms > MAX_RETRY_BACKOFF_MS)
      return `retry.backoff ${String(spec.backoff)} is not a duration such as 100ms, at most 1m`;
    backoffMs = ms;
  }
  const request = rule.timeouts?.request;
  // Malformed, timeoutsOf refuses the rule; 0s means no bound.
  const budgetMs = request === undefined ? null : gatewayDurationMs(request) || null;
  return { codes, attempts, backoffMs, budgetMs };
}
