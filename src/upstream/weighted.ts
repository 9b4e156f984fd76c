import type { Route, UpstreamServer } from '../routing/types.ts';

/**
 * Smooth weighted round robin (nginx's; docs/traffic.md#weighted-servers): deterministic, so a
 * server of weight 3 beside one of weight 1 gets exactly 3 of every 4 new requests, spread out
 * rather than in bursts. Which servers take part is decided per request (the canary group, health):
 * each pick runs over those only.
 */

/** Which servers of a route a request may go to: all, or one side of a canary split. */
export type ServerGroup = 'all' | 'main' | 'canary';

export interface WeightedState {
  /** nginx's current_weight per server, index for index with route.servers. */
  readonly current: number[];
}

export function weightedState(route: Route): WeightedState {
  return { current: route.servers.map(() => 0) };
}

export function inGroup(route: Route, index: number, group: ServerGroup): boolean {
  if (group === 'all' || route.canary == null) return true;
  return group === 'canary' ? index >= route.canary.firstServer : index < route.canary.firstServer;
}

/**
 * The servers to try in order: the weighted pick first, then the other eligible servers with a
 * weight (failover); null when none is eligible. A group whose servers all weigh 0 (a canary at
 * weight 0 reached by its header) is balanced evenly.
 */
export function weightedCandidates(
  route: Route,
  state: WeightedState,
  group: ServerGroup,
  eligible: (server: UpstreamServer) => boolean,
): UpstreamServer[] | null {
  const indexes: number[] = [];
  let anyWeight = false;
  route.servers.forEach((server, index) => {
    if (!inGroup(route, index, group) || !eligible(server)) return;
    indexes.push(index);
    if (weightOf(route, index) > 0) anyWeight = true;
  });
  if (indexes.length === 0) return null;
  const weight = (index: number) => (anyWeight ? weightOf(route, index) : 1);
  let total = 0;
  let best = -1;
  for (const index of indexes) {
    const w = weight(index);
    if (w === 0) continue;
    state.current[index] = (state.current[index] ?? 0) + w;
    total += w;
    if (best === -1 || (state.current[index] as number) > (state.current[best] as number)) best = index;
  }
  state.current[best] = (state.current[best] as number) - total;
  const chosen = route.servers[best] as UpstreamServer;
  const rest = indexes.filter((index) => index !== best && weight(index) > 0);
  return [chosen, ...rest.map((index) => route.servers[index] as UpstreamServer)];
}

function weightOf(route: Route, index: number): number {
  return route.weights == null ? 1 : (route.weights[index] ?? 0);
}
