import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';

export interface EchoUpstream {
  address: string;
  /** Upgrade requests as the upstream received them. */
  handshakes: Array<{ url: string; headers: http.IncomingHttpHeaders }>;
  /** Server-side sockets, in connection order. */
  sockets: WebSocket[];
  close(): Promise<void>;
}

/** A WebSocket echo server: echoes every message; `close please` makes it close the socket itself. */
export async function startEchoUpstream(): Promise<EchoUpstream> {
  const server = http.createServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain' }).end('upgrade required');
  });
  const wss = new WebSocketServer({ server });
  const handshakes: EchoUpstream['handshakes'] = [];
  const sockets: WebSocket[] = [];
  wss.on('connection', (socket, req) => {
    handshakes.push({ url: req.url ?? '', headers: req.headers });
    sockets.push(socket);
    socket.on('message', (data, isBinary) => {
      if (!isBinary && data.toString() === 'close please') socket.close(1000, 'bye');
      else socket.send(data, { binary: isBinary });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    handshakes,
    sockets,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** Opens a WebSocket through the proxy; resolves with it, or with the HTTP answer that refused it. */
export function openSocket(
  url: string,
  headers: Record<string, string>,
): Promise<{ socket: WebSocket } | { status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers });
    socket.once('open', () => resolve({ socket }));
    socket.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    socket.once('error', reject);
  });
}

export async function mustOpen(url: string, headers: Record<string, string>): Promise<WebSocket> {
  const result = await openSocket(url, headers);
  if (!('socket' in result)) assert.fail(`upgrade refused with ${result.status}: ${result.body}`);
  return result.socket;
}

export async function mustRefuse(url: string, headers: Record<string, string>) {
  const result = await openSocket(url, headers);
  if ('socket' in result) {
    result.socket.terminate();
    assert.fail('the upgrade should have been refused');
  }
  return result;
}

export async function nextMessage(socket: WebSocket): Promise<{ data: Buffer; isBinary: boolean }> {
  const [data, isBinary] = (await once(socket, 'message')) as [Buffer, boolean];
  return { data, isBinary };
}
