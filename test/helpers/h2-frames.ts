import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';

/**
 * HTTP/2 written by hand, for the attacks a real client library refuses to send (connection-specific
 * headers, a content-length the DATA frames contradict, floods of CONTINUATION or RST_STREAM).
 * Header blocks use HPACK literals without indexing and without Huffman (RFC 7541 §6.2.2), which
 * every decoder must accept; responses are only read at the frame level.
 */

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FRAME = {
  DATA: 0x0,
  HEADERS: 0x1,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;

export const ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, CANCEL: 8, ENHANCE_YOUR_CALM: 11 } as const;

export function frame(
  type: number,
  flags: number,
  streamId: number,
  payload: Buffer = Buffer.alloc(0),
): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1), the prefix bits above it left 0. */
function hpackInt(value: number, prefixBits: number): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([value]);
  const bytes = [max];
  let rest = value - max;
  while (rest >= 128) {
    bytes.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

/** A header block: every field a literal without indexing, new name. */
export function headerBlock(headers: ReadonlyArray<readonly [string, string]>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of headers) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([0x00]), hpackInt(n.length, 7), n, hpackInt(v.length, 7), v);
  }
  return Buffer.concat(parts);
}

export function rstStream(streamId: number, code: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code);
  return frame(FRAME.RST_STREAM, 0, streamId, payload);
}

export interface ReceivedFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** A raw HTTP/2 connection: the preface and an empty SETTINGS are sent on connect. */
export interface RawH2 {
  readonly socket: net.Socket;
  readonly frames: ReceivedFrame[];
  readonly closed: Promise<unknown>;
  send(...frames: Buffer[]): void;
  /** Resolves with the first received frame matching `test` (including ones already received). */
  waitFor(test: (f: ReceivedFrame) => boolean): Promise<ReceivedFrame>;
  /** The error code of a received GOAWAY or RST_STREAM frame. */
  errorCode(f: ReceivedFrame): number;
}

export async function connectH2(
  port: number,
  options: { tls?: boolean; servername?: string } = {},
): Promise<RawH2> {
  const socket = options.tls
    ? tls.connect({
        host: '127.0.0.1',
        port,
        ALPNProtocols: ['h2'],
        rejectUnauthorized: false,
        servername: options.servername ?? 'app.test',
      })
    : net.connect(port, '127.0.0.1');
  await once(socket, options.tls ? 'secureConnect' : 'connect');
  const frames: ReceivedFrame[] = [];
  const waiters: Array<{ test: (f: ReceivedFrame) => boolean; resolve: (f: ReceivedFrame) => void }> = [];
  let buffer = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    while (buffer.length >= 9) {
      const length = buffer.readUIntBE(0, 3);
      if (buffer.length < 9 + length) break;
      const received: ReceivedFrame = {
        type: buffer.readUInt8(3),
        flags: buffer.readUInt8(4),
        streamId: buffer.readUInt32BE(5) & 0x7fffffff,
        payload: buffer.subarray(9, 9 + length),
      };
      buffer = buffer.subarray(9 + length);
      frames.push(received);
      // Acknowledge the server's SETTINGS, as a client must, so it does not give up on us.
      if (received.type === FRAME.SETTINGS && !(received.flags & FLAG.ACK) && socket.writable) {
        socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
      }
      for (const waiter of [...waiters]) {
        if (waiter.test(received)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(received);
        }
      }
    }
  });
  socket.on('error', () => {});
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)]));
  return {
    socket,
    frames,
    closed,
    send(...out) {
      // The server may hang up mid-flood: that is what the flood tests wait for, not an error.
      if (socket.writable) socket.write(Buffer.concat(out), () => {});
    },
    waitFor(test) {
      const found = frames.find(test);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        waiters.push({ test, resolve });
        closed.then(() =>
          reject(new Error(`connection closed; frames: ${JSON.stringify(frames.map((f) => f.type))}`)),
        );
      });
    },
    errorCode: (f) => (f.type === FRAME.GOAWAY ? f.payload.readUInt32BE(4) : f.payload.readUInt32BE(0)),
  };
}

/** The request pseudo-headers for a GET of `path` on `authority`. */
export function requestHeaders(
  authority: string,
  path = '/',
  method = 'GET',
  scheme = 'http',
): Array<[string, string]> {
  return [
    [':method', method],
    [':scheme', scheme],
    [':authority', authority],
    [':path', path],
  ];
}
