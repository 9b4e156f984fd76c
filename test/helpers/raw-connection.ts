import { once } from 'node:events';
import net from 'node:net';

/** A plain TCP connection to a loopback port, for tests that write HTTP by hand and watch the socket. */
export interface RawConnection {
  readonly socket: net.Socket;
  /** Settles when the socket closes, whoever closed it. */
  readonly closed: Promise<unknown>;
  /** Everything received so far, as UTF-8. */
  received(): string;
  /** Resolves with all received once `marker` has arrived `count` times; rejects if the socket closes first. */
  responses(marker: string, count?: number): Promise<string>;
}

export async function connectRaw(port: number, host = '127.0.0.1'): Promise<RawConnection> {
  const socket = net.connect(port, host);
  await once(socket, 'connect');
  let received = '';
  socket.setEncoding('utf8').on('data', (d: string) => {
    received += d;
  });
  const closed = once(socket, 'close');
  return {
    socket,
    closed,
    received: () => received,
    responses: (marker, count = 1) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (received.split(marker).length - 1 >= count) resolve(received);
        };
        socket.on('data', check);
        socket.once('close', () => reject(new Error(`closed after: ${received}`)));
        check();
      }),
  };
}
