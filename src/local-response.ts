import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import http2, { type ServerHttp2Stream } from 'node:http2';

/** Whether a request carries a body at all (RFC 9112 §6.3; on HTTP/2, no END_STREAM on its HEADERS). */
export function hasBody(req: Pick<IncomingMessage, 'headers'>): boolean {
  const stream = http2StreamOf(req);
  if (stream !== null) return !stream.endAfterHeaders;
  return headersAnnounceBody(req.headers);
}

function headersAnnounceBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * The HTTP/2 stream under a request or response of node:http2's compatibility API, or null for
 * HTTP/1.1. The few places where the protocols must differ (no `Connection` header on HTTP/2, how
 * a body is announced, GOAWAY instead of a closed connection) ask this; the pipeline never does.
 */
export function http2StreamOf(message: object): ServerHttp2Stream | null {
  return (message as { stream?: ServerHttp2Stream }).stream ?? null;
}

/** `1.1`, `1.0` or `2`: the protocol of a request, as the access log reports it. */
export function protocolOf(req: Pick<IncomingMessage, 'httpVersion' | 'httpVersionMajor'>): string {
  return req.httpVersionMajor === 2 ? '2' : req.httpVersion;
}

/** A gRPC request (`content-type: application/grpc`, `application/grpc+proto`…): its answers must be gRPC. */
export function isGrpcRequest(req: Pick<IncomingMessage, 'headers'> | undefined): boolean {
  const type = req?.headers['content-type'];
  return type !== undefined && /^application\/grpc($|[+;])/.test(type);
}

/**
 * The gRPC status a client gets for an HTTP status Tollgate answered (docs/errors.md "gRPC"): the
 * contract's table first, then gRPC's own HTTP mapping (doc/http-grpc-status-mapping.md), UNKNOWN
 * for anything else (a redirect a gRPC client cannot follow, say).
 */
export function grpcStatusFor(status: number): number {
  switch (status) {
    case 401:
      return 16; // UNAUTHENTICATED
    case 403:
      return 7; // PERMISSION_DENIED
    case 404:
      return 12; // UNIMPLEMENTED
    case 429:
    case 413:
    case 431:
      return 8; // RESOURCE_EXHAUSTED
    case 502:
    case 503:
      return 14; // UNAVAILABLE
    case 504:
    case 408:
      return 4; // DEADLINE_EXCEEDED
    case 400:
    case 500:
      return 13; // INTERNAL
    default:
      return 2; // UNKNOWN
  }
}

/**
 * Responses Tollgate writes itself (errors, redirects) go through here, so the access log can report
 * their size and status: res.getHeader cannot see headers passed to writeHead as an object, these
 * bodies are not counted by the forwarder, and a gRPC answer goes out as HTTP 200 while the log and
 * metrics keep the status Tollgate decided. The WeakMap entries go away with the response.
 */
const written = new WeakMap<ServerResponse, { bytes: number; status: number; grpcStatus: number | null }>();

export function writeLocalResponse(
  res: ServerResponse,
  status: number,
  headers: Readonly<Record<string, string | number | readonly string[]>>,
  body: string | Buffer,
  /**
   * The body is a representation (a cached response), not a message about the request: a HEAD
   * then gets the headers a GET would, its Content-Type and Content-Length included (RFC 9110 §9.3.2).
   */
  representation = false,
): void {
  const req = res.req as IncomingMessage | undefined;
  // An answer given before the request body arrived (401, 429, 404…): stop the client sending it
  // rather than let Node read and discard a body a hostile client can trickle in forever.
  const unreadBody = req !== undefined && hasBody(req) && !req.complete;
  const stream = http2StreamOf(res);
  if (isGrpcRequest(req)) {
    writeGrpcAnswer(res, status, messageOf(typeof body === 'string' ? body : body.toString('utf8')));
  } else if (req?.method === 'HEAD') {
    // A HEAD answer has no content (RFC 9110 §9.3.2): none is sent, so nothing describes one — no
    // Content-Type, and no Content-Length, which would have to be the GET's (§8.6).
    written.set(res, { bytes: 0, status, grpcStatus: null });
    const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    res.writeHead(status, {
      ...(representation
        ? {
            ...(headers as Record<string, string | number | string[]>),
            ...(status === 204 || status === 304 ? {} : { 'content-length': length }),
          }
        : withoutContentHeaders(headers)),
      ...(unreadBody && stream === null ? { connection: 'close' } : {}),
    });
    res.end();
  } else {
    const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    written.set(res, { bytes: length, status, grpcStatus: null });
    res.writeHead(status, {
      ...(headers as Record<string, string | number | string[]>),
      // RFC 9110 §8.6: a 204 (a CORS preflight's answer) carries no Content-Length, and a 304 (the
      // response cache's, docs/traffic.md#response-cache) none of its empty body.
      ...(status === 204 || status === 304 ? {} : { 'content-length': length }),
      // HTTP/2 has no Connection header (RFC 9113 §8.2.2): the stream is reset below instead.
      ...(unreadBody && stream === null ? { connection: 'close' } : {}),
    });
    res.end(body);
  }
  // RFC 9113 §8.1: a complete response, then RST_STREAM NO_ERROR asks the client to stop sending.
  if (unreadBody && stream !== null) stream.close(http2.constants.NGHTTP2_NO_ERROR);
}

/** The headers of a local answer less those that describe its body (for HEAD, which has none). */
function withoutContentHeaders(
  headers: Readonly<Record<string, string | number | readonly string[]>>,
): Record<string, string | number | string[]> {
  const kept: Record<string, string | number | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (lower !== 'content-type' && lower !== 'content-length')
      kept[name] = value as string | number | string[];
  }
  return kept;
}

/**
 * A gRPC "trailers-only" answer (gRPC over HTTP/2 spec): HTTP 200, `content-type: application/grpc`,
 * `grpc-status` and `grpc-message` in the one HEADERS frame that ends the stream, no body. A gRPC
 * client cannot read an HTTP error status; this it reports as the status code it names.
 */
function writeGrpcAnswer(res: ServerResponse, status: number, message: string): void {
  const grpcStatus = grpcStatusFor(status);
  written.set(res, { bytes: 0, status, grpcStatus });
  const headers = {
    'content-type': 'application/grpc',
    'grpc-status': String(grpcStatus),
    'grpc-message': encodeGrpcMessage(message),
  };
  const stream = http2StreamOf(res);
  if (stream === null) {
    res.writeHead(200, { ...headers, 'content-length': 0 });
    res.end();
    return;
  }
  // Through the stream itself: the compatibility API would send HEADERS, then an empty DATA frame
  // with END_STREAM, which gRPC clients read as a response missing its trailers.
  stream.respond({ ':status': 200, ...headers }, { endStream: true });
}

/** The message of one of our JSON error bodies, else the text itself (a redirect's), shortened. */
function messageOf(body: string): string {
  if (body.startsWith('{')) {
    try {
      const parsed = JSON.parse(body) as { message?: unknown };
      if (typeof parsed.message === 'string') return parsed.message;
    } catch {
      // not one of ours: use the text
    }
  }
  return body.trim().slice(0, 200);
}

/** gRPC's percent-encoding of grpc-message: every byte outside printable ASCII, and `%` itself. */
export function encodeGrpcMessage(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Body bytes of a response written by writeLocalResponse, or 0. */
export function localResponseBytes(res: ServerResponse): number {
  return written.get(res)?.bytes ?? 0;
}

/**
 * The status to log and count: the one Tollgate decided for its own answers (a gRPC answer goes out
 * as 200 but is a 401, a 503…), else the one sent.
 */
export function recordedStatus(res: ServerResponse): number {
  return written.get(res)?.status ?? res.statusCode;
}

/** The grpc-status of a gRPC answer Tollgate wrote itself, else null. */
export function localGrpcStatus(res: ServerResponse): number | null {
  return written.get(res)?.grpcStatus ?? null;
}
