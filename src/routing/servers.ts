import { createHash } from 'node:crypto';
import type { ServerAddress } from '../config/types.ts';
import type { UpstreamServer } from './types.ts';

/**
 * The opaque id of an upstream server: derived from the configured address only, so every replica with
 * the same config computes the same id (sticky cookies keep working across replicas and restarts),
 * while the cookie never reveals the address itself.
 */
export function upstreamServerId(rawAddress: string): string {
  return createHash('sha256').update(`tollgate-server:${rawAddress}`).digest('hex').slice(0, 16);
}

/** `http://host:port`, with an IPv6 host bracketed: the key of the server's connection pool. */
export function upstreamOrigin(address: ServerAddress): string {
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  return `http://${host}:${address.port}`;
}

/** A new frozen UpstreamServer; compile shares one per address across routes. */
export function upstreamServerFor(address: ServerAddress): UpstreamServer {
  return Object.freeze({
    id: upstreamServerId(address.raw),
    address: address.raw,
    origin: upstreamOrigin(address),
  });
}
