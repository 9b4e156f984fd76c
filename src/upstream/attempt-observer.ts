import type { Logger } from '../log.ts';
import { upstreamErrorsTotal } from '../observe/metrics.ts';
import type { ForwardingRequest } from '../request/record.ts';
import type { UpstreamServer } from '../routing/types.ts';
import type { AttemptFailure } from './failure.ts';
import type { ServerHealth } from './health.ts';
import { createTlsFailureLog } from './tls-failure-log.ts';

/** What the upstream layer tells the rest of the process about each attempt. */
export interface ForwardObserver {
  /** `error`, when there is one, is what the connection reported (logged for TLS failures). */
  onUpstreamFailure(
    request: ForwardingRequest,
    server: UpstreamServer,
    failure: AttemptFailure,
    error?: Error,
  ): void;
  onUpstreamSuccess(request: ForwardingRequest, server: UpstreamServer): void;
}

/**
 * The one place an upstream attempt's outcome is recorded, for HTTP and WebSocket alike: the error
 * counter, passive health, and why TLS failed (tls-failure-log.ts). A client that hangs up is never
 * reported here.
 */
export function createUpstreamObserver(health: ServerHealth, logger: Logger): ForwardObserver {
  const logTlsFailure = createTlsFailureLog(logger);
  return {
    onUpstreamFailure(request, server, failure, error) {
      const kind = failure.kind;
      upstreamErrorsTotal.inc({ route: request.route.id, server: server.address, kind });
      health.reportFailure(request.route, server, failure);
      if (kind === 'tls' && error !== undefined) logTlsFailure(request.route.id, server, error);
    },
    onUpstreamSuccess(request, server) {
      health.reportSuccess(request.route, server);
    },
  };
}
