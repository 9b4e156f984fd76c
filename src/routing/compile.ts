import { type ServiceRef, serviceRefText } from '../config/service-ref.ts';
import type { HostConfig, PathConfig, ServerAddress, UpstreamsConfig } from '../config/types.ts';
import { compileBackendPolicies, routeAddresses } from './backend-policies.ts';
import { compileHeaderRules } from './header-rules.ts';
import { configIdentity } from './identity.ts';
import { buildMatcher, withHostsRebuilt } from './match.ts';
import { DEFAULT_HOST } from './normalise.ts';
import { compileRoutePolicy } from './policies.ts';
import { upstreamServerFor, upstreamTransport } from './servers.ts';
import { forEachRouteServer, recordTableChange } from './table-change.ts';
import type { Route, RouteMirror, RoutingTable, UpstreamServer, UpstreamTransport } from './types.ts';

export { DEFAULT_HOST };

/**
 * Compiles a validated UpstreamsConfig into the immutable RoutingTable the hot path uses. Everything a
 * request needs is resolved here, once per (re)load: normalised prefixes, effective auth (global
 * wins), to_https, rate limit, sticky settings and shared server objects. The result and everything
 * reachable from it is frozen, so a request holding a reference to it can never see it change.
 *
 * With the table `previous`, a change costs what changed (docs/kubernetes.md): when every
 * config-wide setting a route reads is the same object as in the config `previous` came from, a
 * host that is the very same object as then keeps all its routes (while every endpoint answer they
 * were built from is the same), a changed host keeps the routes of its unchanged path objects, and
 * the matcher is rebuilt for the changed hosts only (routing/match).
 */
export function compileRoutingTable(
  config: UpstreamsConfig,
  endpoints: EndpointLookup = noEndpoints,
  previous: RoutingTable | null = null,
): RoutingTable {
  const prior = previous === null ? undefined : compiledTables.get(previous);
  const reusable = prior !== undefined && sameSettings(prior.config, config) ? prior : null;
  // The endpoints `previous` was compiled with, when the lookup says they are all still the same.
  const snapshot = endpoints.snapshot?.();
  const sameAnswers = reusable !== null && snapshot !== undefined && reusable.snapshot === snapshot;
  const answersHold = (route: Route) => sameAnswers || sameEndpoints(route, endpoints);
  // Copies are made per source object (configs are never changed once made), so a later compile
  // may start from this one's: a kept route and a new one then share the global policy's copy.
  const frozenCopies: FrozenCopies = reusable?.frozenCopies ?? new WeakMap();
  // The table's servers by key, made when a new route needs one: the kept routes' servers first
  // (`previous`'s, taken over: ServerIndex), so that a new route naming the same address and
  // transport shares them (one connection pool per server).
  let serverMap: ServerIndex | null = null;
  const servers = () => {
    if (serverMap === null)
      serverMap = reusable !== null && previous !== null ? takeServerIndex(previous) : newServerIndex();
    return serverMap.byKey;
  };
  const globalAuth = frozenCopy(config.authorization, frozenCopies);
  const sticky = frozenCopy(config.stickySessions, frozenCopies);

  const compileHost = (host: HostConfig, ids: Map<string, number>, before: CompiledHost | null) => {
    const hostKey = host.name;
    // A route is kept only for the very same path object, with the same id and the same endpoint
    // answers; a path object named twice (the same content on one host) is compiled anew: ids tell
    // them apart.
    let byPath: Map<PathConfig, Route> | null = null;
    if (before !== null) {
      byPath = new Map();
      before.host.paths.forEach((path, index) => {
        if (byPath?.has(path)) byPath.delete(path);
        else byPath?.set(path, before.routes[index] as Route);
      });
    }
    const routes: Route[] = [];
    for (const path of host.paths) {
      const prefix = path.prefix;
      const exact = path.exact === true;
      // An exact route's label ends in `$`, so `/a` exact and `/a` prefix stay two series. Gateway
      // API routes may share a host and path, told apart by conditions: each keeps its own label.
      const id = uniqueId(ids, hostKey + prefix + (exact ? '$' : ''));
      const kept = byPath?.get(path);
      if (kept !== undefined && kept.id === id && kept.hostKey === hostKey && answersHold(kept)) {
        routes.push(kept);
        continue;
      }
      routes.push(compileRoute(path, id, hostKey));
    }
    return routes;
  };

  const compileRoute = (path: PathConfig, id: string, hostKey: string): Route => {
    const { lookup: recorded, answers } = recordingLookups(endpoints);
    const { addresses, canaryFrom } = routeAddresses(path, recorded);
    const serverOf = (address: ServerAddress) =>
      sharedServer(address, upstreamTransport(path, address), servers());
    const route: Route = Object.freeze({
      id,
      hostKey,
      prefix: path.prefix,
      exact: path.exact === true,
      unavailable: path.unavailable ?? null,
      conditions: path.conditions ? frozenCopy(path.conditions, frozenCopies) : null,
      backendError: path.backendError ?? null,
      backendErrorShare: path.backendErrorShare ?? null,
      requestRedirect: path.requestRedirect ? frozenCopy(path.requestRedirect, frozenCopies) : null,
      retry: path.retry ? frozenCopy(path.retry, frozenCopies) : null,
      servers: Object.freeze(addresses.map(serverOf)),
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
      mirrors: mirrorsOf(path, recorded, serverOf),
      ...compileBackendPolicies(path, addresses, canaryFrom),
    });
    endpointsUsed.set(route, answers);
    return route;
  };

  // Validation already normalised every host key and prefix (routing/normalise) and refused
  // duplicates with their line numbers, so compiling is assembly only and cannot fail. Ids are
  // counted per host key: a key has no `/` and a prefix starts with one, so two host keys never
  // make the same id.
  const hosts: CompiledHost[] = [];
  const idsByHost = new Map<string, Map<string, number>>();
  // The same host keys at the same positions as `previous` (nearly every change): the names it
  // repeats are the same, and the matcher is `previous`'s with the changed hosts rebuilt.
  const aligned = reusable !== null && sameNames(reusable.hosts, config.hosts);
  const repeated = aligned ? reusable.repeated : repeatedNames(config.hosts);
  const changed: number[] = [];
  config.hosts.forEach((host, position) => {
    let before: CompiledHost | null = null;
    if (reusable !== null && !repeated.has(host.name) && !reusable.repeated.has(host.name)) {
      const at = reusable.hosts[position];
      before = at !== undefined && at.host === host ? at : (hostsByName(reusable).get(host.name) ?? null);
    }
    if (before !== null && before.host === host && (sameAnswers || hostEndpointsSame(before, endpoints))) {
      hosts.push(before);
      return;
    }
    changed.push(position);
    let ids = idsByHost.get(host.name);
    if (ids === undefined) {
      ids = new Map();
      idsByHost.set(host.name, ids);
    }
    hosts.push({ host, routes: Object.freeze(compileHost(host, ids, before)) });
  });
  if (aligned && reusable !== null) carryServicesIndex(reusable, config, changed);
  return assemble(config, config.hash, hosts, frozenCopies, repeated, snapshot, {
    previous,
    changed: aligned && repeated.size === 0 ? changed : null,
    servers: serverMap,
  });
}

/** One host of a compiled table: the host object and its routes, index for index with its paths. */
interface CompiledHost {
  readonly host: HostConfig;
  readonly routes: readonly Route[];
}

type FrozenCopies = WeakMap<object, unknown>;

/** What a later compile or recompileServers may start from, per table. */
interface Compiled {
  /** The config object the table was compiled from. */
  readonly config: UpstreamsConfig;
  /** One per host of the config, in its order. */
  readonly hosts: readonly CompiledHost[];
  /** The host keys the config names more than once (validation refuses them): never kept whole. */
  readonly repeated: ReadonlySet<string>;
  readonly frozenCopies: FrozenCopies;
  /** The endpoint lookup's snapshot the routes were built with (EndpointLookup), if it told. */
  readonly snapshot: object | undefined;
  /** Each host key's compiled host; made when first asked. */
  byName?: ReadonlyMap<string, CompiledHost>;
  /** How many times its routes name each server (serverCount); made when first asked, then handed on. */
  serverUses?: Map<UpstreamServer, number> | undefined;
  /** Its servers by serverKey (and maybe some of older tables'); made when first asked. */
  serverIndex?: ServerIndex | undefined;
  /** Where each host's routes start in the table's `routes` (flatRoutes); never changed once made. */
  readonly offsets: Int32Array;
}

const compiledTables = new WeakMap<RoutingTable, Compiled>();

function hostsByName(compiled: Compiled): ReadonlyMap<string, CompiledHost> {
  compiled.byName ??= new Map(compiled.hosts.map((host) => [host.host.name, host]));
  return compiled.byName;
}

/** The same host keys in the same order. */
function sameNames(compiled: readonly CompiledHost[], hosts: readonly HostConfig[]): boolean {
  if (compiled.length !== hosts.length) return false;
  for (let index = 0; index < hosts.length; index++)
    if (compiled[index]?.host.name !== hosts[index]?.name) return false;
  return true;
}

/**
 * The table of compiled hosts: routes in config order, the distinct servers in the order routes first
 * use them (the same for a compile from scratch, one that kept routes and recompileServers). The
 * matcher is `previous`'s with the `changed` positions' hosts rebuilt when the caller knows the host
 * keys are the same, unrepeated, in the same order; else built anew, keeping each host whose routes
 * are the same objects (routing/match).
 */
function assemble(
  config: UpstreamsConfig,
  sourceHash: string,
  hosts: readonly CompiledHost[],
  frozenCopies: FrozenCopies,
  repeated: ReadonlySet<string>,
  snapshot: object | undefined,
  from: {
    previous: RoutingTable | null;
    changed: readonly number[] | null;
    /** The server index the compile used, if it took one (ServerIndex). */
    servers?: ServerIndex | null;
  },
): RoutingTable {
  const { routes, offsets } = flatRoutes(hosts, from.previous, from.changed);
  // Longest-prefix lookup by host and path segments, independent of the table's size (routing/match).
  const { previous, changed } = from;
  const match =
    (previous !== null &&
      changed !== null &&
      withHostsRebuilt(
        previous.match,
        changed.map((position) => {
          const compiled = hosts[position] as CompiledHost;
          return [compiled.host.name, compiled.routes] as const;
        }),
      )) ||
    buildMatcher(routes, previous?.match ?? null);
  let tableServers: readonly UpstreamServer[] | undefined;
  const table: RoutingTable = Object.freeze({
    get hash() {
      return identityOf(config);
    },
    sourceHash,
    routes,
    // Made when first read (the pools' load, the TLS files to watch, a full retainOnly): an edit or
    // an endpoint change has nothing that reads every server (routing/table-change).
    get servers() {
      tableServers ??= serversOf(routes);
      return tableServers;
    },
    match,
  });
  // The index goes on with this table: the compile's, or `previous`'s when it has one.
  const serverIndex =
    from.servers ??
    (previous !== null && compiledTables.get(previous)?.serverIndex !== undefined
      ? takeServerIndex(previous)
      : undefined);
  compiledTables.set(table, { config, hosts, repeated, frozenCopies, snapshot, serverIndex, offsets });
  if (previous !== null && changed !== null) recordChange(table, previous, hosts, changed);
  return table;
}

/**
 * The table's routes, host after host in config order, and where each host's routes start in them
 * (offsets[i] for hosts[i], the last entry the count). When only the `changed` positions differ
 * from `previous` and each of them holds as many routes as before (an edit renames or changes paths
 * far more often than it adds some), `previous`'s frozen array is copied and those hosts' routes
 * written over their slots: one flat copy instead of a walk of every host (docs/benchmark.md,
 * "Control plane at scale"), with the same array as a result.
 */
function flatRoutes(
  hosts: readonly CompiledHost[],
  previous: RoutingTable | null,
  changed: readonly number[] | null,
): { routes: readonly Route[]; offsets: Int32Array } {
  const prior = previous === null ? undefined : compiledTables.get(previous);
  const offsets = prior?.offsets;
  if (
    previous !== null &&
    prior !== undefined &&
    offsets !== undefined &&
    changed !== null &&
    prior.hosts.length === hosts.length &&
    offsets.length === hosts.length + 1 &&
    offsets[hosts.length] === previous.routes.length &&
    changed.every(
      (position) =>
        (hosts[position] as CompiledHost).routes.length ===
        (prior.hosts[position] as CompiledHost).routes.length,
    )
  ) {
    const routes = previous.routes.slice();
    for (const position of changed) {
      let at = offsets[position] as number;
      for (const route of (hosts[position] as CompiledHost).routes) routes[at++] = route;
    }
    return { routes: Object.freeze(routes), offsets };
  }
  const routes: Route[] = [];
  const starts = new Int32Array(hosts.length + 1);
  hosts.forEach((compiled, position) => {
    starts[position] = routes.length;
    for (const route of compiled.routes) routes.push(route);
  });
  starts[hosts.length] = routes.length;
  return { routes: Object.freeze(routes), offsets: starts };
}

/**
 * The routes that left and arrived between `previous` and `table`, found in the `changed` positions
 * alone (every other position holds the same compiled host in both): the swap listeners follow the
 * change from it (routing/table-change).
 */
function recordChange(
  table: RoutingTable,
  previous: RoutingTable,
  hosts: readonly CompiledHost[],
  changed: readonly number[],
): void {
  const before = compiledTables.get(previous)?.hosts;
  if (before === undefined || before.length !== hosts.length) return;
  const gone: Route[] = [];
  const arrived: Route[] = [];
  for (const position of [...changed].sort((a, b) => a - b)) {
    const old = (before[position] as CompiledHost).routes;
    const now = (hosts[position] as CompiledHost).routes;
    if (old === now) continue;
    const kept = new Set(now);
    for (const route of old) if (!kept.has(route)) gone.push(route);
    const held = new Set(old);
    for (const route of now) if (!held.has(route)) arrived.push(route);
  }
  recordTableChange(table, { previous, gone, arrived });
  // The server counts go on with the table, moved by the change alone.
  const prior = compiledTables.get(previous);
  const compiled = compiledTables.get(table);
  const uses = prior?.serverUses;
  if (prior === undefined || compiled === undefined || uses === undefined) return;
  prior.serverUses = undefined;
  for (const route of gone) forEachRouteServer(route, (server) => lowerUse(uses, server));
  for (const route of arrived)
    forEachRouteServer(route, (server) => uses.set(server, (uses.get(server) ?? 0) + 1));
  compiled.serverUses = uses;
}

function lowerUse(uses: Map<UpstreamServer, number>, server: UpstreamServer): void {
  const count = (uses.get(server) ?? 0) - 1;
  if (count > 0) uses.set(server, count);
  else uses.delete(server);
}

/**
 * How many distinct servers the table's routes name (`servers.length`), without listing them: from
 * counts handed from table to table and moved by each change (the rebuild's log line reads it).
 */
export function serverCount(table: RoutingTable): number {
  const compiled = compiledTables.get(table);
  if (compiled === undefined) return table.servers.length;
  if (compiled.serverUses === undefined) {
    const uses = new Map<UpstreamServer, number>();
    for (const route of table.routes)
      forEachRouteServer(route, (server) => uses.set(server, (uses.get(server) ?? 0) + 1));
    compiled.serverUses = uses;
  }
  return compiled.serverUses.size;
}

/** The distinct servers of the routes, in the order routes first use them (mirrors' after their route's own). */
function serversOf(routes: readonly Route[]): readonly UpstreamServer[] {
  const used = new Set<UpstreamServer>();
  const servers: UpstreamServer[] = [];
  const use = (server: UpstreamServer) => {
    if (used.has(server)) return;
    used.add(server);
    servers.push(server);
  };
  for (const route of routes) {
    for (const server of route.servers) use(server);
    for (const mirror of route.mirrors ?? []) for (const server of mirror.servers) use(server);
  }
  return Object.freeze(servers);
}

/** Every config-wide setting a route reads is the same object (or value) in both configs. */
function sameSettings(before: UpstreamsConfig, config: UpstreamsConfig): boolean {
  return (
    before.authorization === config.authorization &&
    before.stickySessions === config.stickySessions &&
    before.toHttps === config.toHttps &&
    before.rateLimit === config.rateLimit &&
    before.authFailureLimit === config.authFailureLimit &&
    before.requestHeaders === config.requestHeaders &&
    before.responseHeaders === config.responseHeaders &&
    before.maxBodyBytes === config.maxBodyBytes
  );
}

/** The host keys a config names more than once (validation refuses them; a raw config may not). */
function repeatedNames(hosts: readonly HostConfig[]): ReadonlySet<string> {
  const seen = new Set<string>();
  const repeated = new Set<string>();
  for (const host of hosts) {
    if (seen.has(host.name)) repeated.add(host.name);
    seen.add(host.name);
  }
  return repeated;
}

/** `id`, or `id#2`, `id#3`... for the second and later routes with that label on the host. */
function uniqueId(ids: Map<string, number>, id: string): string {
  const seen = (ids.get(id) ?? 0) + 1;
  ids.set(id, seen);
  return seen === 1 ? id : `${id}#${seen}`;
}

/** Every route of the host was built from the endpoint answers given now. */
function hostEndpointsSame(compiled: CompiledHost, endpoints: EndpointLookup): boolean {
  for (const route of compiled.routes) if (!sameEndpoints(route, endpoints)) return false;
  return true;
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
  if (answers === undefined) return false;
  for (const { ref, found } of answers) if (endpoints(ref) !== found) return false;
  return true;
}

const serverKey = (server: UpstreamServer) => `${server.address} ${server.transport.key}`;

/**
 * Server objects by serverKey: every server of the table it belongs to, and possibly servers of the
 * tables before it that left since. Any of them serves a new route as well as a fresh one (frozen,
 * the same address and transport), and one object per key is what every route of the table uses.
 * Handed from a table to the next one compiled from it (takeServerIndex), so that an edit does not
 * index every server again; made again once it has grown to twice its size (amortised: that costs
 * what the additions did).
 */
interface ServerIndex {
  readonly byKey: Map<string, UpstreamServer>;
  /** Past this size it is made again from the servers of the table then. */
  readonly limit: number;
}

function newServerIndex(servers: readonly UpstreamServer[] = []): ServerIndex {
  const byKey = new Map(servers.map((server) => [serverKey(server), server]));
  return { byKey, limit: 2 * byKey.size + 64 };
}

/** `table`'s server index, taken from it (a later compile from `table` makes its own again). */
function takeServerIndex(table: RoutingTable): ServerIndex {
  const compiled = compiledTables.get(table);
  const index = compiled?.serverIndex;
  if (compiled !== undefined) compiled.serverIndex = undefined;
  return index !== undefined && index.byKey.size <= index.limit ? index : newServerIndex(table.servers);
}

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

/**
 * The Services whose endpoints changed, as keys, and the key of a reference (the caller's: the
 * Kubernetes source resolves a reference's namespace). References with one key name one Service.
 */
export interface ChangedServices {
  readonly keys: ReadonlySet<string>;
  readonly keyOf: (ref: ServiceRef) => string;
}

/**
 * The table compileRoutingTable(config, endpoints) would give when only the endpoints of the
 * Services `changed` names differ from those `previous` was compiled with: the routes of those
 * Services get their new servers (and weights), every other route is kept as it was, and the matcher
 * is rebuilt for the hosts of the changed routes only (routing/match). The hosts naming a Service
 * are found through an index made once per config object (Service key → host positions), so an
 * endpoint change costs what it touches, not the whole config again (docs/kubernetes.md); the
 * identity stays (endpoints are not config). Null when `previous` was not compiled from this very
 * config object: the caller compiles in full.
 */
export function recompileServers(
  previous: RoutingTable,
  config: UpstreamsConfig,
  endpoints: EndpointLookup,
  changed: ChangedServices,
): RoutingTable | null {
  const compiled = compiledTables.get(previous);
  if (compiled === undefined || compiled.config !== config) return null;
  const index = servicesIndex(config, changed.keyOf);
  const touched = new Set<number>();
  for (const key of changed.keys) for (const position of index.get(key) ?? []) touched.add(position);
  const isChanged = (ref: ServiceRef) => changed.keys.has(changed.keyOf(ref));
  let serverIndex: ServerIndex | null = null;
  const hosts =
    touched.size === 0
      ? compiled.hosts
      : compiled.hosts.map((host, position) => {
          if (!touched.has(position)) return host;
          const routes = host.host.paths.map((path, at) => {
            const before = host.routes[at] as Route;
            if (!pathRefs(path).some(isChanged)) return before;
            // Every endpoint answer this route is built from, mirrors' included: a later compile
            // reuses the route only while each answer is still the same (compileRoutingTable).
            const { lookup, answers } = recordingLookups(endpoints);
            const { addresses, canaryFrom } = routeAddresses(path, lookup);
            serverIndex ??= takeServerIndex(previous);
            const servers = serverIndex.byKey;
            const serverOf = (address: ServerAddress) =>
              sharedServer(address, upstreamTransport(path, address), servers);
            const route: Route = Object.freeze({
              ...before,
              servers: Object.freeze(addresses.map(serverOf)),
              mirrors: mirrorsOf(path, lookup, serverOf),
              ...compileBackendPolicies(path, addresses, canaryFrom),
            });
            endpointsUsed.set(route, answers);
            return route;
          });
          return { host: host.host, routes: Object.freeze(routes) };
        });
  // Every Service whose answer differs from the ones `previous` was built with is in `changed` (the
  // caller's contract): the table stands for the lookup's snapshot now.
  return assemble(
    config,
    previous.sourceHash,
    hosts,
    compiled.frozenCopies,
    compiled.repeated,
    endpoints.snapshot?.(),
    {
      previous,
      changed: compiled.repeated.size === 0 ? [...touched] : null,
      servers: serverIndex,
    },
  );
}

/**
 * The Services of a path: its `service:`, a canary's and its mirrors' (whose endpoints it is built
 * from; sources/kubernetes/use.ts pathServiceRefs lists the same for the watches).
 */
function pathRefs(path: PathConfig): ServiceRef[] {
  const refs: ServiceRef[] = [];
  if (path.service) refs.push(path.service);
  if (path.canary?.service) refs.push(path.canary.service);
  for (const mirror of path.mirrors ?? []) refs.push(mirror.service);
  return refs;
}

/** Service key → the positions (in config.hosts) of the hosts naming it; made once per config and keyOf. */
function servicesIndex(
  config: UpstreamsConfig,
  keyOf: (ref: ServiceRef) => string,
): ReadonlyMap<string, readonly number[]> {
  const known = servicesIndexes.get(config);
  if (known !== undefined && known.keyOf === keyOf) return known.index;
  const index = new Map<string, number[]>();
  config.hosts.forEach((host, position) => {
    for (const key of hostServiceKeys(host, keyOf)) {
      const positions = index.get(key);
      if (positions === undefined) index.set(key, [position]);
      else if (positions[positions.length - 1] !== position) positions.push(position);
    }
  });
  servicesIndexes.set(config, { keyOf, index });
  return index;
}

/**
 * The Services index of a config whose hosts are those of `prior`'s config but at the `changed`
 * positions, made from `prior`'s index when it has one (recompileServers made it): taken over from
 * it with the changed hosts' entries moved (not copied: an edit then costs its hosts, not every
 * Service), so that the next endpoint change does not index every path again. `prior`'s config is
 * left without one: an endpoint change against that older table indexes it again (servicesIndex).
 */
function carryServicesIndex(prior: Compiled, config: UpstreamsConfig, changed: readonly number[]): void {
  const known = servicesIndexes.get(prior.config);
  if (known === undefined) return;
  const { keyOf } = known;
  servicesIndexes.delete(prior.config);
  const index = known.index;
  for (const position of changed) {
    const before = hostServiceKeys((prior.hosts[position] as CompiledHost).host, keyOf);
    const after = hostServiceKeys(config.hosts[position] as HostConfig, keyOf);
    if (before === after) continue;
    for (const key of before) {
      const positions = (index.get(key) ?? []).filter((item) => item !== position);
      if (positions.length === 0) index.delete(key);
      else index.set(key, positions);
    }
    for (const key of after) {
      const positions = index.get(key) ?? [];
      if (!positions.includes(position)) index.set(key, [...positions, position]);
    }
  }
  servicesIndexes.set(config, { keyOf, index });
}

const servicesIndexes = new WeakMap<
  UpstreamsConfig,
  { keyOf: (ref: ServiceRef) => string; index: Map<string, readonly number[]> }
>();

/** The Service keys a host's paths name, kept per host object (hosts are never changed once made). */
function hostServiceKeys(host: HostConfig, keyOf: (ref: ServiceRef) => string): readonly string[] {
  const known = hostKeys.get(host);
  if (known !== undefined && known.keyOf === keyOf) return known.keys;
  const keys = host.paths.flatMap((path) => pathRefs(path).map(keyOf));
  hostKeys.set(host, { keyOf, keys });
  return keys;
}

const hostKeys = new WeakMap<HostConfig, { keyOf: (ref: ServiceRef) => string; keys: readonly string[] }>();

/**
 * The ready servers of a `service:` reference, as the Kubernetes source last saw them
 * (docs/kubernetes.md). Passing the same answers gives the same table: compile stays pure.
 */
export type EndpointLookup = ((ref: ServiceRef) => readonly ServerAddress[]) & {
  /**
   * The version of every answer: while it returns the same object, every reference gets the same
   * answer (the same array) as before, so a compile keeps routes without asking again. Absent: each
   * kept route's answers are asked again.
   */
  readonly snapshot?: () => object;
};

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
