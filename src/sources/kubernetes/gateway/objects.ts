/**
 * The Gateway API objects as the API server gives them (gateway.networking.k8s.io, standard channel),
 * narrowed to the fields Tollgate reads (docs/gateway-api.md). Everything is optional: the input is
 * untrusted and a malformed object must be reported, never crash the translation.
 */

import { olderFirst } from '../older-first.ts';

export const GATEWAY_GROUP = 'gateway.networking.k8s.io';
/** `spec.controllerName` of the GatewayClass Tollgate serves (docs/gateway-api.md). */
export const GATEWAY_CONTROLLER = 'tollgate.io/gateway-controller';

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  generation?: number;
  creationTimestamp?: string | Date;
  resourceVersion?: string;
  uid?: string;
  labels?: Record<string, string>;
}

/** A status condition (metav1.Condition). */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
}

/** A `parametersRef` (GatewayClass spec, Gateway spec.infrastructure): Tollgate takes none. */
export interface ParametersReference {
  group?: string;
  kind?: string;
  name?: string;
  namespace?: string;
}

export interface GatewayClass {
  metadata?: ObjectMeta;
  spec?: { controllerName?: string; parametersRef?: ParametersReference };
  status?: { conditions?: Condition[] };
}

export interface SecretObjectReference {
  group?: string;
  kind?: string;
  name?: string;
  namespace?: string;
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key?: string; operator?: string; values?: string[] }>;
}

export interface Listener {
  name?: string;
  hostname?: string;
  port?: number;
  protocol?: string;
  tls?: { mode?: string; certificateRefs?: SecretObjectReference[] };
  allowedRoutes?: {
    namespaces?: { from?: string; selector?: LabelSelector };
    kinds?: Array<{ group?: string; kind?: string }>;
  };
}

/** `spec.tls.frontend.default` / `perPort[].tls` (Gateway API v1.4+, GEP-91). */
export interface FrontendTlsSettings {
  validation?: {
    caCertificateRefs?: Array<{ group?: string; kind?: string; name?: string; namespace?: string }>;
    mode?: string;
  };
}

export interface Gateway {
  metadata?: ObjectMeta;
  spec?: {
    gatewayClassName?: string;
    listeners?: Listener[];
    tls?: {
      frontend?: {
        default?: FrontendTlsSettings;
        perPort?: Array<{ port?: number; tls?: FrontendTlsSettings }>;
      };
    };
  };
  status?: Record<string, unknown>;
}

export interface ParentReference {
  group?: string;
  kind?: string;
  namespace?: string;
  name?: string;
  sectionName?: string;
  port?: number;
}

export interface BackendRef {
  group?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  port?: number;
  weight?: number;
}

export interface HeaderModifier {
  set?: Array<{ name?: string; value?: string }>;
  add?: Array<{ name?: string; value?: string }>;
  remove?: string[];
}

export interface HttpRouteFilter {
  type?: string;
  requestHeaderModifier?: HeaderModifier;
  responseHeaderModifier?: HeaderModifier;
  [other: string]: unknown;
}

export interface HttpRouteMatch {
  path?: { type?: string; value?: string };
  headers?: Array<{ type?: string; name?: string; value?: string }> | undefined;
  queryParams?: Array<{ type?: string; name?: string; value?: string }>;
  method?: string;
}

export interface HttpRouteRule {
  name?: string;
  matches?: HttpRouteMatch[];
  filters?: HttpRouteFilter[];
  backendRefs?: Array<BackendRef & { filters?: HttpRouteFilter[] }>;
  timeouts?: { request?: string; backendRequest?: string };
  retry?: { codes?: unknown[]; attempts?: unknown; backoff?: unknown };
}

export interface RouteParentStatus {
  parentRef: ParentReference;
  controllerName: string;
  conditions: Condition[];
}

export interface HttpRoute {
  kind?: string;
  metadata?: ObjectMeta;
  spec?: { parentRefs?: ParentReference[]; hostnames?: string[]; rules?: HttpRouteRule[] };
  status?: { parents?: RouteParentStatus[] };
}

export interface ReferenceGrant {
  metadata?: ObjectMeta;
  spec?: {
    from?: Array<{ group?: string; kind?: string; namespace?: string }>;
    to?: Array<{ group?: string; kind?: string; name?: string }>;
  };
}

/** `namespace/name` of an object. */
export function keyOf(object: { metadata?: ObjectMeta }): string {
  return `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;
}

/** Oldest first (creationTimestamp, then namespace/name): the order the Gateway API breaks ties in. */
export function byAge(a: { metadata?: ObjectMeta }, b: { metadata?: ObjectMeta }): number {
  const time = (object: { metadata?: ObjectMeta }) => {
    const value = object.metadata?.creationTimestamp as unknown;
    const ms = value instanceof Date ? value.getTime() : Date.parse(String(value ?? ''));
    return Number.isNaN(ms) ? Number.POSITIVE_INFINITY : ms;
  };
  const difference = olderFirst(time(a), time(b));
  if (difference !== 0) return difference;
  return keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0;
}

/** A condition (without lastTransitionTime: status.ts keeps the old one when nothing changed). */
export function condition(
  type: string,
  ok: boolean,
  reason: string,
  message: string,
  observedGeneration: number | undefined,
): Condition {
  return {
    type,
    status: ok ? 'True' : 'False',
    reason,
    message: message.length > 1000 ? `${message.slice(0, 997)}...` : message,
    ...(observedGeneration === undefined ? {} : { observedGeneration }),
  };
}

/** A Gateway's `spec.infrastructure` (GEP-1867), read beside the spec's other fields. */
export interface GatewayInfrastructure {
  infrastructure?: { parametersRef?: ParametersReference };
}

/**
 * Why a `parametersRef` is refused, or null when there is none. Tollgate takes no parameters
 * (docs/gateway-api.md#gateways): whatever is named, it can neither resolve nor understand it, and
 * serving as if it had been read would ignore what the owner asked for.
 */
export function parametersProblem(ref: ParametersReference | undefined): string | null {
  if (ref === undefined || ref === null) return null;
  const named = `${ref.group || 'core'}/${ref.kind ?? '?'} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name ?? ''}`;
  return `parametersRef ${named} is not understood: Tollgate takes no parameters`;
}
