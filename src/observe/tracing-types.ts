import type { IncomingMessage } from 'node:http';
import type { TracingSettings } from '../config/types.ts';
import type { Logger } from '../log.ts';
import type { ProxyRequest, RequestTrace } from '../request/record.ts';

/**
 * What tracing's two sides and the request recorder agree on (docs/observability.md#tracing):
 * observe/tracing.ts (what the request path loads) imports the SDK side, observe/tracing-sdk.ts,
 * only lazily, and both name these shapes from here, so neither imports the other's module back.
 */

/**
 * Returns a raw query (without `?`) with every credential taken out, ready to be logged or recorded
 * on a span; `path` (the normalised path) says which parameters are credentials there (a login
 * callback's code and state).
 */
export type QueryRedactor = (query: string, path: string) => string;

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
