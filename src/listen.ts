import type { Server } from 'node:net';
import type { ListenAddress } from './config/types.ts';

/** `0.0.0.0:8080`, `[::1]:9090` — how an address is shown in messages. */
export function formatAddress(address: ListenAddress): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

/** The `addresses` field of the ready and waiting-for-sync log lines: every bound listener. */
export function boundAddressesField(bound: {
  proxy: ListenAddress;
  proxyTls: ListenAddress | null;
  api: ListenAddress;
  admin: ListenAddress;
}): Record<string, string> {
  return {
    proxy: formatAddress(bound.proxy),
    ...(bound.proxyTls ? { proxy_tls: formatAddress(bound.proxyTls) } : {}),
    api: formatAddress(bound.api),
    admin: formatAddress(bound.admin),
  };
}

/**
 * Binds a server, turning the usual failures into one clear line naming the config key
 * (e.g. "cannot listen on 0.0.0.0:8080 (proxy_address_http): address already in use").
 */
export function listen(
  server: Server,
  address: ListenAddress,
  key: string,
  options: { reusePort?: boolean } = {},
): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      const reason =
        error.code === 'EADDRINUSE'
          ? 'address already in use'
          : error.code === 'EACCES'
            ? 'permission denied (ports below 1024 need privileges)'
            : error.code === 'EADDRNOTAVAIL'
              ? 'no such local address'
              : error.message;
      reject(new Error(`cannot listen on ${formatAddress(address)} (${key}): ${reason}`));
    };
    server.once('error', onError);
    // reusePort: workers each bind the same port and the kernel spreads connections (docs/workers.md).
    server.listen({ host: address.host, port: address.port, reusePort: options.reusePort }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
