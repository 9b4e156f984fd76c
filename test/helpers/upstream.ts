import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  bodyBytes: number;
  /** The header lines as they arrived (Node joins repeated `Cookie` lines in `headers`). */
  rawHeaders: string[];
}

/** What the default upstream answers: the request as it arrived (JSON). */
export interface Echo {
  url: string;
  headers: Record<string, string | undefined>;
}

/** The headers a browser sends with a top-level page load (Fetch Metadata). */
export const NAVIGATE: Readonly<Record<string, string>> = {
  'sec-fetch-mode': 'navigate',
  'sec-fetch-dest': 'document',
};

export interface Upstream {
  readonly port: number;
  /** `http://127.0.0.1:port` */
  readonly origin: string;
  /** `127.0.0.1:port`, as written in upstreams.yaml. */
  readonly address: string;
  readonly name: string;
  readonly requests: RecordedRequest[];
  readonly server: http.Server;
  close(): Promise<void>;
}

export type UpstreamHandler = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  body: Buffer,
) => void | Promise<void>;

export interface UpstreamOptions {
  /** Defaults to `upstream-<port>`. Echoed in every default response as `server`. */
  name?: string;
  /** Replaces the default echo. Called once the body has been read (unless `streaming`). */
  handler?: UpstreamHandler;
  /** Bind to this port (e.g. to bring a server back on the same address). */
  port?: number;
  host?: string;
}

/**
 * A real HTTP server on loopback that records what it received and, by default, answers JSON
 * `{server, method, url, headers, bodyBytes}` so a test can see exactly what the proxy forwarded.
 */
export async function startUpstream(options: UpstreamOptions = {}): Promise<Upstream> {
  const requests: RecordedRequest[] = [];
  let name = options.name ?? '';
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    let bodyBytes = 0;
    try {
      for await (const chunk of req) {
        bodyBytes += chunk.length;
        if (options.handler) chunks.push(chunk);
      }
    } catch {
      // The proxy abandoned the request mid-body (its client went away): nothing to answer.
      return;
    }
    const recorded = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bodyBytes };
    requests.push({ ...recorded, rawHeaders: req.rawHeaders });
    if (options.handler) {
      await options.handler(req, res, Buffer.concat(chunks));
      return;
    }
    const body = JSON.stringify({ server: name, ...recorded });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  server.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  if (!name) name = `upstream-${port}`;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    address: `127.0.0.1:${port}`,
    name,
    requests,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A loopback address where TCP connects hang (no SYN-ACK), held until `release()`. */
export interface BlackholeAddress {
  /** `127.0.0.1:port`, as written in upstreams.yaml. */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * A listener whose accept queue is full, so the kernel drops further SYNs and a connect neither
 * succeeds nor fails: what a firewalled or unplugged server looks like, on loopback. A child process
 * listens with a backlog of 1 and then blocks its event loop, so it never accepts; the two connections
 * Linux queues for that backlog are made here, and every later connect hangs.
 */
export async function blackholeAddress(): Promise<BlackholeAddress> {
  const script = `
    const net = require('node:net');
    const server = net.createServer();
    server.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
      require('node:fs').writeSync(1, server.address().port + '\\n');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    });`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  const port = Number(String(line).trim());
  const fillers: net.Socket[] = [];
  for (let i = 0; i < 2; i++) {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.on('error', () => {});
    fillers.push(socket);
    await once(socket, 'connect');
  }
  return {
    address: `127.0.0.1:${port}`,
    async close() {
      for (const socket of fillers) socket.destroy();
      child.kill('SIGKILL');
      await exited;
    },
  };
}
