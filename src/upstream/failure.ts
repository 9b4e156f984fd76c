import { upstreamErrorsTotal } from '../admin/metrics.ts';
import type { ErrorCode } from '../errors.ts';
import type { ProxyRequest } from '../pipeline/request.ts';
import type { UpstreamServer } from '../routing/types.ts';
import type { ServerHealth } from './health.ts';

/**
 * One classification of upstream failures for plain requests and WebSocket upgrades alike
 * (docs/architecture.md "Upstream layer"): the kind labels `tollgate_upstream_errors_total` and
 * decides passive health; `notSent` says whether another server may be tried.
 */
export type UpstreamFailureKind = 'connect' | 'timeout' | 'reset' | 'protocol';

export interface UpstreamFailure {
  kind: UpstreamFailureKind;
  /** The upstream cannot have seen the request: trying the next server is always safe. */
  notSent: boolean;
  /**
   * A reused keep-alive connection the upstream closed at the same moment we wrote on it. Worth a
   * retry only when no body was consumed from the client (nginx: proxy_next_upstream error).
   */
  staleConnection: boolean;
  /** What the client gets when no server is left to try. */
  answer: ErrorCode;
}

/** The server is not there (or not reachable): nothing was sent. */
const CONNECT_ERRORS: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NONAME',
  'EAI_NODATA',
]);
const STALE_CONNECTION_ERRORS: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

export function classifyUpstreamError(error: unknown): UpstreamFailure {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (code === 'UND_ERR_CONNECT_TIMEOUT')
    return { kind: 'timeout', notSent: true, staleConnection: false, answer: 'bad_gateway' };
  if (code === 'UND_ERR_HEADERS_TIMEOUT')
    return { kind: 'timeout', notSent: false, staleConnection: false, answer: 'gateway_timeout' };
  if (code === 'UND_ERR_BODY_TIMEOUT')
    return { kind: 'timeout', notSent: false, staleConnection: false, answer: 'bad_gateway' };
  if (code !== undefined && CONNECT_ERRORS.has(code))
    return { kind: 'connect', notSent: true, staleConnection: false, answer: 'bad_gateway' };
  if (code !== undefined && STALE_CONNECTION_ERRORS.has(code))
    return { kind: 'reset', notSent: false, staleConnection: true, answer: 'bad_gateway' };
  return { kind: 'protocol', notSent: false, staleConnection: false, answer: 'bad_gateway' };
}

/** What the upstream layer tells the rest of the process about each attempt. */
export interface ForwardObserver {
  onUpstreamFailure(request: ProxyRequest, server: UpstreamServer, kind: UpstreamFailureKind): void;
  onUpstreamSuccess(request: ProxyRequest, server: UpstreamServer): void;
}

/**
 * The one place an upstream attempt's outcome is recorded, for HTTP and WebSocket alike: the error
 * counter and passive health. A client that hangs up is never reported here.
 */
export function createUpstreamObserver(health: ServerHealth): ForwardObserver {
  return {
    onUpstreamFailure(request, server, kind) {
      upstreamErrorsTotal.inc({ route: request.route.id, server: server.address, kind });
      health.reportFailure(request.route, server, kind);
    },
    onUpstreamSuccess(request, server) {
      health.reportSuccess(request.route, server);
    },
  };
}
