import type { Route } from '../routing/types.ts';
import type { Stage } from './context.ts';

/**
 * Round robin per route. The counter lives in a WeakMap keyed by the frozen Route, so a reload
 * (which builds new Route objects) starts fresh and old counters are collected with old tables.
 * Candidates are the chosen server followed by the others, which the forwarder tries on failure.
 */
export function createBalanceStage(): Stage {
  const counters = new WeakMap<Route, number>();
  return (request) => {
    const { route } = request;
    const servers = route.servers;
    if (servers.length === 1) {
      request.candidates = servers;
      return true;
    }
    const turn = counters.get(route) ?? 0;
    counters.set(route, (turn + 1) % servers.length);
    request.candidates = [...servers.slice(turn), ...servers.slice(0, turn)];
    return true;
  };
}
