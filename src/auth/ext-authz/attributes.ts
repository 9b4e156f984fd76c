import { randomUUID } from 'node:crypto';
import type { ProxyRequest } from '../../request/record.ts';
import { requestTarget } from '../../request/targets.ts';
import { commonName, subjectAltNames, verifiedClientCertificate } from '../client-certificate.ts';

/**
 * The CheckRequest Tollgate sends for a request (docs/authentication.md#external-authorization), as
 * Envoy fills it: the client's address and, with a verified client certificate, its principal (URI
 * SAN, else DNS SAN, else subject, Envoy's order) and certificate (URL-encoded PEM); the method, the
 * host, the path as it goes upstream (without the token parameter), the headers (lower-case names,
 * repeated ones joined), and up to `include_body_bytes` of the body.
 */
export function checkRequest(request: ProxyRequest, body: Buffer | null): unknown {
  const { req } = request;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name.startsWith(':')) continue;
    headers[name] = Array.isArray(value) ? value.join(name === 'cookie' ? '; ' : ', ') : value;
  }
  const certificate = verifiedClientCertificate(req);
  const now = Date.now();
  const declared = req.headers['content-length'];
  const socket = socketAddresses(request);
  const sni = serverName(request);
  return {
    attributes: {
      source: {
        address: address(request.clientIp, request.clientIp === request.peerIp ? socket.remotePort : 0),
        ...(certificate === null
          ? {}
          : { principal: principalOf(certificate), certificate: encodeURIComponent(certificate.toString()) }),
      },
      destination: { address: address(socket.localAddress, socket.localPort) },
      request: {
        time: { seconds: Math.floor(now / 1000), nanos: (now % 1000) * 1_000_000 },
        http: {
          id: typeof req.headers['x-request-id'] === 'string' ? req.headers['x-request-id'] : randomUUID(),
          method: req.method ?? '',
          headers,
          path: requestTarget(request),
          host: request.rawHost,
          scheme: request.secure ? 'https' : 'http',
          size: declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : -1,
          protocol: req.httpVersionMajor === 2 ? 'HTTP/2' : `HTTP/${req.httpVersion}`,
          ...(body === null ? {} : bodyField(body)),
        },
      },
      ...(sni === null ? {} : { tls_session: { sni } }),
    },
  };
}

/** `body` (a string) as Envoy sends it, or `raw_body` for bytes that are not UTF-8. */
function bodyField(body: Buffer): { body: string } | { raw_body: Buffer } {
  try {
    return { body: new TextDecoder('utf-8', { fatal: true }).decode(body) };
  } catch {
    return { raw_body: body };
  }
}

function principalOf(certificate: NonNullable<ReturnType<typeof verifiedClientCertificate>>): string {
  const sans = subjectAltNames(certificate);
  return sans.uri[0] ?? sans.dns[0] ?? commonName(certificate) ?? certificate.subject;
}

function address(ip: string | undefined, port: number | undefined) {
  return { socket_address: { address: ip ?? '', port_value: port ?? 0 } };
}

/** As node:net's Socket has them: undefined once the socket is gone. */
interface SocketAddresses {
  remotePort?: number | undefined;
  localAddress?: string | undefined;
  localPort?: number | undefined;
}

/** Through node:http2's socket proxy too; it throws once the stream is gone. */
function socketAddresses(request: ProxyRequest): SocketAddresses {
  try {
    const { remotePort, localAddress, localPort } = request.req.socket;
    return { remotePort, localAddress, localPort };
  } catch {
    return {};
  }
}

function serverName(request: ProxyRequest): string | null {
  try {
    const name = (request.req.socket as { servername?: unknown }).servername;
    return typeof name === 'string' && name !== '' ? name : null;
  } catch {
    return null;
  }
}
