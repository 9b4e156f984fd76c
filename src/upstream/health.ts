import { Agent, type Dispatcher } from 'undici';
import type { Logger } from '../log.ts';
import { upstreamUp } from '../observe/metrics.ts';
import { changeFrom } from '../routing/table-change.ts';
import type { Route, RoutingTable, UpstreamServer } from '../routing/types.ts';
import { type DnsCache, processDnsCache } from './dns-cache.ts';
import type { AttemptFailure } from './failure.ts';

/**
 * Which upstream servers may receive traffic (docs/traffic.md "Server health").
 *
 * Two independent signals decide it:
 * - passive, per server address: the forwarder reports every attempt. After `failureThreshold`
 *   consecutive attempts that could not reach the server (refused, unreachable, connect timeout)
 *   the address is ejected for `cooldownMs`; then it is half-open: the balance stage may claim it
 *   for ONE trial request (placed first, with healthy servers behind it for failover). A response
 *   re-admits it, another failure ejects it again. Keyed by address, not by route: a server that
 *   refuses connections does so for every route. A response timeout is no signal: it is about one
 *   slow URL, and ejecting for it would let a client take a server out for every route by calling
 *   its slowest URL.
 * - Passive health never takes a route's last server: an address no route shares with another
 *   server is never ejected (nginx's rule for a single server), and a route whose every server in
 *   rotation is passively ejected keeps them all in rotation ("panic", as Envoy's panic threshold
 *   at zero healthy hosts) until one is re-admitted.
 * - active, per route and server: when a route has `health_check`, its path is fetched on each
 *   server every `interval_seconds`; `activeFailThreshold` failed checks in a row take the server out
 *   of that route, one good check (2xx/3xx) puts it back, and also lifts a passive ejection (the
 *   server evidently accepts connections again).
 *
 * State is keyed by address and route id (host key + path key), not by object, so it survives
 * reloads as long as the server stays configured. `sync(table)` runs on every table swap.
 */
export interface ServerHealth {
  /** True while nothing is ejected anywhere: lets the balance stage skip every per-server check. */
  readonly allUp: boolean;
  /** In rotation for this route now (not ejected, not failing its active check). */
  isAvailable(route: Route, server: UpstreamServer): boolean;
  /**
   * A server of this route whose cool-down has elapsed, claimed for one trial request, or null.
   * Each call that returns a server consumes the trial: the caller must send a request to it.
   */
  claimTrial(route: Route): UpstreamServer | null;
  reportFailure(route: Route, server: UpstreamServer, failure: AttemptFailure): void;
  reportSuccess(route: Route, server: UpstreamServer): void;
  /** Adopts a new routing table: starts/stops active checkers, drops state and gauges of what is gone. */
  sync(table: RoutingTable): void;
  /** Stops every checker and closes their connections. */
  close(): Promise<void>;
}

export interface ServerHealthOptions {
  logger: Logger;
  /** Consecutive attempts that could not reach a server before it is ejected (default 3). */
  failureThreshold?: number;
  /** How long an ejected server gets no traffic before a trial request (default 10 s). */
  cooldownMs?: number;
  /** Consecutive failed active checks before a server leaves the route (default 2). */
  activeFailThreshold?: number;
  /** Upper bound of one active check (default: the route's interval, at most 2 s). */
  checkTimeoutMs?: number;
  /** Clock, injectable for tests. */
  now?: () => number;
  /** Host-name resolution for checks; the process's cache (the one proxied traffic uses) by default. */
  dns?: DnsCache;
  /**
   * The connections a server's checks use, dialled like its traffic (TLS settings, protocol); the
   * app passes UpstreamPools.checkPool. Without it, one plain agent for every server.
   */
  checkDispatcher?: (server: UpstreamServer) => Dispatcher;
}

interface PassiveState {
  consecutiveFailures: number;
  ejected: boolean;
  /** When the current ejection's cool-down ends (a trial may be claimed from then on). */
  retryAt: number;
  /** When the pending trial was handed out, or 0; a trial that never reports expires after a cool-down. */
  trialAt: number;
}

interface ActiveState {
  consecutiveFailures: number;
  down: boolean;
}

interface Checker {
  /** path + interval + host: a change of any of them restarts the checker. */
  readonly spec: string;
  readonly abort: AbortController;
  timer: NodeJS.Timeout | null;
  /** Replaced on every sync, so a checker never keeps an old table alive. */
  route: Route;
  server: UpstreamServer;
}

const pairKey = (routeId: string, address: string) => `${routeId}\n${address}`;

/**
 * Whether a route's gauges and health answers would be the same for `next` as for `before` (its
 * predecessor with the same id): the same server addresses in the same order, and a health check
 * on both or on neither. Checkers are decided apart, by path and interval.
 */
function sameGauges(before: Route, next: Route): boolean {
  if ((before.healthCheck === null) !== (next.healthCheck === null)) return false;
  if (before.servers.length !== next.servers.length) return false;
  for (let i = 0; i < before.servers.length; i++) {
    if (before.servers[i]?.address !== next.servers[i]?.address) return false;
  }
  return true;
}

export function createServerHealth(options: ServerHealthOptions): ServerHealth {
  const logger = options.logger;
  const failureThreshold = options.failureThreshold ?? 3;
  const cooldownMs = options.cooldownMs ?? 10_000;
  const activeFailThreshold = options.activeFailThreshold ?? 2;
  const now = options.now ?? Date.now;

  const passive = new Map<string, PassiveState>();
  const active = new Map<string, ActiveState>();
  const checkers = new Map<string, Checker>();
  let ejectedCount = 0;
  let activeDownCount = 0;
  /** Bumped by every change of who is ejected or down, so per-route answers can be memoised. */
  let version = 0;
  /** route → whether it has a server neither ejected nor failing its check, as of `version`. */
  const healthyMemo = new WeakMap<Route, { version: number; healthy: boolean }>();
  /** address → routes of the live table naming it, to refresh their gauges on a passive change. */
  const routesByAddress = new Map<string, Set<Route>>();
  /**
   * Gauge label sets currently exported: route id → server address → how many live routes name the
   * pair. Keyed by the ids' and addresses' own strings (hashed once each), not a joined pair key.
   */
  const exported = new Map<string, Map<string, number>>();
  let closed = false;
  // Its own connection pool, so checks never queue behind proxied traffic and close() cleans up.
  // Cached DNS like the traffic's: a busy thread pool must not fail checks of servers named by host.
  const agent = new Agent({
    connections: 1,
    pipelining: 1,
    keepAliveTimeout: 4_000,
    connect: { lookup: (options.dns ?? processDnsCache).lookup },
  });

  function passiveOf(address: string): PassiveState {
    let state = passive.get(address);
    if (state === undefined) {
      state = { consecutiveFailures: 0, ejected: false, retryAt: 0, trialAt: 0 };
      passive.set(address, state);
    }
    return state;
  }

  function activelyDown(route: Route, server: UpstreamServer): boolean {
    return route.healthCheck !== null && active.get(pairKey(route.id, server.address))?.down === true;
  }

  /** Neither ejected nor failing the route's check. */
  function isHealthy(route: Route, server: UpstreamServer): boolean {
    return passive.get(server.address)?.ejected !== true && !activelyDown(route, server);
  }

  /** The route has a healthy server; else passive ejections do not count for it (panic). */
  function hasHealthyServer(route: Route): boolean {
    const memo = healthyMemo.get(route);
    if (memo !== undefined && memo.version === version) return memo.healthy;
    const healthy = route.servers.some((server) => isHealthy(route, server));
    healthyMemo.set(route, { version, healthy });
    return healthy;
  }

  function isAvailable(route: Route, server: UpstreamServer): boolean {
    if (activelyDown(route, server)) return false;
    if (passive.get(server.address)?.ejected !== true) return true;
    // Passive health never takes a route's last server: with none healthy, the ejected are tried.
    return !hasHealthyServer(route);
  }

  function refreshGauge(route: Route, server: UpstreamServer): void {
    upstreamUp.set({ route: route.id, server: server.address }, isAvailable(route, server) ? 1 : 0);
  }

  /** Every server of every route naming `address`: an ejection can put a route's others in panic. */
  function refreshGaugesOf(address: string): void {
    for (const route of routesByAddress.get(address) ?? []) {
      for (const server of route.servers) refreshGauge(route, server);
    }
  }

  /** An address no route shares with another server: ejecting it would take nothing out. */
  function aloneEverywhere(address: string): boolean {
    const routes = routesByAddress.get(address);
    if (routes === undefined) return false; // not in the live table: an old table's straggler
    for (const route of routes) {
      if (!route.servers.every((server) => server.address === address)) return false;
    }
    return true;
  }

  function eject(address: string, state: PassiveState, kind: string, trialFailed: boolean): void {
    state.retryAt = now() + cooldownMs;
    state.trialAt = 0;
    if (state.ejected) return; // a failed trial: stays ejected, already logged
    state.ejected = true;
    ejectedCount++;
    version++;
    logger.warn(
      {
        server: address,
        kind,
        failures: state.consecutiveFailures,
        cooldown_ms: cooldownMs,
        trial: trialFailed,
      },
      'upstream server ejected',
    );
    refreshGaugesOf(address);
  }

  function readmit(address: string, state: PassiveState, via: string): void {
    state.consecutiveFailures = 0;
    state.trialAt = 0;
    if (!state.ejected) return;
    state.ejected = false;
    ejectedCount--;
    version++;
    logger.info({ server: address, via }, 'upstream server re-admitted');
    refreshGaugesOf(address);
  }

  function reportFailure(_route: Route, server: UpstreamServer, failure: AttemptFailure): void {
    // Only "the server is not there" counts; a reset, a bad answer or a slow one is about one exchange.
    if (!failure.unreachable) return;
    const state = passiveOf(server.address);
    if (state.ejected) {
      // Only the half-open trial's verdict matters; stragglers sent before the ejection do not.
      if (state.trialAt !== 0) eject(server.address, state, failure.kind, true);
      return;
    }
    state.consecutiveFailures++;
    if (state.consecutiveFailures >= failureThreshold && !aloneEverywhere(server.address))
      eject(server.address, state, failure.kind, false);
  }

  function reportSuccess(_route: Route, server: UpstreamServer): void {
    const state = passive.get(server.address);
    if (state === undefined) return; // never failed: the common case costs one map lookup
    if (state.ejected) readmit(server.address, state, 'trial request');
    else state.consecutiveFailures = 0;
  }

  function claimTrial(route: Route): UpstreamServer | null {
    if (ejectedCount === 0) return null;
    // In panic every ejected server is in rotation already: its next answer re-admits it.
    if (!hasHealthyServer(route)) return null;
    const at = now();
    for (const server of route.servers) {
      const state = passive.get(server.address);
      if (state === undefined || !state.ejected || at < state.retryAt) continue;
      // One trial at a time; a trial whose outcome never arrived (client left) expires.
      if (state.trialAt !== 0 && at - state.trialAt < cooldownMs) continue;
      if (activelyDown(route, server)) continue;
      state.trialAt = at;
      return server;
    }
    return null;
  }

  function recordCheck(route: Route, server: UpstreamServer, ok: boolean, detail: string): void {
    if (closed) return;
    const changedAt = version;
    const key = pairKey(route.id, server.address);
    let state = active.get(key);
    if (state === undefined) {
      state = { consecutiveFailures: 0, down: false };
      active.set(key, state);
    }
    if (ok) {
      state.consecutiveFailures = 0;
      const passiveState = passive.get(server.address);
      if (passiveState?.ejected) readmit(server.address, passiveState, 'health check');
      else if (passiveState !== undefined) passiveState.consecutiveFailures = 0;
      if (state.down) {
        state.down = false;
        activeDownCount--;
        version++;
        logger.info(
          { route: route.id, server: server.address, path: route.healthCheck?.path },
          'health check passes again',
        );
      }
    } else {
      state.consecutiveFailures++;
      if (!state.down && state.consecutiveFailures >= activeFailThreshold) {
        state.down = true;
        activeDownCount++;
        version++;
        logger.warn(
          { route: route.id, server: server.address, path: route.healthCheck?.path, result: detail },
          'health check fails: server out of rotation',
        );
      }
    }
    refreshGauge(route, server);
    // A change of verdict can put the route's ejected servers in panic or take them out of it.
    if (changedAt !== version) for (const other of route.servers) refreshGauge(route, other);
  }

  async function checkOnce(route: Route, server: UpstreamServer, signal: AbortSignal): Promise<void> {
    const check = route.healthCheck;
    if (check === null) return;
    const timeoutMs = options.checkTimeoutMs ?? Math.min(2_000, check.intervalSeconds * 1000);
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const dispatcher = options.checkDispatcher?.(server) ?? agent;
      const servername = server.transport.tls?.serverName;
      const response = await dispatcher.request({
        ...(servername === undefined ? {} : { servername }),
        origin: server.origin,
        method: 'GET',
        path: check.path,
        headers: {
          // Virtual-hosted upstreams may route on Host; DEFAULT has no name, so the address stands in.
          host: route.hostKey === 'DEFAULT' ? server.address : route.hostKey,
          'user-agent': 'tollgate-health-check',
        },
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.any([signal, timeout]),
      });
      await response.body.dump();
      const ok = response.statusCode >= 200 && response.statusCode < 400;
      recordCheck(route, server, ok, `status ${response.statusCode}`);
    } catch (error) {
      if (signal.aborted) return; // stopped by sync/close: not a verdict
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).name;
      recordCheck(route, server, false, timeout.aborted ? 'timeout' : String(code));
    }
  }

  function startChecker(route: Route, server: UpstreamServer, spec: string): Checker {
    const checker: Checker = { spec, abort: new AbortController(), timer: null, route, server };
    const intervalMs = (route.healthCheck?.intervalSeconds ?? 10) * 1000;
    const run = () => {
      checker.timer = null;
      void checkOnce(checker.route, checker.server, checker.abort.signal).finally(() => {
        if (checker.abort.signal.aborted) return;
        // Scheduled after the previous check ends, so a slow server never gets overlapping checks.
        checker.timer = setTimeout(run, intervalMs);
        checker.timer.unref();
      });
    };
    // The first check runs at once: a server that is down at start is known within one timeout.
    checker.timer = setTimeout(run, 0);
    checker.timer.unref();
    return checker;
  }

  function stopChecker(checker: Checker): void {
    checker.abort.abort();
    if (checker.timer !== null) clearTimeout(checker.timer);
  }

  /** The routes of the last table synced. */
  const syncedRoutes = new Set<Route>();
  /** The last table synced: a table compiled from it tells its changes (routing/table-change). */
  let syncedTable: RoutingTable | null = null;
  /** Route id → the live routes with that id (one, unless a table repeats an id). */
  const routesById = new Map<string, Set<Route>>();

  /**
   * Adopts a new table by its differences from the last one: a route object both tables hold is
   * unchanged, servers included (tables are frozen; an endpoint change keeps every other route,
   * routing/compile recompileServers; a reload keeps none). Only the routes that left or arrived
   * touch the per-address, per-pair state, so a swap costs what changed, not the ~10,000 pairs of
   * a big cluster.
   */
  function sync(table: RoutingTable): void {
    if (closed) return;
    const change = syncedTable === null ? null : changeFrom(table, syncedTable);
    syncedTable = table;
    let gone: readonly Route[];
    let arrived: readonly Route[];
    if (change !== null) {
      // Made from the table synced last: its change is the difference, without a walk of every route.
      ({ gone, arrived } = change);
    } else {
      const routes = new Set(table.routes);
      const left: Route[] = [];
      for (const route of syncedRoutes) if (!routes.has(route)) left.push(route);
      const came: Route[] = [];
      for (const route of routes) if (!syncedRoutes.has(route)) came.push(route);
      gone = left;
      arrived = came;
    }
    for (const route of gone) syncedRoutes.delete(route);
    for (const route of arrived) syncedRoutes.add(route);

    // An edit anywhere recompiles every route: an arrival with the id, servers and kind of check of
    // a route that left is its successor, with the same gauges and the same label sets.
    const succeeded = new Set<Route>();
    const successors = new Set<Route>();
    if (gone.length > 0 && arrived.length > 0) {
      const goneById = new Map<string, Route>();
      for (const route of gone) goneById.set(route.id, route);
      for (const route of arrived) {
        const before = goneById.get(route.id);
        if (before === undefined || !sameGauges(before, route)) continue;
        goneById.delete(route.id);
        succeeded.add(before);
        successors.add(route);
      }
    }

    /** Label sets no live route names any more, unless an arrival names them again. */
    const dropped: Array<{ route: string; server: string }> = [];
    /** Pairs of routes with a health check that left or arrived: their checker is decided below. */
    const checked = new Map<string, { routeId: string; address: string }>();
    for (const route of gone) {
      const sameId = routesById.get(route.id);
      sameId?.delete(route);
      if (sameId?.size === 0) routesById.delete(route.id);
      const counts = succeeded.has(route) ? undefined : exported.get(route.id);
      for (const server of route.servers) {
        const list = routesByAddress.get(server.address);
        list?.delete(route);
        if (list?.size === 0) routesByAddress.delete(server.address);
        if (route.healthCheck !== null)
          checked.set(pairKey(route.id, server.address), { routeId: route.id, address: server.address });
        if (counts === undefined) continue;
        const count = (counts.get(server.address) ?? 0) - 1;
        if (count > 0) {
          counts.set(server.address, count);
          continue;
        }
        counts.delete(server.address);
        dropped.push({ route: route.id, server: server.address });
      }
      if (counts?.size === 0) exported.delete(route.id);
    }
    for (const route of arrived) {
      const sameId = routesById.get(route.id);
      if (sameId === undefined) routesById.set(route.id, new Set([route]));
      else sameId.add(route);
      let counts: Map<string, number> | undefined;
      if (!successors.has(route)) {
        counts = exported.get(route.id);
        if (counts === undefined) {
          counts = new Map();
          exported.set(route.id, counts);
        }
      }
      for (const server of route.servers) {
        const list = routesByAddress.get(server.address);
        if (list === undefined) routesByAddress.set(server.address, new Set([route]));
        else list.add(route);
        if (route.healthCheck !== null)
          checked.set(pairKey(route.id, server.address), { routeId: route.id, address: server.address });
        counts?.set(server.address, (counts.get(server.address) ?? 0) + 1);
      }
    }
    for (const labels of dropped) {
      if (exported.get(labels.route)?.has(labels.server) !== true) upstreamUp.remove(labels);
    }

    for (const [key, pair] of checked) {
      // The checker this pair wants now: the last live route with this id that checks this server.
      let wanted: { route: Route; server: UpstreamServer; spec: string } | undefined;
      for (const route of routesById.get(pair.routeId) ?? []) {
        if (route.healthCheck === null) continue;
        const server = route.servers.find((item) => item.address === pair.address);
        if (server === undefined) continue;
        const { path, intervalSeconds } = route.healthCheck;
        wanted = { route, server, spec: `${path}\n${intervalSeconds}\n${route.hostKey}` };
      }
      const checker = checkers.get(key);
      if (checker !== undefined && wanted !== undefined && wanted.spec === checker.spec) {
        checker.route = wanted.route;
        checker.server = wanted.server;
        continue;
      }
      if (checker !== undefined) {
        stopChecker(checker);
        checkers.delete(key);
      }
      if (wanted !== undefined) checkers.set(key, startChecker(wanted.route, wanted.server, wanted.spec));
    }
    // Both maps hold only what failed or is checked (few entries), and a straggler of an older table
    // may have added to them since: swept whole, as cheap as walking only what changed.
    // Active verdicts of pairs without a checker any more (route gone, check removed) are void.
    for (const [key, state] of active) {
      if (checkers.has(key)) continue;
      if (state.down) activeDownCount--;
      active.delete(key);
    }
    for (const [address, state] of passive) {
      if (routesByAddress.has(address)) continue;
      if (state.ejected) ejectedCount--;
      passive.delete(address);
    }

    version++;
    // A kept route's gauges are current already (passive or active changes refresh theirs), and so
    // are a successor's: the same servers, the same kind of check, the same state.
    for (const route of arrived) {
      if (successors.has(route)) continue;
      for (const server of route.servers) refreshGauge(route, server);
    }
  }

  async function close(): Promise<void> {
    closed = true;
    for (const checker of checkers.values()) stopChecker(checker);
    checkers.clear();
    await agent.close().catch(() => {});
  }

  return {
    get allUp() {
      return ejectedCount === 0 && activeDownCount === 0;
    },
    isAvailable,
    claimTrial,
    reportFailure,
    reportSuccess,
    sync,
    close,
  };
}
