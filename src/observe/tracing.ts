import type { TracingSettings } from '../config/types.ts';
import type { StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import type { Tracing, TracingDeps } from './tracing-types.ts';

/**
 * OpenTelemetry tracing (docs/observability.md#tracing): one SERVER span per request, a CLIENT span
 * per upstream attempt and per forward-auth call, exported in batches over OTLP/HTTP.
 *
 * This module is what the request path sees; it never loads the SDK. The SDK side
 * (observe/tracing-sdk.ts) is imported only when main.yaml has a `tracing:` block, before the
 * listeners are bound, so a Tollgate without tracing pays nothing at start, and on the request path
 * only a `request.trace === null` check.
 */

export function createTracing(settings: TracingSettings, deps: TracingDeps): Tracing {
  let sdk: Omit<Tracing, 'load'> | null = null;
  let loading: Promise<void> | null = null;
  return {
    load() {
      loading ??= import('./tracing-sdk.ts').then((module) => {
        sdk = module.startTracing(settings, deps);
      });
      return loading;
    },
    start: (request) => (sdk === null ? null : sdk.start(request)),
    unrouted: (request) => (sdk === null ? null : sdk.unrouted(request)),
    shutdown: async () => {
      await sdk?.shutdown();
    },
  };
}

/**
 * The auth stage as tracing sees it: its verdict is noted on the request's span
 * (`tollgate.auth.result`). Only wrapped in when tracing is configured.
 */
export function withAuthOutcome<S extends (request: StageRequest) => Verdict | Promise<Verdict>>(
  stage: S,
): S {
  const noted = (request: StageRequest, verdict: Verdict): Verdict => {
    request.trace?.authOutcome(request, verdict);
    return verdict;
  };
  return ((request: StageRequest) => {
    const verdict = stage(request);
    if (request.trace === null) return verdict;
    return verdict instanceof Promise
      ? verdict.then((settled) => noted(request, settled))
      : noted(request, verdict);
  }) as S;
}
