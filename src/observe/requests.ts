import type { IncomingMessage, ServerResponse } from 'node:http';
import { localGrpcStatus, localResponseBytes, protocolOf, recordedStatus } from '../local-response.ts';
import type { Logger } from '../log.ts';
import type { ProxyRequest, Unrouted } from '../request/record.ts';
import { normaliseHost } from '../routing/normalise.ts';
import { requestDuration, requestsTotal } from './metrics.ts';
import type { QueryRedactor, Tracing } from './tracing-types.ts';

/** Route label for requests that matched no route (404, 400): a constant, never a raw value. */
export const NO_ROUTE = '(none)';

export interface RequestRecorder {
  /** A request that matched a route, whatever its outcome. */
  routed(request: ProxyRequest): void;
  /** A request refused before routing (bad host or path, no route). */
  unrouted(req: IncomingMessage, res: ServerResponse, startedAt: number, refused: Unrouted): void;
}

/**
 * The one place a finished proxied request is recorded: metrics and the access log line
 * (docs/observability.md). The logged path is the normalised path plus the query that was
 * forwarded, passed through `redactQuery` in every case: the auth stage removes the token parameter
 * only when it runs, so a request answered before authentication (429, to_https) would otherwise
 * log a token. Headers are never logged. With tracing, the request's SERVER span ends here too, and
 * the access log line names its `trace_id` when it is sampled.
 */
export function createRequestRecorder(
  logger: Logger,
  accessLog: boolean,
  redactQuery: QueryRedactor,
  tracing: Tracing | null = null,
): RequestRecorder {
  return {
    routed(request) {
      const { res, route, trace } = request;
      const seconds = (performance.now() - request.startedAt) / 1000;
      const status = recordedStatus(res);
      requestsTotal.count(route.id, request.req.method ?? '', status);
      requestDuration.record(route.id, seconds);
      trace?.end(status);
      if (!accessLog) return;
      const line: Record<string, unknown> = {
        msg: 'access',
        method: request.req.method,
        host: request.host,
        path: loggedPath(request.path, request.forwardQuery, redactQuery),
        protocol: protocolOf(request.req),
        status,
        ...grpcField(res),
        duration_ms: Math.round(seconds * 1e6) / 1e3,
        bytes: request.responseBytes || localResponseBytes(res),
        upstream: request.upstream?.address ?? null,
        route: route.id,
        client_ip: request.clientIp,
        subject: request.subject,
        completed: request.completed ?? res.writableFinished,
        // pino leaves undefined fields out: `reason` appears only on responses Tollgate cut short.
        reason: request.cutShort ?? undefined,
      };
      if (trace !== null && trace.traceId !== null) line.trace_id = trace.traceId;
      logger.info(line);
    },
    unrouted(req, res, startedAt, refused) {
      const seconds = (performance.now() - startedAt) / 1000;
      const status = recordedStatus(res);
      requestsTotal.count(NO_ROUTE, req.method ?? '', status);
      requestDuration.record(NO_ROUTE, seconds);
      const traceId =
        tracing === null
          ? null
          : tracing.unrouted({
              req,
              status,
              startedAt,
              path: refused.path,
              query: refused.query,
              clientIp: refused.clientIp,
              peerTrusted: refused.peerTrusted,
            });
      if (!accessLog) return;
      logger.info({
        msg: 'access',
        method: req.method,
        // As routed lines have it (lower case, no port); a Host that does not normalise is never logged raw.
        host: normaliseHost((req.headers[':authority'] as string | undefined) ?? req.headers.host),
        // Normalised, the token parameter removed like on routed lines; a target that could not be
        // normalised (400 bad_path) is never logged raw.
        path: refused.path === null ? null : loggedPath(refused.path, refused.query, redactQuery),
        protocol: protocolOf(req),
        status,
        ...grpcField(res),
        duration_ms: Math.round(seconds * 1e6) / 1e3,
        bytes: localResponseBytes(res),
        route: NO_ROUTE,
        client_ip: refused.clientIp,
        ...(traceId === null ? {} : { trace_id: traceId }),
      });
    },
  };
}

/** `grpc_status` when Tollgate answered a gRPC request itself (the HTTP status is still `status`). */
function grpcField(res: ServerResponse): { grpc_status?: number } {
  const grpcStatus = localGrpcStatus(res);
  return grpcStatus === null ? {} : { grpc_status: grpcStatus };
}

function loggedPath(path: string, query: string, redactQuery: QueryRedactor): string {
  const rest = query === '' ? '' : redactQuery(query, path);
  return rest ? `${path}?${rest}` : path;
}
