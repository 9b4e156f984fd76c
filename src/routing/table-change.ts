import type { Route, RoutingTable, UpstreamServer } from './types.ts';

/**
 * What a table changed from the table it was made from (routing/compile): the routes that left and
 * the routes that arrived, as objects. Every other route is the very same object in both tables,
 * servers included (tables are frozen). Whoever follows the live table (health, pools, the response
 * cache, the watched TLS files) can then do what the change asks, not walk every route on every
 * swap (docs/benchmark.md, "Control plane at scale").
 */
export interface TableChange {
  /** The table this one was made from. */
  readonly previous: RoutingTable;
  /** Routes of `previous` this table does not hold, in table order. */
  readonly gone: readonly Route[];
  /** Routes of this table that `previous` does not hold, in table order. */
  readonly arrived: readonly Route[];
}

const changes = new WeakMap<RoutingTable, TableChange>();

/**
 * Records how `table` differs from `change.previous`. The previous table's own record is dropped, so
 * a chain of tables never keeps older tables alive: a follower that missed a table compares whole.
 */
export function recordTableChange(table: RoutingTable, change: TableChange): void {
  changes.delete(change.previous);
  changes.set(table, change);
}

/**
 * How `table` differs from `from`, when it was made from that very table (or is it); null otherwise (a reload
 * from scratch, a table made elsewhere, a table skipped): the caller then compares the whole tables.
 */
export function changeFrom(table: RoutingTable, from: RoutingTable): TableChange | null {
  if (table === from) return { previous: from, gone: [], arrived: [] };
  const change = changes.get(table);
  return change !== undefined && change.previous === from ? change : null;
}

/**
 * For a follower of the live table that reads only the routes `concerns` picks (the TLS files, the
 * jwks_file list, the `verify: false` log): a function telling, for each table, whether that reading
 * may have changed since the table it was given last. False only when the table was made from that
 * one and no route that left or arrived is of concern: the same such routes, in the same order.
 */
export function concernChanges(concerns: (route: Route) => boolean): (table: RoutingTable) => boolean {
  let seen: RoutingTable | null = null;
  return (table) => {
    const change = seen === null ? null : changeFrom(table, seen);
    seen = table;
    return change === null || change.gone.some(concerns) || change.arrived.some(concerns);
  };
}

/** Every server a route dials: its own, then its mirrors' (a table's `servers` are those of its routes). */
export function forEachRouteServer(route: Route, use: (server: UpstreamServer) => void): void {
  for (const server of route.servers) use(server);
  for (const mirror of route.mirrors ?? []) for (const server of mirror.servers) use(server);
}
