import type { ErrorCode } from '../errors.ts';
import type { ForwardingRequest, StageRequest } from '../request/record.ts';
import type { UpstreamServer } from '../routing/types.ts';
import { createBalancer } from './balance.ts';
import { canaryGroup } from './canary.ts';
import type { UpstreamFailure } from './failure.ts';
import type { ServerHealth } from './health.ts';
import type { Release } from './slots.ts';
import { knownServerIds, pinnedServer, readStickyIds, stickySetCookie, stickyValue } from './sticky.ts';
import { inGroup } from './weighted.ts';

/**
 * The one place that says which server a request goes to, and which one next
 * (docs/traffic.md "Choosing a server: round robin, sticky sessions, health"): the candidate list made
 * before forwarding (a sticky pin, a canary side, the balancer's rotation, a half-open trial), the
 * server taken when the first is at its connection limit, and the failover after a failed attempt.
 * The pick-server stage (pipeline/5-pick-server.ts) and the forwarder (upstream/forward.ts) ask it;
 * neither decides an order of its own.
 */

/**
 * Sets `request.candidates`, the servers the forwarder tries in order, and on a sticky route the
 * cookie pinning the choice; or answers why no server may take the request (null = candidates set).
 */
export type ChooseServers = (request: StageRequest) => ErrorCode | null;

/**
 * The server named by a valid sticky cookie goes first when it is available; otherwise the
 * balancer's rotation picks, and on a sticky route a cookie pinning the choice is added to the
 * response. When every server of the route is ejected it answers 503 at once rather than letting
 * the client wait on connect timeouts.
 */
export function createServerChoice(deps: { health: ServerHealth }): ChooseServers {
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
  return function chooseServers(request) {
    const { route } = request;
    // A Gateway API backendRef that cannot be resolved answers 500, as the spec asks (docs/gateway-api.md).
    if (route.backendError) return 'backend_not_resolved';
    // Beside resolved ones, an unresolvable backendRef keeps its share of requests, as 500s.
    if (route.backendErrorShare && errorTurn(route, route.backendErrorShare)) return 'backend_not_resolved';
    // A route whose Service has no ready endpoint (docs/kubernetes.md): nothing to try.
    if (route.servers.length === 0) return 'no_ready_endpoints';
    // A canary split: a header or cookie may send the request to one side (upstream/canary).
    const group = route.canary == null ? 'all' : canaryGroup(route.canary, request.req.headers);
    // The side asked for has no endpoint (a canary Service scaled to 0): as for a path without any.
    if (group !== 'all' && !route.servers.some((_, index) => inGroup(route, index, group)))
      return 'no_ready_endpoints';
    if (route.sticky !== null) {
      const ids = readStickyIds(request.req.headers.cookie);
      const pinned = ids.length === 0 ? null : pinnedServer(route, ids);
      if (
        pinned !== null &&
        health.isAvailable(route, pinned) &&
        (group === 'all' || inGroup(route, route.servers.indexOf(pinned), group))
      ) {
        request.candidates = balancer.pinned(route, pinned);
        return null;
      }
      // No cookie, or it names a server that is gone or unhealthy: balance and (re)place the cookie.
      const candidates = balancer.next(route, group);
      if (candidates === null) return 'no_healthy_upstream';
      request.candidates = candidates;
      const value = stickyValue(candidates[0] as UpstreamServer, ids, route, knownServerIds(request.table));
      request.responseCookies.push(stickySetCookie(value, route.sticky, request.secure));
      return null;
    }
    const candidates = balancer.next(route, group);
    if (candidates === null) return 'no_healthy_upstream';
    request.candidates = candidates;
    return null;
  };
}

/** A later candidate that had a free connection slot, and that slot. */
export interface SpareServer {
  readonly index: number;
  readonly server: UpstreamServer;
  readonly release: Release;
}

/**
 * The candidate at `index` is at its connection limit (docs/configuration.md#upstream-connections): a later
 * candidate with a free slot is as good as any, taken in the candidates' order; null when none has
 * one (the request then waits in the first one's queue). Only called off the common path.
 */
export function spareServer(
  request: ForwardingRequest,
  index: number,
  tryAcquire: (server: UpstreamServer) => Release | null,
): SpareServer | null {
  const { candidates } = request;
  for (let next = index + 1; next < candidates.length; next++) {
    const server = candidates[next] as UpstreamServer;
    const release = tryAcquire(server);
    if (release !== null) return { index: next, server, release };
  }
  return null;
}

/**
 * After the attempt at candidate `index` failed before any answer: the index of the candidate to
 * try next, or -1 when the request must not go on (nginx's proxy_next_upstream error/timeout): only
 * a request the upstream cannot have seen (`notSent`), or one that met a stale keep-alive
 * connection and consumed no body from the client, is sent again.
 */
export function failoverIndex(
  request: ForwardingRequest,
  index: number,
  failure: UpstreamFailure,
  withBody: boolean,
): number {
  const retryable = failure.notSent || (failure.staleConnection && !withBody);
  return retryable && index + 1 < request.candidates.length ? index + 1 : -1;
}

/**
 * The candidate a retry under a Gateway API rule's `retry` goes to (upstream/retry.ts): the next
 * one in order, the first again after the last (a route with one server retries that server).
 */
export function retryIndex(request: ForwardingRequest, index: number): number {
  return (index + 1) % request.candidates.length;
}
