/**
 * Route lookup in time independent of the number of routes (docs/routing.md, "How a request finds its
 * route"): a Map of host key → that host's prefix map, and per host a Map of prefix → route.
 *
 * A prefix `p` matches a path when `path === p`, or when `path` starts with `p` and the next character
 * is `/` (segment boundary), or when `p` is the root `/`. So the only prefixes that can match are the
 * path itself and each `path.slice(0, i)` where `path[i] === '/'`: walking those from the longest to
 * the shortest and asking the Map for each gives the longest match with one Map lookup per path
 * segment, whatever the size of the table. Slices longer than the host's longest prefix are skipped
 * without being made, so the common one-prefix-per-host table allocates nothing per request.
 *
 * This is exactly the earlier longest-first scan (`scanMatch` below, kept as the specification the
 * unit tests compare against on random tables): same boundaries, same DEFAULT fallback (only for a
 * host key that is not configured at all), and host keys are used as given (canonical, see
 * routing/normalise).
 */
import { conditionsHold, type MatchRequest } from './conditions.ts';
import { DEFAULT_HOST } from './normalise.ts';
import type { Route } from './types.ts';

const SLASH = 0x2f;

/**
 * What one host + path holds: a route, or (only where some route of that path has conditions, see
 * routing/conditions) the ordered routes whose first holding one wins. An array is never built for
 * routes without conditions, so their lookup stays one Map read.
 */
type Slot = Route | readonly Route[];

/** One host's prefixes. */
interface HostRoutes {
  /** The routes these maps were built from (a later build keeps the maps while they are the same). */
  readonly routes: readonly Route[];
  readonly byPrefix: ReadonlyMap<string, Slot>;
  /** The route of `/` (it matches every path), if the host has one. */
  readonly root: Slot | null;
  /** Length of the host's longest prefix: no longer slice of a path can match. */
  readonly longest: number;
  /** Paths that match only themselves (an Ingress `pathType: Exact`), or null when the host has none. */
  readonly exact: ReadonlyMap<string, Slot> | null;
}

export type RouteMatcher = (
  host: string,
  path: string,
  request?: MatchRequest,
  query?: string,
  secure?: boolean,
) => Route | null;

/**
 * The route of a slot for this request: the first whose conditions hold, or null when none does.
 * A plain request for a path that only HTTPS listeners serve (conditions `secure: true`, `toHttps`)
 * gets that route when nothing else of the path holds: the to-https stage redirects it to HTTPS
 * (docs/gateway-api.md#gateways), it is never served in plain text.
 */
function pick(slot: Slot, request: MatchRequest | undefined, query: string, secure: boolean): Route | null {
  if (!Array.isArray(slot)) return slot as Route;
  let toHttps: Route | null = null;
  for (const route of slot as readonly Route[]) {
    const conditions = route.conditions;
    if (!conditions || conditionsHold(conditions, request, query, secure)) return route;
    if (
      toHttps === null &&
      !secure &&
      route.toHttps &&
      conditions.secure === true &&
      conditionsHold(conditions, request, query, true)
    )
      toHttps = route;
  }
  return toHttps;
}

/** Adds a route to a slot map: the first unconditional route of a key wins, as before. */
function addTo(map: Map<string, Slot>, key: string, route: Route): void {
  const slot = map.get(key);
  if (slot === undefined) {
    map.set(key, route.conditions ? [route] : route);
    return;
  }
  const list = Array.isArray(slot) ? (slot as Route[]) : [slot as Route];
  // Behind an unconditional route nothing is ever reached: keep the first, as for plain routes.
  if (list.some((item) => !item.conditions)) return;
  list.push(route);
  map.set(key, list);
}

/**
 * Builds the matcher for `routes` (each route's hostKey and prefix already normalised, unique). With
 * the matcher of the previous table, a host whose routes are the very same objects in the same order
 * keeps its prefix maps (routes are frozen): a change rebuilds only the hosts it touched.
 */
export function buildMatcher(routes: readonly Route[], previous: RouteMatcher | null = null): RouteMatcher {
  const before = previous === null ? undefined : builtHosts.get(previous)?.hosts;
  const hosts = new Map<string, HostRoutes>();
  let wildcards = false;
  for (const [hostKey, hostRoutes] of groupByHost(routes)) {
    if (hostKey.startsWith('*.')) wildcards = true;
    const kept = before?.get(hostKey);
    hosts.set(
      hostKey,
      kept !== undefined && sameRoutes(kept.routes, hostRoutes) ? kept : hostMaps(hostRoutes),
    );
  }
  return matcherOf(hosts, wildcards);
}

/**
 * The matcher of `previous` with the given hosts' routes replaced (a host key given no routes is
 * left out): what buildMatcher would give for the table with those hosts changed, at the cost of
 * those hosts (and one copy of the host map). Null when `previous` was not made here.
 */
export function withHostsRebuilt(
  previous: RouteMatcher,
  changed: Iterable<readonly [hostKey: string, routes: readonly Route[]]>,
): RouteMatcher | null {
  const before = builtHosts.get(previous);
  if (before === undefined) return null;
  const hosts = new Map(before.hosts);
  // A wildcard key once there only makes lookups try wildcards: the answers stay the same.
  let wildcards = before.wildcards;
  for (const [hostKey, routes] of changed) {
    if (hostKey.startsWith('*.')) wildcards = true;
    if (routes.length === 0) hosts.delete(hostKey);
    else hosts.set(hostKey, hostMaps(routes));
  }
  return matcherOf(hosts, wildcards);
}

/** The match function over per-host maps. */
function matcherOf(hosts: ReadonlyMap<string, HostRoutes>, wildcards: boolean): RouteMatcher {
  const defaultRoutes = hosts.get(DEFAULT_HOST);

  /**
   * A Gateway API wildcard host key (`*.example.com`) covers names with at least one more label
   * (docs/gateway-api.md#routes); the longest suffix wins. Only tables that have one look.
   */
  const wildcardFor = (host: string): HostRoutes | undefined => {
    for (let dot = host.indexOf('.'); dot > 0; dot = host.indexOf('.', dot + 1)) {
      const found = hosts.get(`*${host.slice(dot)}`);
      if (found !== undefined) return found;
    }
    return undefined;
  };

  const match: RouteMatcher = function match(
    host: string,
    path: string,
    request?: MatchRequest,
    query = '',
    secure = false,
  ): Route | null {
    // A host that is configured but has no matching prefix gets null (404), not the DEFAULT routes:
    // like an nginx server block, a host key owns its whole namespace (docs/routing.md).
    const candidates = hosts.get(host) ?? (wildcards ? wildcardFor(host) : undefined) ?? defaultRoutes;
    if (candidates === undefined) return null;
    const { byPrefix, longest } = candidates;
    // An exact path is the longest match there is (the Ingress rule: Exact before Prefix).
    if (candidates.exact !== null) {
      const slot = candidates.exact.get(path);
      const route = slot === undefined ? null : pick(slot, request, query, secure);
      if (route !== null) return route;
    }
    if (byPrefix.size > 0) {
      if (path.length <= longest) {
        const slot = byPrefix.get(path);
        const route = slot === undefined ? null : pick(slot, request, query, secure);
        if (route !== null) return route;
      }
      // Each `/` at index i ≥ 1 ends a candidate prefix path[0, i); start at the last one within reach.
      let end = path.lastIndexOf('/', Math.min(longest, path.length - 1));
      while (end > 0) {
        const slot = byPrefix.get(path.slice(0, end));
        const route = slot === undefined ? null : pick(slot, request, query, secure);
        if (route !== null) return route;
        end = path.lastIndexOf('/', end - 1);
      }
    }
    return candidates.root === null ? null : pick(candidates.root, request, query, secure);
  };
  builtHosts.set(match, { hosts, wildcards });
  return match;
}

/** Each matcher's hosts: what the next buildMatcher or withHostsRebuilt may keep. */
const builtHosts = new WeakMap<
  RouteMatcher,
  { hosts: ReadonlyMap<string, HostRoutes>; wildcards: boolean }
>();

function sameRoutes(a: readonly Route[], b: readonly Route[]): boolean {
  if (a.length !== b.length) return false;
  for (let index = 0; index < a.length; index++) if (a[index] !== b[index]) return false;
  return true;
}

/** One host's lookup maps. */
function hostMaps(hostRoutes: readonly Route[]): HostRoutes {
  const byPrefix = new Map<string, Slot>();
  const roots = new Map<string, Slot>();
  let longest = 0;
  let exact: Map<string, Slot> | null = null;
  for (const route of hostRoutes) {
    if (route.exact) {
      exact ??= new Map();
      addTo(exact, route.prefix, route);
      continue;
    }
    // The scan returned a one-character prefix (only `/` is possible) for every path, whatever it
    // held: keep that as the fallback rather than a map entry.
    if (route.prefix.length === 1) addTo(roots, '/', route);
    else addTo(byPrefix, route.prefix, route);
    if (route.prefix.length > longest) longest = route.prefix.length;
  }
  return { routes: hostRoutes, byPrefix, root: roots.get('/') ?? null, longest, exact };
}

/**
 * The linear longest-prefix scan the matcher replaces: the specification it must agree with. Not used
 * on the request path; the unit tests compare the two on random tables.
 */
export function scanMatcher(routes: readonly Route[]): RouteMatcher {
  const byHost = groupByHost(routes);
  for (const list of byHost.values()) list.sort((a, b) => b.prefix.length - a.prefix.length);
  const defaultRoutes = byHost.get(DEFAULT_HOST);
  return (host, path) => {
    const candidates = byHost.get(host) ?? defaultRoutes;
    if (candidates === undefined) return null;
    const exact = candidates.find((route) => route.exact && route.prefix === path);
    if (exact !== undefined) return exact;
    for (const route of candidates) {
      if (route.exact) continue;
      const prefix = route.prefix;
      if (prefix.length === 1) return route;
      if (
        path.startsWith(prefix) &&
        (path.length === prefix.length || path.charCodeAt(prefix.length) === SLASH)
      ) {
        return route;
      }
    }
    return null;
  };
}

/** The routes of each host key, in config order. */
function groupByHost(routes: readonly Route[]): Map<string, Route[]> {
  const byHost = new Map<string, Route[]>();
  for (const route of routes) {
    const list = byHost.get(route.hostKey);
    if (list === undefined) byHost.set(route.hostKey, [route]);
    else list.push(route);
  }
  return byHost;
}
