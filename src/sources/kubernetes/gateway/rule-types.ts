import type { V1Service } from '@kubernetes/client-node';
import type { PathPolicies } from '../../../config/policy-types.ts';
import type {
  CanaryConfig,
  HeaderOps,
  MirrorConfig,
  PathConfig,
  PathTimeouts,
  RetryConfig,
} from '../../../config/types.ts';
import type { RouteConditions } from '../../../routing/conditions.ts';
import type { RequestRedirectConfig } from '../../../routing/request-redirect.ts';
import type { Reference } from './grants.ts';
import type { ResolvedGateway } from './listeners.ts';
import type { Lookup } from './reads.ts';

/**
 * The shapes a route rule is built in, shared by rules.ts (which builds one), filters.ts and
 * backends.ts (which fill parts of it) and routes.ts: apart, so that none of them imports another
 * for its types.
 */

/**
 * What a route translation reads besides the route: every read goes through here, so route-cache.ts
 * can record them and reuse a route's translation while each gives the same answer.
 */
export interface RouteContext {
  /** Our Gateways, resolved, by `namespace/name`. */
  gateways: Lookup<ResolvedGateway>;
  /** Namespace labels by name (allowedRoutes Selector). */
  namespaces: Lookup<Readonly<Record<string, string>>>;
  services: Lookup<V1Service>;
  /** The ReferenceGrant check (grants.ts referencePermitted) against the grants of now. */
  permits(reference: Reference): boolean;
}

export interface BuiltRule {
  index: number;
  name: string | null;
  matches: Array<{ prefix: string; exact: boolean; conditions: RouteConditions | null }>;
  requestHeaders: HeaderOps | null;
  responseHeaders: HeaderOps | null;
  requestRedirect: RequestRedirectConfig | null;
  policies: PathPolicies | null;
  upstreamHost: string | null;
  timeouts: PathTimeouts | null;
  retry: RetryConfig | null;
  service: PathConfig['service'];
  canary: CanaryConfig | null;
  backendError: string | null;
  backendErrorShare: number | null;
  /** `h2c` by the Services' appProtocol (backends.ts); null = as any path. */
  protocol: 'h2c' | null;
  /** RequestMirror filters with their Services resolved (backends.ts mirrorsOf); null = none. */
  mirrors: MirrorConfig[] | null;
}

/** A refusal of part of a route, with the status reason it is reported under. */
export interface Refusal {
  condition: 'Accepted' | 'ResolvedRefs';
  reason: string;
  message: string;
}
