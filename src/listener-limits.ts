import type http from 'node:http';
import type { Http2SecureServer } from 'node:http2';
import type { AddressInfo, Server } from 'node:net';
import {
  ADMIN_CONNECTIONS,
  applyClientLimits,
  openFileLimit,
  safeConnectionCap,
  TOKEN_API_CONNECTIONS,
} from './client-limits.ts';
import type { ListenAddress, MainConfig } from './config/types.ts';
import { listen } from './listen.ts';

/**
 * Bounds what clients can hold on every listener (docs/security.md): silent connections, stalled
 * bodies, and connection counts, with the admin and token API caps kept apart so probes and reloads
 * still work while the proxy port is flooded. Each plane passes the listeners it owns.
 */
export function applyListenerLimits(
  main: MainConfig,
  servers: {
    proxyServer?: http.Server | null;
    tlsServer?: Http2SecureServer | null;
    tokenApiServer?: http.Server | null;
    adminServer?: http.Server | null;
  },
): void {
  const timeouts = {
    firstByteMs: main.timeouts.clientFirstByteMs,
    bodyIdleMs: main.timeouts.clientBodyIdleMs,
  };
  const proxyConnections = safeConnectionCap(
    main.maxClientConnections,
    openFileLimit(),
    servers.tlsServer ? 2 : 1,
  );
  if (servers.proxyServer)
    applyClientLimits(servers.proxyServer, { ...timeouts, maxConnections: proxyConnections });
  if (servers.tlsServer)
    applyClientLimits(servers.tlsServer, { ...timeouts, maxConnections: proxyConnections }, true);
  // A worker of a primary has neither, and the primary no proxy listener (docs/workers.md).
  if (servers.tokenApiServer)
    applyClientLimits(servers.tokenApiServer, { ...timeouts, maxConnections: TOKEN_API_CONNECTIONS });
  // The admin listener evicts held connections at ADMIN_CONNECTIONS itself (admin/server.ts); this
  // is the hard ceiling behind it.
  if (servers.adminServer)
    applyClientLimits(servers.adminServer, { ...timeouts, maxConnections: ADMIN_CONNECTIONS * 2 });
}

/** Binds `server` and returns the address actually bound (port 0 becomes the kernel's choice). */
export async function listenOn(
  server: Server,
  address: ListenAddress,
  key: string,
  reusePort = false,
): Promise<ListenAddress> {
  await listen(server, address, key, { reusePort });
  const { port } = server.address() as AddressInfo;
  return { host: address.host, port };
}
