import type { Duplex } from 'node:stream';

/**
 * Follows WebSocket frame boundaries (RFC 6455 §5.2) in one direction of a relayed connection, only to
 * notice Close frames: the bytes themselves pass untouched. Payloads are skipped by length, so the
 * cost is a few header bytes per frame. Extensions (permessage-deflate) change payloads, never headers.
 */
export class CloseFrameWatcher {
  /** A Close frame went this way. */
  closed = false;
  /** Its status code, when it carried one. */
  code: number | null = null;

  readonly #header = Buffer.alloc(14);
  #headerBytes = 0;
  /** Payload bytes of the current frame still to skip. */
  #skip = 0;
  /** Position inside the current payload (for a Close frame's code and its mask). */
  #offset = 0;
  #isClose = false;
  #mask: Buffer | null = null;
  #codeBytes: number[] = [];

  push(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.#skip > 0) {
        const take = Math.min(this.#skip, chunk.length - i);
        if (this.#isClose && this.#offset < 2) this.#readCode(chunk, i, take);
        this.#skip -= take;
        this.#offset += take;
        i += take;
        continue;
      }
      this.#header[this.#headerBytes++] = chunk[i++] as number;
      if (this.#headerBytes >= 2 && this.#headerBytes === headerLength(this.#header)) this.#startFrame();
    }
  }

  #startFrame(): void {
    const h = this.#header;
    const masked = ((h[1] as number) & 0x80) !== 0;
    const short = (h[1] as number) & 0x7f;
    let length: number;
    let at = 2;
    if (short === 126) {
      length = h.readUInt16BE(2);
      at = 4;
    } else if (short === 127) {
      length = Number(h.readBigUInt64BE(2));
      at = 10;
    } else {
      length = short;
    }
    this.#mask = masked ? Buffer.from(h.subarray(at, at + 4)) : null;
    this.#isClose = ((h[0] as number) & 0x0f) === 0x8;
    if (this.#isClose) {
      this.closed = true;
      this.#codeBytes = [];
    }
    this.#headerBytes = 0;
    this.#skip = length;
    this.#offset = 0;
  }

  #readCode(chunk: Buffer, start: number, take: number): void {
    for (let k = 0; k < take && this.#offset + k < 2; k++) {
      const position = this.#offset + k;
      const byte =
        (chunk[start + k] as number) ^ (this.#mask === null ? 0 : (this.#mask[position % 4] as number));
      this.#codeBytes.push(byte);
    }
    if (this.#codeBytes.length === 2)
      this.code = ((this.#codeBytes[0] as number) << 8) | (this.#codeBytes[1] as number);
  }
}

/** Header size once its first two bytes are known: base, extended length, masking key. */
function headerLength(h: Buffer): number {
  const short = (h[1] as number) & 0x7f;
  const extended = short === 126 ? 2 : short === 127 ? 8 : 0;
  return 2 + extended + (((h[1] as number) & 0x80) !== 0 ? 4 : 0);
}

export interface TunnelOutcome {
  /** The closing handshake went both ways before the connection ended. */
  completed: boolean;
  /** The status code of the first Close frame seen, if any. */
  closeCode: number | null;
}

/**
 * Relays bytes both ways between the client's socket and the upgraded upstream socket, with
 * backpressure (pipe), a half-close passed on as such, and either side's error or abrupt close
 * tearing down the other. `onEnd` runs once, when both sockets are closed.
 */
export function relay(
  client: Duplex,
  upstream: Duplex,
  clientHead: Buffer,
  onEnd: (outcome: TunnelOutcome) => void,
): { destroy(): void } {
  const fromClient = new CloseFrameWatcher();
  const fromUpstream = new CloseFrameWatcher();
  let closedSockets = 0;
  const closed = () => {
    if (++closedSockets < 2) return;
    onEnd({
      completed: fromClient.closed && fromUpstream.closed,
      closeCode: fromClient.code ?? fromUpstream.code,
    });
  };
  const tearDown = () => {
    client.destroy();
    upstream.destroy();
  };
  for (const [from, to, watcher] of [
    [client, upstream, fromClient],
    [upstream, client, fromUpstream],
  ] as const) {
    from.on('data', (chunk: Buffer) => watcher.push(chunk));
    from.on('error', tearDown);
    // Closed without a FIN (reset, destroyed): the other side must not wait for more.
    from.on('close', () => {
      if (!from.readableEnded || !to.writableEnded) to.destroy();
    });
    from.once('close', closed);
    from.pipe(to);
  }
  if (clientHead.length > 0) {
    fromClient.push(clientHead);
    upstream.write(clientHead);
  }
  return { destroy: tearDown };
}
