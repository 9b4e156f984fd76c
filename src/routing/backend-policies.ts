import type { CanaryConfig, FixedRedirect, PathConfig, ServerAddress } from '../config/types.ts';

/**
 * The backend-side policies of a compiled route (docs/traffic.md "Weighted servers", "Timeouts"):
 * resolved once per (re)load from the path's config, read by the pick-server stage, the redirect
 * stage and the forwarder.
 */
export interface BackendPolicies {
  // Optional: absent reads as null, so Route values built by hand (tests) need not name them.
  /** Per-route upstream timers over main.yaml's; null = main.yaml's (the connect timeout is the transport's). */
  readonly timeouts?: RouteTimeouts | null;
  /** `upstream_host` / `upstream-vhost`: the Host sent upstream instead of the client's; null = the client's. */
  readonly upstreamHost?: string | null;
  /** `redirect` / `permanent-redirect`: every request answered with this URL and code; null = none. */
  readonly redirect?: FixedRedirect | null;
  /** Each server's share of new requests, index for index with `servers`; null = plain round robin. */
  readonly weights?: readonly number[] | null;
  /** A canary Ingress's split: servers from `firstServer` on are the canary's; null = none. */
  readonly canary?: RouteCanary | null;
}

export interface RouteTimeouts {
  /** Until the response headers (undici headersTimeout); null = main.yaml's. */
  readonly responseMs: number | null;
  /** Longest silence between two response body chunks (undici bodyTimeout); null = main.yaml's. */
  readonly idleMs: number | null;
}

export interface RouteCanary {
  readonly firstServer: number;
  readonly header: string | null;
  readonly headerValue: string | null;
  readonly cookie: string | null;
}

/** The route's server addresses: the path's own (or its Service's), then its canary's endpoints. */
export function routeAddresses(
  path: PathConfig,
  endpoints: (ref: NonNullable<PathConfig['service']>) => readonly ServerAddress[],
): { addresses: readonly ServerAddress[]; canaryFrom: number | null } {
  const own = path.service ? endpoints(path.service) : path.servers;
  const canary = path.canary ?? null;
  if (canary === null) return { addresses: own, canaryFrom: null };
  const extra = canary.service ? endpoints(canary.service) : [];
  return { addresses: [...own, ...extra], canaryFrom: own.length };
}

export function compileBackendPolicies(
  path: PathConfig,
  addresses: readonly ServerAddress[],
  canaryFrom: number | null,
): BackendPolicies {
  const timeouts = path.timeouts ?? null;
  const canary = path.canary ?? null;
  return {
    timeouts:
      timeouts === null || (timeouts.responseMs === null && timeouts.idleMs === null)
        ? null
        : // Like main.yaml's, the idle timer defaults to the response timeout (nginx's proxy_read_timeout is both).
          Object.freeze({ responseMs: timeouts.responseMs, idleMs: timeouts.idleMs ?? timeouts.responseMs }),
    upstreamHost: path.upstreamHost ?? null,
    redirect: path.redirect ? Object.freeze({ ...path.redirect }) : null,
    weights: weightsOf(addresses, canary, canaryFrom),
    canary:
      canary === null || canaryFrom === null
        ? null
        : Object.freeze({
            firstServer: canaryFrom,
            header: canary.header,
            headerValue: canary.headerValue,
            cookie: canary.cookie,
          }),
  };
}

/**
 * Per-server weights. A canary's `weight` of `weightTotal` is its group's share whatever the number
 * of endpoints on each side: each main server weighs (total - weight) × canary count, each canary
 * server weight × main count, so the groups split as asked and each group is even inside.
 */
function weightsOf(
  addresses: readonly ServerAddress[],
  canary: CanaryConfig | null,
  canaryFrom: number | null,
): readonly number[] | null {
  if (canary !== null && canaryFrom !== null) {
    const main = canaryFrom;
    const extra = addresses.length - canaryFrom;
    const mainWeight = (canary.weightTotal - canary.weight) * Math.max(extra, 1);
    const canaryWeight = canary.weight * Math.max(main, 1);
    return Object.freeze(addresses.map((_, index) => (index < canaryFrom ? mainWeight : canaryWeight)));
  }
  if (!addresses.some((address) => address.weight !== undefined && address.weight !== 1)) return null;
  return Object.freeze(addresses.map((address) => address.weight ?? 1));
}
