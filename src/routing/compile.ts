import { type ServiceRef, serviceRefText } from '../config/service-ref.ts';
import type { ServerAddress, UpstreamsConfig } from '../config/types.ts';
import { compileBackendPolicies, routeAddresses } from './backend-policies.ts';
import { compileHeaderRules } from './header-rules.ts';
import { configIdentity } from './identity.ts';
import { buildMatcher } from './match.ts';
import { DEFAULT_HOST } from './normalise.ts';
import { compileRoutePolicy } from './policies.ts';
import { upstreamServerFor, upstreamTransport } from './servers.ts';
import type { Route, RoutingTable, UpstreamServer, UpstreamTransport } from './types.ts';

export { DEFAULT_HOST };

/**
 * Compiles a validated UpstreamsConfig into the immutable RoutingTable the hot path uses. Everything a
 * request needs is resolved here, once per (re)load: normalised prefixes, effective auth (global
 * wins), to_https, rate limit, sticky settings and shared server objects. The result and everything
 * reachable from it is frozen, so a request holding a reference to it can never see it change.
 */
export function compileRoutingTable(
  config: UpstreamsConfig,
  endpoints: EndpointLookup = noEndpoints,
): RoutingTable {
  const servers = new Map<string, UpstreamServer>();
  const frozenCopies = new Map<object, unknown>();
  const routes: Route[] = [];
  // Gateway API routes may share a host and path, told apart by conditions: each keeps its own label.
  const ids = new Map<string, number>();
  const uniqueId = (id: string) => {
    const seen = (ids.get(id) ?? 0) + 1;
    ids.set(id, seen);
    return seen === 1 ? id : `${id}#${seen}`;
  };

  const globalAuth = frozenCopy(config.authorization, frozenCopies);
  const sticky = frozenCopy(config.stickySessions, frozenCopies);

  // Validation already normalised every host key and prefix (routing/normalise) and refused
  // duplicates with their line numbers, so compiling is assembly only and cannot fail.
  for (const host of config.hosts) {
    const hostKey = host.name;
    for (const path of host.paths) {
      const prefix = path.prefix;
      const exact = path.exact === true;
      const { addresses, canaryFrom } = routeAddresses(path, endpoints);
      const route: Route = Object.freeze({
        // An exact route's label ends in `$`, so `/a` exact and `/a` prefix stay two series.
        id: uniqueId(hostKey + prefix + (exact ? '$' : '')),
        hostKey,
        prefix,
        exact,
        unavailable: path.unavailable ?? null,
        conditions: path.conditions ? frozenCopy(path.conditions, frozenCopies) : null,
        backendError: path.backendError ?? null,
        backendErrorShare: path.backendErrorShare ?? null,
        requestRedirect: path.requestRedirect ? frozenCopy(path.requestRedirect, frozenCopies) : null,
        servers: Object.freeze(
          addresses.map((address) => sharedServer(address, upstreamTransport(path, address), servers)),
        ),
        service: path.service ? serviceRefText(path.service) : null,
        // A global authorization replaces every per-path one, on every host (docs/configuration.md).
        auth: globalAuth ?? frozenCopy(path.authorization, frozenCopies),
        toHttps: config.toHttps || path.toHttps,
        rateLimit: path.rateLimit ?? config.rateLimit ?? null,
        sticky: path.stickySessions ? frozenCopy(path.stickySessions, frozenCopies) : sticky,
        healthCheck: frozenCopy(path.healthCheck, frozenCopies),
        redirectTo: path.redirectTo,
        authFailureLimit: path.authFailureLimit ?? config.authFailureLimit ?? null,
        requestHeaders: compileHeaderRules(config.requestHeaders, path.requestHeaders),
        canaryRequestHeaders:
          path.canary?.requestHeaders != null
            ? compileHeaderRules(config.requestHeaders, path.canary.requestHeaders)
            : null,
        responseHeaders: compileHeaderRules(config.responseHeaders, path.responseHeaders),
        policy: compileRoutePolicy(path.policies, config.maxBodyBytes ?? null),
        ...compileBackendPolicies(path, addresses, canaryFrom),
      });
      routes.push(route);
    }
  }

  // Longest-prefix lookup by host and path segments, independent of the table's size (routing/match).
  const match = buildMatcher(routes);

  return Object.freeze({
    hash: configIdentity(config),
    sourceHash: config.hash,
    routes: Object.freeze(routes),
    servers: Object.freeze([...servers.values()]),
    match,
  });
}

/**
 * The ready servers of a `service:` reference, as the Kubernetes source last saw them
 * (docs/kubernetes.md). Passing the same answers gives the same table: compile stays pure.
 */
export type EndpointLookup = (ref: ServiceRef) => readonly ServerAddress[];

const noEndpoints: EndpointLookup = () => [];

/**
 * One frozen UpstreamServer per configured address and transport, so routes naming it the same way
 * share a connection pool (paths with other TLS settings or protocols get their own).
 */
function sharedServer(
  address: ServerAddress,
  transport: UpstreamTransport,
  servers: Map<string, UpstreamServer>,
): UpstreamServer {
  const key = `${address.raw} ${transport.key}`;
  let server = servers.get(key);
  if (server === undefined) {
    server = upstreamServerFor(address, transport);
    servers.set(key, server);
  }
  return server;
}

/**
 * A deep frozen copy (the config objects the caller passed in are left alone), made once per source
 * object so a global policy stays one shared object across every route.
 */
function frozenCopy<T>(value: T, copies: Map<object, unknown>): T {
  if (value === null || typeof value !== 'object') return value;
  const known = copies.get(value);
  if (known !== undefined) return known as T;
  const copy = Array.isArray(value)
    ? value.map((item) => frozenCopy(item, copies))
    : Object.fromEntries(Object.entries(value).map(([key, item]) => [key, frozenCopy(item, copies)]));
  Object.freeze(copy);
  copies.set(value, copy);
  return copy as T;
}
