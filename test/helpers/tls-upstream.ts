import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { SelfSigned } from './certs.ts';

/** What a TLS or HTTP/2 test upstream saw of one request, echoed back as JSON. */
export interface SeenRequest {
  server: string;
  method: string;
  url: string;
  /** `1.1` or `2.0`. */
  httpVersion: string;
  /** The ALPN protocol of the connection (`h2`, `http/1.1`), or false/null when none (or plain). */
  alpn: string | false | null;
  /** The SNI name the client sent, or null. */
  sni: string | null;
  /** The client certificate's CN when one was presented and verified (mTLS), else null. */
  clientCn: string | null;
  headers: http.IncomingHttpHeaders;
}

export interface ProtocolUpstream {
  port: number;
  /** `https://127.0.0.1:port` for TLS servers, `127.0.0.1:port` for plain (h2c) ones. */
  address: string;
  seen: SeenRequest[];
  close(): Promise<void>;
}

export interface ProtocolUpstreamOptions {
  name?: string;
  /** TLS certificate; absent = plain (h2c prior knowledge when `h2`). */
  tls?: SelfSigned;
  /** Speak HTTP/2 (over TLS: offered by ALPN beside http/1.1 unless `h2Only`). */
  h2?: boolean;
  h2Only?: boolean;
  /** Require a client certificate signed by this CA (mTLS). */
  clientCa?: Buffer;
  /** Replaces the JSON echo (after the body was read). */
  handler?: (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ) => void;
}

/**
 * A real upstream speaking HTTPS, HTTP/2 over TLS (ALPN) or h2c, that echoes what it saw: protocol,
 * ALPN, SNI and the client certificate, so a test sees exactly how Tollgate dialled it.
 */
export async function startProtocolUpstream(options: ProtocolUpstreamOptions): Promise<ProtocolUpstream> {
  const seen: SeenRequest[] = [];
  let name = options.name ?? '';
  const onRequest = async (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ) => {
    for await (const _chunk of req) {
      // drained: the echo only reports what arrived
    }
    const socket = req.socket as TLSSocket;
    const peer = typeof socket.getPeerCertificate === 'function' ? socket.getPeerCertificate() : null;
    const record: SeenRequest = {
      server: name,
      method: req.method ?? '',
      url: req.url ?? '',
      httpVersion: req.httpVersion,
      alpn: socket.alpnProtocol ?? null,
      sni: (socket as TLSSocket & { servername?: string | false }).servername || null,
      clientCn: peer && socket.authorized && peer.subject ? String(peer.subject.CN) : null,
      headers: req.headers as http.IncomingHttpHeaders,
    };
    seen.push(record);
    if (options.handler) {
      options.handler(req, res);
      return;
    }
    const body = JSON.stringify(record);
    (res as http.ServerResponse).writeHead(200, { 'content-type': 'application/json' });
    res.end(body);
  };
  const mtls = options.clientCa ? { requestCert: true, rejectUnauthorized: true, ca: options.clientCa } : {};
  let server: http.Server | https.Server | http2.Http2Server | http2.Http2SecureServer;
  if (options.tls && options.h2) {
    server = http2.createSecureServer(
      { cert: options.tls.cert, key: options.tls.key, allowHTTP1: !options.h2Only, ...mtls },
      onRequest,
    );
  } else if (options.tls) {
    server = https.createServer({ cert: options.tls.cert, key: options.tls.key, ...mtls }, onRequest);
  } else if (options.h2) {
    server = http2.createServer(onRequest);
  } else {
    server = http.createServer(onRequest);
  }
  const sessions = new Set<{ destroy(): void }>();
  server.on('session', (session: http2.Http2Session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    sessions.add(socket);
    socket.on('close', () => sessions.delete(socket));
  });
  server.on('connection', (socket: { destroy(): void; on(e: string, f: () => void): void }) => {
    sessions.add(socket);
    socket.on('close', () => sessions.delete(socket));
  });
  // A client refused by mTLS or by its verification is not a test failure on this side.
  server.on('tlsClientError', () => {});
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  if (!name) name = `upstream-${port}`;
  return {
    port,
    address: options.tls ? `https://127.0.0.1:${port}` : `127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const session of sessions) session.destroy();
      }),
  };
}
