import type { IncomingMessage } from 'node:http';
import type { TracingSettings } from '../config/types.ts';
import type { Logger } from '../log.ts';
import type { ProxyRequest } from '../pipeline/request.ts';
import type { Verdict } from '../pipeline/verdict.ts';
import type { UpstreamServer } from '../routing/types.ts';
import type { QueryRedactor } from './requests.ts';

/**
 * OpenTelemetry tracing (docs/observability.md#tracing): one SERVER span per request, a CLIENT span
 * per upstream attempt and per forward-auth call, exported in batches over OTLP/HTTP.
 *
 * This module is what the request path sees; it never loads the SDK. The SDK side
 * (observe/tracing-sdk.ts) is imported only when main.yaml has a `tracing:` block, before the
 * listeners are bound, so a Tollgate without tracing pays nothing at start, and on the request path
 * only a `request.trace === null` check.
 */

/** The spans of one routed request, created by the route stage, ended by the request recorder. */
export interface RequestTrace {
  /** The trace id, for the access log, when this request is sampled (exported); else null. */
  readonly traceId: string | null;
  /** The auth stage's verdict on this request (the stage's answer, or PASS). */
  authOutcome(request: ProxyRequest, verdict: Verdict): void;
  /**
   * A CLIENT span for one attempt to `server`; its `traceparent` (and `tracestate`) replace any in
   * `headers`, the flat `[name, value, …]` list sent upstream.
   */
  upstreamAttempt(request: ProxyRequest, server: UpstreamServer, headers: string[]): ClientSpan;
  /** A CLIENT span for a forward-auth check; its `traceparent` is set in `headers`. */
  authCall(origin: string, method: string, headers: Record<string, string>): ClientSpan;
  /** Ends the SERVER span with the status the client got. */
  end(status: number): void;
}

/** One outgoing call's span. */
export interface ClientSpan {
  /** The answer's status, once it arrived. */
  responded(status: number): void;
  /** Adds what the caller knows of the call's meaning (`tollgate.auth.result`). */
  attribute(name: string, value: string): void;
  /**
   * Ends the span. `errorType` says why the call failed (a failure class, `timeout`…); without it a
   * 4xx or 5xx answer is the error, and `null` says the answer, whatever it was, is no failure.
   */
  end(errorType?: string | null): void;
}

/** A request answered before routing (400, 404): its whole SERVER span at once. */
export interface UnroutedRequest {
  req: IncomingMessage;
  status: number;
  startedAt: number;
  /** Normalised path, or null when the target could not be normalised (then it is not recorded). */
  path: string | null;
  query: string;
  clientIp: string;
  /** The TCP peer is one of trusted_proxies: only then does its `traceparent` decide sampling. */
  peerTrusted: boolean;
}

export interface Tracing {
  /** Loads the SDK and starts the exporter; requests before this resolves are not traced. */
  load(): Promise<void>;
  /** The spans of a request that matched a route (null until loaded). */
  start(request: ProxyRequest): RequestTrace | null;
  /** Records the request's SERVER span; its trace id when sampled (for the access log), else null. */
  unrouted(request: UnroutedRequest): string | null;
  /** Sends what is queued (bounded by the shutdown cleanup's timeout) and stops the exporter. */
  shutdown(): Promise<void>;
}

export interface TracingDeps {
  logger: Logger;
  /** Takes every token parameter out of a query before it is recorded (docs/tokens.md). */
  redactQuery: QueryRedactor;
}

/** The SDK side's entry point (observe/tracing-sdk.ts), as this module sees it. */
export type StartTracing = (settings: TracingSettings, deps: TracingDeps) => Omit<Tracing, 'load'>;

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
export function withAuthOutcome<S extends (request: ProxyRequest) => Verdict | Promise<Verdict>>(
  stage: S,
): S {
  const noted = (request: ProxyRequest, verdict: Verdict): Verdict => {
    request.trace?.authOutcome(request, verdict);
    return verdict;
  };
  return ((request: ProxyRequest) => {
    const verdict = stage(request);
    if (request.trace === null) return verdict;
    return verdict instanceof Promise
      ? verdict.then((settled) => noted(request, settled))
      : noted(request, verdict);
  }) as S;
}
