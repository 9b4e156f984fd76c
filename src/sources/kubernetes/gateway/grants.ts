import { GATEWAY_GROUP, type ReferenceGrant } from './objects.ts';

/**
 * Cross-namespace references (docs/gateway-api.md#referencegrant): a route's backendRef to a Service,
 * a Gateway's certificateRef to a Secret, a TollgatePolicy's secretRef, in another namespace, are
 * allowed only where a ReferenceGrant in the target's namespace says so. Every such reference goes
 * through this one check; the grants are a watched input, so deleting one revokes at once.
 */
export interface Reference {
  /** The referring object: its group ('' for core), kind and namespace. */
  from: { group: string; kind: string; namespace: string };
  /** The target: group, kind, namespace and name. */
  to: { group: string; kind: string; namespace: string; name: string };
}

export function referencePermitted(grants: readonly ReferenceGrant[], reference: Reference): boolean {
  if (reference.from.namespace === reference.to.namespace) return true;
  return grants.some(
    (grant) =>
      grant.metadata?.namespace === reference.to.namespace &&
      (grant.spec?.from ?? []).some(
        (from) =>
          (from.group ?? '') === reference.from.group &&
          from.kind === reference.from.kind &&
          from.namespace === reference.from.namespace,
      ) &&
      (grant.spec?.to ?? []).some(
        (to) =>
          (to.group ?? '') === reference.to.group &&
          to.kind === reference.to.kind &&
          (to.name === undefined || to.name === '' || to.name === reference.to.name),
      ),
  );
}

export { GATEWAY_GROUP };
