import type { Route, UpstreamServer } from '../routing/types.ts';
import type { ServerHealth } from './health.ts';

/**
 * Load balancing: the servers the forwarder tries in order — the chosen one first, then the other
 * servers in rotation for failover. Ejected servers are left out. The pick-server stage
 * (pipeline/5-pick-server.ts) decides between a sticky pin and the rotation.
 *
 * The round-robin counter lives in a WeakMap keyed by the frozen Route, so a reload (new Route
 * objects) starts a fresh rotation and old state is collected with the old table.
 */
export interface Balancer {
  /** Round robin over the servers in rotation (plus a half-open trial when due); null = none up. */
  next(route: Route): readonly UpstreamServer[] | null;
  /** The pinned server first, then the rest of the route's available servers in rotation. */
  pinned(route: Route, server: UpstreamServer): readonly UpstreamServer[];
}

export function createBalancer(deps: { health: ServerHealth }): Balancer {
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

  return {
    next: (route) => roundRobin(route, stateOf(route)),
    pinned: (route, server) => pinnedCandidates(route, stateOf(route), server),
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
