import type { MainConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import { createRequestRecorder, type RequestRecorder } from './requests.ts';
import { createTracing } from './tracing.ts';
import type { QueryRedactor, Tracing } from './tracing-types.ts';

/** What observes requests (docs/observability.md): the recorder, and tracing when configured. */
export interface Observe {
  readonly recorder: RequestRecorder;
  /** Null when main.yaml has no `tracing:` block. */
  readonly tracing: Tracing | null;
  /** Loads what must be there before the first request (the tracing SDK); before listening. */
  ready(): Promise<void>;
  /** Sends the spans still queued; a shutdown cleanup step. */
  close(): Promise<void>;
}

/**
 * The observe room's factory: metrics and the access log for every process that serves requests,
 * and OpenTelemetry tracing in each of them (every worker exports its own spans) when configured.
 * `redactQuery` takes token parameters out of any query recorded (docs/tokens.md).
 */
export function createObserve(main: MainConfig, logger: Logger, redactQuery: QueryRedactor): Observe {
  const tracing = main.tracing === undefined ? null : createTracing(main.tracing, { logger, redactQuery });
  return {
    recorder: createRequestRecorder(logger, main.accessLog, redactQuery, tracing),
    tracing,
    ready: async () => {
      await tracing?.load();
    },
    close: async () => {
      await tracing?.shutdown();
    },
  };
}
