import { createHash } from 'node:crypto';
import type { PathConfig, ServerAddress } from '../config/types.ts';
import type { UpstreamServer, UpstreamTransport } from './types.ts';

/**
 * The opaque id of an upstream server: derived from the configured address only, so every replica with
 * the same config computes the same id (sticky cookies keep working across replicas and restarts),
 * while the cookie never reveals the address itself.
 */
export function upstreamServerId(rawAddress: string): string {
  return createHash('sha256').update(`tollgate-server:${rawAddress}`).digest('hex').slice(0, 16);
}

/** `http://host:port` (or `https://` for a TLS server), with an IPv6 host bracketed. */
export function upstreamOrigin(address: ServerAddress, tls = address.tls === true): string {
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  return `${tls ? 'https' : 'http'}://${host}:${address.port}`;
}

/**
 * How this path's servers are dialled (docs/traffic.md#tls-to-upstreams): TLS when the server is
 * written `https://` (or, for a `service:` path, when `upstream_tls` is set), with the path's settings.
 */
export function upstreamTransport(
  path: Partial<Pick<PathConfig, 'upstreamTls' | 'upstreamProtocol' | 'service' | 'timeouts' | 'canary'>>,
  address: ServerAddress,
): UpstreamTransport {
  const protocol = path.upstreamProtocol ?? 'auto';
  const settings = path.upstreamTls ?? null;
  const tls = address.tls === true || ((path.service != null || path.canary != null) && settings !== null);
  const tlsSettings = tls
    ? Object.freeze({
        caFile: settings?.caFile ?? null,
        serverName: settings?.serverName ?? address.host.toLowerCase(),
        certificateFile: settings?.certificateFile ?? null,
        keyFile: settings?.keyFile ?? null,
        verify: settings?.verify ?? true,
        ...(settings?.inline ? { inline: Object.freeze({ ...settings.inline }) } : {}),
      })
    : null;
  // Pool keys name Secret material by digest: the PEM (a private key) stays out of map keys.
  const keyed =
    tlsSettings?.inline != null
      ? {
          ...tlsSettings,
          inline: createHash('sha256').update(JSON.stringify(tlsSettings.inline)).digest('hex'),
        }
      : tlsSettings;
  const connectTimeoutMs = path.timeouts?.connectMs ?? null;
  return Object.freeze({
    tls: tlsSettings,
    protocol,
    // Only when set, so the pool keys of paths without it stay as they were.
    ...(connectTimeoutMs === null ? {} : { connectTimeoutMs }),
    key: JSON.stringify(connectTimeoutMs === null ? [protocol, keyed] : [protocol, keyed, connectTimeoutMs]),
  });
}

/** A new frozen UpstreamServer; compile shares one per address and transport across routes. */
export function upstreamServerFor(
  address: ServerAddress,
  transport: UpstreamTransport = upstreamTransport({}, address),
): UpstreamServer {
  const origin = upstreamOrigin(address, transport.tls !== null);
  return Object.freeze({
    id: upstreamServerId(address.raw),
    address: address.raw,
    origin,
    transport,
    poolKey: `${origin} ${transport.key}`,
  });
}
