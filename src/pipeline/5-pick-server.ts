import type { UpstreamServer } from '../routing/types.ts';
import { createBalancer } from '../upstream/balance.ts';
import { canaryGroup } from '../upstream/canary.ts';
import type { ServerHealth } from '../upstream/health.ts';
import {
  knownServerIds,
  pinnedServer,
  readStickyIds,
  stickySetCookie,
  stickyValue,
} from '../upstream/sticky.ts';
import { inGroup } from '../upstream/weighted.ts';
import type { ProxyRequest, Stage } from './request.ts';
import { PASS, refuse, type Verdict } from './verdict.ts';

/**
 * The last stage: sets `request.candidates`, the servers the forwarder tries in order. The server
 * named by a valid sticky cookie goes first when it is available; otherwise the balancer's rotation
 * picks, and on a sticky route a cookie pinning the choice is added to the response. When every
 * server of the route is ejected it answers 503 at once rather than letting the client wait on
 * connect timeouts.
 */
export function createPickServerStage(deps: { health: ServerHealth }): Stage {
  const { health } = deps;
  // Per route, the 500s owed so far: `share` of every request, spread evenly (not at random), so
  // a 1-in-4 share answers exactly every fourth request of this process.
  const owed = new WeakMap<object, number>();
  const errorTurn = (route: object, share: number): boolean => {
    const due = (owed.get(route) ?? 0) + share;
    const turn = due >= 1;
    owed.set(route, turn ? due - 1 : due);
    return turn;
  };
  const balancer = createBalancer({ health });
  return function pickServer(request: ProxyRequest): Verdict {
    const { route } = request;
    // A Gateway API backendRef that cannot be resolved answers 500, as the spec asks (docs/gateway-api.md).
    if (route.backendError) return refuse('backend_not_resolved');
    // Beside resolved ones, an unresolvable backendRef keeps its share of requests, as 500s.
    if (route.backendErrorShare && errorTurn(route, route.backendErrorShare))
      return refuse('backend_not_resolved');
    // A route whose Service has no ready endpoint (docs/kubernetes.md): nothing to try.
    if (route.servers.length === 0) return refuse('no_ready_endpoints');
    // A canary split: a header or cookie may send the request to one side (upstream/canary).
    const group = route.canary == null ? 'all' : canaryGroup(route.canary, request.req.headers);
    // The side asked for has no endpoint (a canary Service scaled to 0): as for a path without any.
    if (group !== 'all' && !route.servers.some((_, index) => inGroup(route, index, group)))
      return refuse('no_ready_endpoints');
    if (route.sticky !== null) {
      const ids = readStickyIds(request.req.headers.cookie);
      const pinned = ids.length === 0 ? null : pinnedServer(route, ids);
      if (
        pinned !== null &&
        health.isAvailable(route, pinned) &&
        (group === 'all' || inGroup(route, route.servers.indexOf(pinned), group))
      ) {
        request.candidates = balancer.pinned(route, pinned);
        return PASS;
      }
      // No cookie, or it names a server that is gone or unhealthy: balance and (re)place the cookie.
      const candidates = balancer.next(route, group);
      if (candidates === null) return refuse('no_healthy_upstream');
      request.candidates = candidates;
      const value = stickyValue(candidates[0] as UpstreamServer, ids, route, knownServerIds(request.table));
      request.responseCookies.push(stickySetCookie(value, route.sticky, request.secure));
      return PASS;
    }
    const candidates = balancer.next(route, group);
    if (candidates === null) return refuse('no_healthy_upstream');
    request.candidates = candidates;
    return PASS;
  };
}
