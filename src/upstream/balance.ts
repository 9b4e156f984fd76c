import { sendError } from '../errors.ts';
import type { ProxyRequest, Stage } from '../proxy/context.ts';
import type { Route, UpstreamServer } from '../routing/types.ts';
import type { ServerHealth } from './health.ts';
import { knownServerIds, pinnedServer, readStickyIds, stickySetCookie, stickyValue } from './sticky.ts';

/**
 * The balance stage (docs/traffic.md "Choosing a server"): sets `request.candidates`, the servers the
 * forwarder tries in order — the chosen one first, then the other servers in rotation for failover.
 * Ejected servers are left out; when a route has none left it answers 503 at once rather than
 * letting the client wait on connect timeouts.
 *
 * Choice: the server named by a valid sticky cookie, else round robin per route. The counter lives
 * in a WeakMap keyed by the frozen Route, so a reload (new Route objects) starts a fresh rotation and
 * old state is collected with the old table.
 */
export function createBalanceStage(deps: { health: ServerHealth }): Stage {
  const { health } = deps;
  const states = new WeakMap<Route, RouteState>();

  function stateOf(route: Route): RouteState {
    let state = states.get(route);
    if (state === undefined) {
      state = { turn: 0, rotations: rotationsOf(route.servers) };
      states.set(route, state);
    }
    return state;
  }

  /** Round robin over the servers in rotation, plus a half-open trial when one is due; null = none up. */
  function roundRobin(route: Route, state: RouteState): readonly UpstreamServer[] | null {
    const turn = state.turn;
    state.turn = turn >= MAX_TURN ? 0 : turn + 1;
    if (health.allUp) return state.rotations[turn % state.rotations.length] as readonly UpstreamServer[];
    const up = route.servers.filter((server) => health.isAvailable(route, server));
    // A server back from its cool-down goes first: its answer decides re-admission, and the healthy
    // servers behind it absorb the failure if it is still down.
    const trial = health.claimTrial(route);
    if (up.length === 0) return trial === null ? null : [trial];
    const rotated = rotate(up, turn % up.length);
    return trial === null ? rotated : [trial, ...rotated];
  }

  /** The pinned server first, then the rest of the route's servers in rotation. */
  function pinnedCandidates(
    route: Route,
    state: RouteState,
    pinned: UpstreamServer,
  ): readonly UpstreamServer[] {
    const index = route.servers.indexOf(pinned);
    if (health.allUp) return state.rotations[index] as readonly UpstreamServer[];
    return [
      pinned,
      ...rotate(route.servers, index).filter(
        (server) => server !== pinned && health.isAvailable(route, server),
      ),
    ];
  }

  return function balance(request: ProxyRequest): boolean {
    const { route } = request;
    // A route whose Service has no ready endpoint (docs/kubernetes.md): nothing to try.
    if (route.servers.length === 0) return noReadyEndpoints(request);
    const state = stateOf(route);

    if (route.sticky !== null) {
      const ids = readStickyIds(request.req.headers.cookie);
      const pinned = ids.length === 0 ? null : pinnedServer(route, ids);
      if (pinned !== null && health.isAvailable(route, pinned)) {
        request.candidates = pinnedCandidates(route, state, pinned);
        return true;
      }
      // No cookie, or it names a server that is gone or unhealthy: balance and (re)place the cookie.
      const candidates = roundRobin(route, state);
      if (candidates === null) return noHealthyUpstream(request);
      request.candidates = candidates;
      const value = stickyValue(candidates[0] as UpstreamServer, ids, route, knownServerIds(request.table));
      request.responseCookies.push(stickySetCookie(value, route.sticky, request.secure));
      return true;
    }

    const candidates = roundRobin(route, state);
    if (candidates === null) return noHealthyUpstream(request);
    request.candidates = candidates;
    return true;
  };
}

interface RouteState {
  turn: number;
  /** rotations[i] = servers starting at i, wrapping: the candidate list when all are up, built once. */
  readonly rotations: readonly (readonly UpstreamServer[])[];
}

/** Keeps the counter a small integer; the wrap only shifts the rotation once in a billion requests. */
const MAX_TURN = 2 ** 30;

function rotate(servers: readonly UpstreamServer[], start: number): UpstreamServer[] {
  return start === 0 ? servers.slice() : [...servers.slice(start), ...servers.slice(0, start)];
}

function rotationsOf(servers: readonly UpstreamServer[]): readonly (readonly UpstreamServer[])[] {
  return Object.freeze(servers.map((_, start) => Object.freeze(rotate(servers, start))));
}

function noHealthyUpstream(request: ProxyRequest): false {
  sendError(request.res, 'no_healthy_upstream');
  return false;
}

function noReadyEndpoints(request: ProxyRequest): false {
  sendError(request.res, 'no_ready_endpoints');
  return false;
}
