import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { ERRORS, type ErrorCode } from '../errors.ts';

/**
 * Answers requests Node's HTTP parser refused before they became requests (oversized headers, a
 * malformed request line, a client too slow to send its headers) with the same small JSON body as
 * every other Tollgate error, instead of Node's bare default. The connection is closed: after a
 * parse error the byte stream cannot be trusted.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const code: ErrorCode =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 'headers_too_large'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'request_timeout'
        : 'bad_request';
  const { status, message } = ERRORS[code];
  const body = JSON.stringify({ error: code, message });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
