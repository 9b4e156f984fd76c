/**
 * Gateway API objects for the fake API server (test/helpers/fake-kube-api.ts), shaped as the
 * conformance suite's manifests (kubernetes-sigs/gateway-api conformance/base/manifests.yaml and
 * conformance/tests/*.yaml) so the tests read like the cases they port.
 */
import type { StoredObject } from './fake-kube-api.ts';

const GATEWAY_API = 'gateway.networking.k8s.io/v1';

export function namespaceObject(name: string, labels: Record<string, string> = {}): StoredObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, namespace: '', labels } };
}

export function gatewayClassObject(
  name = 'tollgate',
  controllerName = 'tollgate.io/gateway-controller',
): StoredObject {
  return {
    apiVersion: GATEWAY_API,
    kind: 'GatewayClass',
    metadata: { name, namespace: '' },
    spec: { controllerName },
  };
}

export function gatewayObject(spec: {
  name: string;
  namespace: string;
  className?: string;
  listeners: Array<Record<string, unknown>>;
}): StoredObject {
  return {
    apiVersion: GATEWAY_API,
    kind: 'Gateway',
    metadata: { name: spec.name, namespace: spec.namespace },
    spec: { gatewayClassName: spec.className ?? 'tollgate', listeners: spec.listeners },
  };
}

export function httpRouteObject(spec: {
  name: string;
  namespace: string;
  parentRefs: Array<Record<string, unknown>>;
  hostnames?: string[] | undefined;
  rules: Array<Record<string, unknown>>;
  kind?: 'HTTPRoute' | 'GRPCRoute';
}): StoredObject {
  return {
    apiVersion: GATEWAY_API,
    kind: spec.kind ?? 'HTTPRoute',
    metadata: { name: spec.name, namespace: spec.namespace },
    spec: {
      parentRefs: spec.parentRefs,
      ...(spec.hostnames ? { hostnames: spec.hostnames } : {}),
      rules: spec.rules,
    },
  };
}

export function referenceGrantObject(spec: {
  name: string;
  namespace: string;
  from: Array<{ group: string; kind: string; namespace: string }>;
  to: Array<{ group: string; kind: string; name?: string }>;
}): StoredObject {
  return {
    apiVersion: 'gateway.networking.k8s.io/v1beta1',
    kind: 'ReferenceGrant',
    metadata: { name: spec.name, namespace: spec.namespace },
    spec: { from: spec.from, to: spec.to },
  };
}

export function tollgatePolicyObject(spec: {
  name: string;
  namespace: string;
  spec: Record<string, unknown>;
}): StoredObject {
  return {
    apiVersion: 'tollgate.io/v1alpha1',
    kind: 'TollgatePolicy',
    metadata: { name: spec.name, namespace: spec.namespace },
    spec: spec.spec,
  };
}

interface Condition {
  type: string;
  status: string;
  reason: string;
  observedGeneration?: number;
}

/** The conditions Tollgate wrote for one parentRef of a route (by Gateway name and optional section). */
export function routeParentConditions(
  route: StoredObject | undefined,
  gateway: string,
  sectionName?: string,
): Condition[] | undefined {
  const parents = ((route?.status as { parents?: unknown[] } | undefined)?.parents ?? []) as Array<{
    parentRef: { name: string; sectionName?: string };
    controllerName: string;
    conditions: Condition[];
  }>;
  return parents.find(
    (parent) =>
      parent.controllerName === 'tollgate.io/gateway-controller' &&
      parent.parentRef.name === gateway &&
      parent.parentRef.sectionName === sectionName,
  )?.conditions;
}

/** True when `conditions` has a condition of this type with this status (and reason, when given). */
export function hasCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
  status: 'True' | 'False',
  reason?: string,
): boolean {
  return (conditions ?? []).some(
    (item) =>
      item.type === type && item.status === status && (reason === undefined || item.reason === reason),
  );
}
