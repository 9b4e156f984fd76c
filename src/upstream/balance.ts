import type { Route, UpstreamServer } from '../routing/types.ts';
import type { ServerHealth } from './health.ts';
import {
  inGroup,
  type ServerGroup,
  type WeightedState,
  weightedCandidates,
  weightedState,
} from './weighted.ts';

/**
 * Load balancing: the servers the forwarder tries in order — the chosen one first, then the other
 * servers in rotation for failover. Ejected servers are left out. Server choice
 * (upstream/server-choice.ts) decides between a sticky pin and the rotation.
 *
 * The round-robin counter lives in a WeakMap keyed by the frozen Route, so a reload (new Route
 * objects) starts a fresh rotation and old state is collected with the old table.
 */
export interface Balancer {
  /**
   * Round robin over the servers in rotation (plus a half-open trial when due); null = none up. A
   * route with weights, or a request sent to one side of a canary split (`group`), is balanced by
   * weight over the servers that may take it (upstream/weighted).
   */
  next(route: Route, group?: ServerGroup): readonly UpstreamServer[] | null;
  /** The pinned server first, then the rest of the route's available servers in rotation. */
  pinned(route: Route, server: UpstreamServer): readonly UpstreamServer[];
}

export function createBalancer(deps: { health: ServerHealth }): Balancer {
  const { health } = deps;
  const states = new WeakMap<Route, RouteState>();

  function stateOf(route: Route): RouteState {
    let state = states.get(route);
    if (state === undefined) {
      state = { turn: 0, rotations: rotationsOf(route.servers), weighted: null };
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

  /** By weight, over the available servers of `group`, a half-open trial first when one is due. */
  function byWeight(route: Route, state: RouteState, group: ServerGroup): readonly UpstreamServer[] | null {
    state.weighted ??= weightedState(route);
    const allUp = health.allUp;
    const picked = weightedCandidates(
      route,
      state.weighted,
      group,
      (server) => allUp || health.isAvailable(route, server),
    );
    const trial = allUp ? null : health.claimTrial(route);
    if (trial === null || !inGroup(route, route.servers.indexOf(trial), group)) return picked;
    return [trial, ...(picked ?? []).filter((server) => server !== trial)];
  }

  return {
    next: (route, group = 'all') =>
      route.weights == null && group === 'all'
        ? roundRobin(route, stateOf(route))
        : byWeight(route, stateOf(route), group),
    pinned: (route, server) => pinnedCandidates(route, stateOf(route), server),
  };
}

interface RouteState {
  turn: number;
  /** rotations[i] = servers starting at i, wrapping: the candidate list when all are up, built once. */
  readonly rotations: readonly (readonly UpstreamServer[])[];
  /** Made on first use, for routes balanced by weight. */
  weighted: WeightedState | null;
}

/** Keeps the counter a small integer; the wrap only shifts the rotation once in a billion requests. */
const MAX_TURN = 2 ** 30;

function rotate(servers: readonly UpstreamServer[], start: number): UpstreamServer[] {
  return start === 0 ? servers.slice() : [...servers.slice(start), ...servers.slice(0, start)];
}

function rotationsOf(servers: readonly UpstreamServer[]): readonly (readonly UpstreamServer[])[] {
  return Object.freeze(servers.map((_, start) => Object.freeze(rotate(servers, start))));
}
