import type { PathConfig, ServerAddress, UpstreamsConfig } from '../config/types.ts';
import { normaliseHost, normaliseTarget } from './normalise.ts';
import { upstreamServerFor } from './servers.ts';
import type { Route, RoutingTable, UpstreamServer } from './types.ts';

/** The host key that catches requests whose Host matches no other key. */
export const DEFAULT_HOST = 'DEFAULT';

/**
 * A config that validation let through but that cannot be compiled unambiguously (two host keys or
 * two prefixes that normalise to the same thing, a prefix that is not a path). The loader reports it
 * like any other config error: at start the process exits, on reload the previous table stays.
 */
export class RoutingCompileError extends Error {
  override name = 'RoutingCompileError';
}

/**
 * Compiles a validated UpstreamsConfig into the immutable RoutingTable the hot path uses. Everything a
 * request needs is resolved here, once per (re)load: normalised prefixes, effective auth (global
 * wins), to_https, rate limit, sticky settings and shared server objects. The result and everything
 * reachable from it is frozen, so a request holding a reference to it can never see it change.
 */
export function compileRoutingTable(config: UpstreamsConfig): RoutingTable {
  const servers = new Map<string, UpstreamServer>();
  const frozenCopies = new Map<object, unknown>();
  const routes: Route[] = [];
  const routesByHost = new Map<string, readonly Route[]>();

  const globalAuth = frozenCopy(config.authorization, frozenCopies);
  const sticky = frozenCopy(config.stickySessions, frozenCopies);

  for (const host of config.hosts) {
    const hostKey = normaliseHostKey(host.name);
    if (routesByHost.has(hostKey)) {
      throw new RoutingCompileError(`host "${host.name}" is a second definition of host "${hostKey}"`);
    }
    const hostRoutes: Route[] = [];
    for (const path of host.paths) {
      const prefix = normalisePrefix(path.prefix, hostKey);
      if (hostRoutes.some((route) => route.prefix === prefix)) {
        throw new RoutingCompileError(
          `path "${path.prefix}" of host "${hostKey}" is a second definition of prefix "${prefix}"`,
        );
      }
      const route: Route = Object.freeze({
        id: hostKey + prefix,
        hostKey,
        prefix,
        servers: Object.freeze(path.servers.map((address) => sharedServer(address, servers))),
        // seed §5 rule 4: a global authorization replaces every per-path one, on every host.
        auth: globalAuth ?? frozenCopy(path.authorization, frozenCopies),
        toHttps: config.toHttps || path.toHttps,
        rateLimit: path.rateLimit ?? config.rateLimit ?? null,
        sticky,
        healthCheck: frozenCopy(path.healthCheck, frozenCopies),
      });
      hostRoutes.push(route);
      routes.push(route);
    }
    // Longest first, so the first prefix that matches during the scan is the longest match.
    hostRoutes.sort((a, b) => b.prefix.length - a.prefix.length);
    routesByHost.set(hostKey, Object.freeze(hostRoutes));
  }

  const defaultRoutes = routesByHost.get(DEFAULT_HOST);

  function match(host: string, path: string): Route | null {
    // A host that is configured but has no matching prefix gets null (404), not the DEFAULT routes:
    // like an nginx server block, a host key owns its whole namespace, so adding `DEFAULT` to a
    // config never changes what an existing host serves.
    const candidates = routesByHost.get(host) ?? defaultRoutes;
    if (candidates === undefined) return null;
    for (const route of candidates) {
      const prefix = route.prefix;
      if (prefix.length === 1) return route; // '/', the shortest, matches everything
      if (
        path.startsWith(prefix) &&
        (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f) // segment boundary
      ) {
        return route;
      }
    }
    return null;
  }

  return Object.freeze({
    hash: config.hash,
    routes: Object.freeze(routes),
    servers: Object.freeze([...servers.values()]),
    match,
  });
}

/** One frozen UpstreamServer per configured address, so routes naming it share a connection pool. */
function sharedServer(address: ServerAddress, servers: Map<string, UpstreamServer>): UpstreamServer {
  let server = servers.get(address.raw);
  if (server === undefined) {
    server = upstreamServerFor(address);
    servers.set(address.raw, server);
  }
  return server;
}

/**
 * Host keys go through the same normaliser as request Host headers, so `API.example.com.` in the config
 * matches `api.example.com:8080` on the wire. IPv6 keys may be written with or without brackets.
 */
function normaliseHostKey(name: string): string {
  if (name === DEFAULT_HOST) return DEFAULT_HOST;
  const bareIPv6 = name.indexOf(':') !== name.lastIndexOf(':') && !name.startsWith('[');
  const key = normaliseHost(bareIPv6 ? `[${name}]` : name);
  if (key === null) throw new RoutingCompileError(`host "${name}" is not a valid host name`);
  return key;
}

/**
 * A path key in the form request paths take after normalisation, without a trailing slash (except the
 * root), so `/v1/` and `/v1` are the same prefix and matching is a plain string comparison.
 */
export function normalisePrefix(prefix: PathConfig['prefix'], hostKey = ''): string {
  const where = hostKey === '' ? `path "${prefix}"` : `path "${prefix}" of host "${hostKey}"`;
  if (prefix.includes('?')) throw new RoutingCompileError(`${where} contains "?"`);
  // YAML gives Unicode text; clients send UTF-8 percent-encoded, so encode the same way first.
  let ascii: string;
  try {
    ascii = prefix.replace(/[\u0080-\uffff]+/g, encodeURIComponent);
  } catch {
    throw new RoutingCompileError(`${where} is not valid Unicode`); // a lone surrogate
  }
  const normalised = normaliseTarget(ascii);
  if (!normalised.ok) throw new RoutingCompileError(`${where} is not a valid path (${normalised.reason})`);
  const path = normalised.path;
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
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
