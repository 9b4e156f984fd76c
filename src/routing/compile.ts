import { type ServiceRef, serviceRefText } from '../config/service-ref.ts';
import type { PathConfig, ServerAddress, UpstreamsConfig } from '../config/types.ts';
import { compileBackendPolicies, routeAddresses } from './backend-policies.ts';
import { compileHeaderRules } from './header-rules.ts';
import { configIdentity } from './identity.ts';
import { buildMatcher } from './match.ts';
import { DEFAULT_HOST } from './normalise.ts';
import { compileRoutePolicy } from './policies.ts';
import { upstreamServerFor, upstreamTransport } from './servers.ts';
import type { Route, RouteMirror, RoutingTable, UpstreamServer, UpstreamTransport } from './types.ts';

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
  previous: RoutingTable | null = null,
): RoutingTable {
  const servers = new Map<string, UpstreamServer>();
  const reusable = reusableRoutes(previous, config);
  // Copies are made per source object (configs are never changed once made), so a later compile
  // may start from this one's: a kept route and a new one then share the global policy's copy.
  const frozenCopies: FrozenCopies = reusable?.frozenCopies ?? new WeakMap();
  const routes: Route[] = [];
  const paths: PathConfig[] = [];
  // The routes kept from `previous` bring their server objects: seeded first, so that a new route
  // naming the same address and transport shares them (one connection pool per server).
  if (reusable !== null)
    for (const route of reusable.byPath.values())
      for (const server of route.servers) servers.set(serverKey(server), server);
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
      // An exact route's label ends in `$`, so `/a` exact and `/a` prefix stay two series.
      const id = uniqueId(hostKey + prefix + (exact ? '$' : ''));
      paths.push(path);
      const kept = reusable?.byPath.get(path);
      if (
        kept !== undefined &&
        kept.id === id &&
        kept.hostKey === hostKey &&
        sameEndpoints(kept, endpoints)
      ) {
        routes.push(kept);
        continue;
      }
      const { lookup: recorded, answers } = recordingLookups(endpoints);
      const { addresses, canaryFrom } = routeAddresses(path, recorded);
      const route: Route = Object.freeze({
        id,
        hostKey,
        prefix,
        exact,
        unavailable: path.unavailable ?? null,
        conditions: path.conditions ? frozenCopy(path.conditions, frozenCopies) : null,
        backendError: path.backendError ?? null,
        backendErrorShare: path.backendErrorShare ?? null,
        requestRedirect: path.requestRedirect ? frozenCopy(path.requestRedirect, frozenCopies) : null,
        retry: path.retry ? frozenCopy(path.retry, frozenCopies) : null,
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
        mirrors: mirrorsOf(path, recorded, (address) =>
          sharedServer(address, upstreamTransport(path, address), servers),
        ),
        ...compileBackendPolicies(path, addresses, canaryFrom),
      });
      endpointsUsed.set(route, answers);
      routes.push(route);
    }
  }
  // A kept route's servers that no route uses any more are not the table's.
  const used = new Set(
    routes.flatMap((route) => [
      ...route.servers,
      ...(route.mirrors ?? []).flatMap((mirror) => mirror.servers),
    ]),
  );
  const tableServers = [...servers.values()].filter((server) => used.has(server));

  // Longest-prefix lookup by host and path segments, independent of the table's size (routing/match).
  const match = buildMatcher(routes);

  const table: RoutingTable = Object.freeze({
    get hash() {
      return identityOf(config);
    },
    sourceHash: config.hash,
    routes: Object.freeze(routes),
    servers: Object.freeze(tableServers),
    match,
  });
  compiledFrom.set(table, config);
  compiledPaths.set(table, { paths, frozenCopies });
  return table;
}

type FrozenCopies = WeakMap<object, unknown>;

/**
 * What a compile may keep of `previous` (docs/kubernetes.md): its routes by the path object
 * each was compiled from, when every config-wide setting a route reads is the same object as in the
 * config `previous` came from. A route is kept only for the very same path object (configs are never
 * changed once made), on the same host, with the same id, and with the same endpoint answers
 * (endpointsUsed): an unchanged Ingress or route then keeps its Route object, and the health checker,
 * which skips the routes it knows, does no work for it.
 */
function reusableRoutes(
  previous: RoutingTable | null,
  config: UpstreamsConfig,
): { byPath: Map<PathConfig, Route>; frozenCopies: FrozenCopies } | null {
  if (previous === null) return null;
  const before = compiledFrom.get(previous);
  const compiled = compiledPaths.get(previous);
  if (before === undefined || compiled === undefined) return null;
  const sameSettings =
    before.authorization === config.authorization &&
    before.stickySessions === config.stickySessions &&
    before.toHttps === config.toHttps &&
    before.rateLimit === config.rateLimit &&
    before.authFailureLimit === config.authFailureLimit &&
    before.requestHeaders === config.requestHeaders &&
    before.responseHeaders === config.responseHeaders &&
    before.maxBodyBytes === config.maxBodyBytes;
  if (!sameSettings) return null;
  const byPath = new Map<PathConfig, Route>();
  compiled.paths.forEach((path, index) => {
    // A path object named twice (the same content on one host) is compiled anew: ids tell them apart.
    if (byPath.has(path)) byPath.delete(path);
    else byPath.set(path, previous.routes[index] as Route);
  });
  return { byPath, frozenCopies: compiled.frozenCopies };
}

/** Per route: each Service it looked up and the answer it was given (recordingLookups). */
const endpointsUsed = new WeakMap<Route, ReadonlyArray<EndpointAnswer>>();

interface EndpointAnswer {
  ref: ServiceRef;
  found: readonly ServerAddress[];
}

/**
 * An endpoint lookup that records each Service asked for and the answer given, so that a later
 * compile can tell whether every answer a route was built from is still the same (sameEndpoints).
 */
function recordingLookups(endpoints: EndpointLookup): { lookup: EndpointLookup; answers: EndpointAnswer[] } {
  const answers: EndpointAnswer[] = [];
  const lookup: EndpointLookup = (ref) => {
    const found = endpoints(ref);
    answers.push({ ref, found });
    return found;
  };
  return { lookup, answers };
}

/** Every lookup a route was built from gives the same answer (the same array) now. */
function sameEndpoints(route: Route, endpoints: EndpointLookup): boolean {
  const answers = endpointsUsed.get(route);
  return answers?.every(({ ref, found }) => endpoints(ref) === found) ?? false;
}

/** The path objects each table's routes were compiled from (index for index) and its frozen copies. */
const compiledPaths = new WeakMap<
  RoutingTable,
  { paths: readonly PathConfig[]; frozenCopies: FrozenCopies }
>();

const serverKey = (server: UpstreamServer) => `${server.address} ${server.transport.key}`;

/**
 * The config identity (routing/identity), computed the first time something reads a table's `hash`
 * and kept per config object: a rebuild from Kubernetes changes does not hash the whole config
 * (a SHA-256 over its canonical form, the larger part of compiling thousands of routes) unless the
 * identity is asked for (/readyz, a reload's log line, workers), and tables of one config share it.
 */
const identities = new WeakMap<UpstreamsConfig, string>();
function identityOf(config: UpstreamsConfig): string {
  let identity = identities.get(config);
  if (identity === undefined) {
    identity = configIdentity(config);
    identities.set(config, identity);
  }
  return identity;
}

/** The config object each table was compiled from: what recompileServers may start from. */
const compiledFrom = new WeakMap<RoutingTable, UpstreamsConfig>();

/**
 * The table compileRoutingTable(config, endpoints) would give when only the endpoints of the
 * Services `changed` names differ from those `previous` was compiled with: the routes of those
 * Services get their new servers (and weights), every other route is kept as it was. An endpoint
 * change then costs what it touches, not the whole config again (docs/kubernetes.md); the identity
 * stays (endpoints are not config). Null when `previous` was not compiled from this very config
 * object: the caller compiles in full.
 */
export function recompileServers(
  previous: RoutingTable,
  config: UpstreamsConfig,
  endpoints: EndpointLookup,
  changed: (ref: ServiceRef) => boolean,
): RoutingTable | null {
  if (compiledFrom.get(previous) !== config) return null;
  // One object per address and transport, as compile makes them: the table's distinct servers by key.
  const byKey = new Map(previous.servers.map((server) => [serverKey(server), server]));
  const used = new Set<UpstreamServer>();
  const servers: UpstreamServer[] = [];
  const use = (server: UpstreamServer) => {
    if (used.has(server)) return;
    used.add(server);
    servers.push(server);
  };
  const routes: Route[] = [];
  let index = 0;
  for (const host of config.hosts) {
    for (const path of host.paths) {
      const before = previous.routes[index++] as Route;
      const affected =
        (path.service != null && changed(path.service)) ||
        (path.canary?.service != null && changed(path.canary.service)) ||
        (path.mirrors?.some((mirror) => changed(mirror.service)) ?? false);
      if (!affected) {
        for (const server of before.servers) use(server);
        for (const mirror of before.mirrors ?? []) for (const server of mirror.servers) use(server);
        routes.push(before);
        continue;
      }
      // Every endpoint answer this route is built from, mirrors' included: a later compile reuses
      // the route only while each answer is still the same (compileRoutingTable's previous).
      const { lookup, answers } = recordingLookups(endpoints);
      const { addresses, canaryFrom } = routeAddresses(path, lookup);
      const serverOf = (address: ServerAddress) => {
        const server = sharedServer(address, upstreamTransport(path, address), byKey);
        use(server);
        return server;
      };
      const routeServers = addresses.map(serverOf);
      const route: Route = Object.freeze({
        ...before,
        servers: Object.freeze(routeServers),
        mirrors: mirrorsOf(path, lookup, serverOf),
        ...compileBackendPolicies(path, addresses, canaryFrom),
      });
      endpointsUsed.set(route, answers);
      routes.push(route);
    }
  }
  const table: RoutingTable = Object.freeze({
    get hash() {
      return identityOf(config);
    },
    sourceHash: previous.sourceHash,
    routes: Object.freeze(routes),
    servers: Object.freeze(servers),
    match: buildMatcher(routes),
  });
  compiledFrom.set(table, config);
  const compiled = compiledPaths.get(previous);
  if (compiled !== undefined) compiledPaths.set(table, compiled);
  return table;
}

/**
 * The ready servers of a `service:` reference, as the Kubernetes source last saw them
 * (docs/kubernetes.md). Passing the same answers gives the same table: compile stays pure.
 */
export type EndpointLookup = (ref: ServiceRef) => readonly ServerAddress[];

const noEndpoints: EndpointLookup = () => [];

/** A path's RequestMirror Services with their ready servers now (upstream/mirror); null = none. */
function mirrorsOf(
  path: PathConfig,
  endpoints: EndpointLookup,
  serverOf: (address: ServerAddress) => UpstreamServer,
): readonly RouteMirror[] | null {
  if (path.mirrors === null || path.mirrors.length === 0) return null;
  return Object.freeze(
    path.mirrors.map((mirror) =>
      Object.freeze({
        service: serviceRefText(mirror.service),
        share: mirror.share,
        servers: Object.freeze(endpoints(mirror.service).map(serverOf)),
      }),
    ),
  );
}

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
function frozenCopy<T>(value: T, copies: FrozenCopies): T {
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
