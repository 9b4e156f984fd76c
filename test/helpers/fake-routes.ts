import type { Route, RoutingTable, UpstreamServer } from '../../src/routing/types.ts';

/**
 * Frozen Route / RoutingTable / UpstreamServer values for unit tests of modules that consume a
 * compiled table (balance, sticky, health) without going through config parsing and compilation.
 */
const PLAIN = Object.freeze({ tls: null, protocol: 'auto' as const, key: 'plain' });

export function fakeServer(address: string, id = `id-${address}`): UpstreamServer {
  const origin = `http://${address}`;
  return Object.freeze({ id, address, origin, transport: PLAIN, poolKey: origin });
}

export function fakeRoute(fields: Partial<Route> & Pick<Route, 'id' | 'servers'>): Route {
  const [hostKey = fields.id, prefix = '/'] = fields.id.split(/(?=\/)/);
  return Object.freeze({
    hostKey,
    prefix,
    exact: false,
    unavailable: null,
    service: null,
    auth: null,
    toHttps: false,
    rateLimit: null,
    sticky: null,
    healthCheck: null,
    redirectTo: null,
    authFailureLimit: null,
    requestHeaders: null,
    responseHeaders: null,
    ...fields,
    servers: Object.freeze([...fields.servers]),
  });
}

export function fakeTable(routes: Route[], hash = 'test'): RoutingTable {
  const servers = [...new Set(routes.flatMap((route) => route.servers))];
  return Object.freeze({ hash, sourceHash: hash, routes, servers, match: () => null });
}
