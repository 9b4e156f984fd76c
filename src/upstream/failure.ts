import type { ErrorCode } from '../errors.ts';

/**
 * One classification of upstream failures for plain requests and WebSocket upgrades alike
 * (docs/architecture.md "Upstream layer"): the kind labels `tollgate_upstream_errors_total` and
 * decides passive health; `notSent` says whether another server may be tried. Pure: what each
 * attempt's outcome then does (metrics, health) is upstream/attempt-observer.ts.
 */
export type UpstreamFailureKind = 'connect' | 'timeout' | 'reset' | 'protocol' | 'tls';

export interface UpstreamFailure {
  kind: UpstreamFailureKind;
  /**
   * The server itself could not be reached (refused, unreachable, unknown name, connect timeout):
   * the one signal passive health ejects on (docs/traffic.md#server-health). A response timeout is
   * not: it says one URL is slow, not that the server is gone.
   */
  unreachable: boolean;
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

/** What passive health needs of a failed attempt (a WebSocket handshake refused has no error). */
export type AttemptFailure = Pick<UpstreamFailure, 'kind' | 'unreachable'>;

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

/**
 * The TLS handshake with the upstream failed, before any request byte: its certificate did not
 * verify (unknown CA, wrong name, expired), or the server refused ours (mTLS), or no common protocol.
 * OpenSSL's alerts arrive as ERR_SSL_*, verification failures under X.509 verify codes.
 */
const TLS_ERRORS: ReadonlySet<string> = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'INVALID_CA',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_TLS_HANDSHAKE_TIMEOUT',
  'TOLLGATE_NO_H2',
]);

/**
 * HTTP/2 refusals that say the stream was never processed (RFC 9113 §8.7): a GOAWAY, or a
 * REFUSED_STREAM reset. Another server may be tried (docs/traffic.md#http2-to-upstreams).
 */
function h2NotProcessed(error: Error): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ERR_HTTP2_GOAWAY_SESSION') return true;
  const message = error.message ?? '';
  return message.includes('"GOAWAY" frame received') || message.includes('NGHTTP2_REFUSED_STREAM');
}

export function classifyUpstreamError(error: unknown): UpstreamFailure {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (code !== undefined && (TLS_ERRORS.has(code) || code.startsWith('ERR_SSL_')))
    return failure('tls', { notSent: true });
  if (error instanceof Error && h2NotProcessed(error)) return failure('reset', { notSent: true });
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return failure('timeout', { notSent: true, unreachable: true });
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return failure('timeout', { answer: 'gateway_timeout' });
  if (code === 'UND_ERR_BODY_TIMEOUT') return failure('timeout', {});
  if (code !== undefined && CONNECT_ERRORS.has(code))
    return failure('connect', { notSent: true, unreachable: true });
  if (code !== undefined && STALE_CONNECTION_ERRORS.has(code))
    return failure('reset', { staleConnection: true });
  return failure('protocol', {});
}

function failure(kind: UpstreamFailureKind, facts: Partial<Omit<UpstreamFailure, 'kind'>>): UpstreamFailure {
  return {
    kind,
    unreachable: facts.unreachable ?? false,
    notSent: facts.notSent ?? false,
    staleConnection: facts.staleConnection ?? false,
    answer: facts.answer ?? 'bad_gateway',
  };
}
