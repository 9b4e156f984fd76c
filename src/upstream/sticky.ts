import type { StickySessions } from '../config/types.ts';
import type { Route, RoutingTable, UpstreamServer } from '../routing/types.ts';

/**
 * The sticky-session cookie (docs/traffic.md "Sticky sessions"). Its value names servers by
 * `UpstreamServer.id`, which is derived from the configured address, so every replica with the same
 * config reads it the same way and the client never learns an IP.
 *
 * The cookie is `Path=/`, so one host's routes share it. Routes with different server sets would
 * otherwise overwrite each other's choice on every switch; the value is therefore a `.`-separated
 * list holding at most one id per route of the host, and each route reads the first id that is one
 * of its servers. With a single route (the usual case) it is exactly one id.
 */
export const STICKY_COOKIE = 'tollgate_sticky';

const SEPARATOR = '.';
const NAME_EQUALS = `${STICKY_COOKIE}=`;

/**
 * The ids carried by every `tollgate_sticky` cookie in a Cookie header, in order; [] when absent.
 * A substring search, not a full cookie parser: this runs on every request of a sticky route.
 */
export function readStickyIds(cookieHeader: string | undefined): string[] {
  if (cookieHeader === undefined || cookieHeader.length === 0) return [];
  const ids: string[] = [];
  let from = 0;
  for (;;) {
    const at = cookieHeader.indexOf(NAME_EQUALS, from);
    if (at === -1) return ids;
    from = at + NAME_EQUALS.length;
    // `my_tollgate_sticky=` is someone else's cookie: the name must start a cookie-pair.
    const before = at === 0 ? ';' : cookieHeader[at - 1];
    if (before !== ';' && before !== ' ' && before !== '\t') continue;
    const end = cookieHeader.indexOf(';', from);
    let value = cookieHeader.slice(from, end === -1 ? undefined : end).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (!value.includes(SEPARATOR)) {
      if (value.length > 0) ids.push(value);
    } else for (const id of value.split(SEPARATOR)) if (id.length > 0) ids.push(id);
  }
}

/** The route's server named by the first id that belongs to it, or null. */
export function pinnedServer(route: Route, ids: readonly string[]): UpstreamServer | null {
  for (const id of ids) {
    for (const server of route.servers) if (server.id === id) return server;
  }
  return null;
}

/**
 * The new cookie value after `route` chose `chosen`: the chosen id first, then the ids the client
 * holds for OTHER routes, dropping ids of this route and ids the table no longer knows (so stale
 * entries disappear and the value stays as short as the host's route count).
 */
export function stickyValue(
  chosen: UpstreamServer,
  previousIds: readonly string[],
  route: Route,
  knownIds: ReadonlySet<string>,
): string {
  if (previousIds.length === 0) return chosen.id;
  const kept = [chosen.id];
  for (const id of previousIds) {
    if (kept.includes(id) || !knownIds.has(id)) continue;
    if (route.servers.some((server) => server.id === id)) continue;
    kept.push(id);
  }
  return kept.join(SEPARATOR);
}

/** The Set-Cookie value. `Secure` only over TLS, or a plain-HTTP client would never send it back. */
export function stickySetCookie(value: string, sticky: StickySessions, secure: boolean): string {
  let cookie = `${STICKY_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax`;
  if (sticky.maxAgeSeconds !== null) cookie += `; Max-Age=${sticky.maxAgeSeconds}`;
  if (secure) cookie += '; Secure';
  return cookie;
}

const idsByTable = new WeakMap<RoutingTable, ReadonlySet<string>>();

/** Every server id of a table, computed once per table (only needed when a cookie is rewritten). */
export function knownServerIds(table: RoutingTable): ReadonlySet<string> {
  let ids = idsByTable.get(table);
  if (ids === undefined) {
    ids = new Set(table.servers.map((server) => server.id));
    idsByTable.set(table, ids);
  }
  return ids;
}
