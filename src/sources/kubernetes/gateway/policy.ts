import type { PathConfig } from '../../../config/types.ts';
import type { ResolvedGateway } from './listeners.ts';
import { byAge, GATEWAY_GROUP } from './objects.ts';
import type { PolicyAttachment, PolicyDraft, PolicyHolder, PolicyTarget } from './policy-force.ts';
import {
  type BuiltPolicy,
  buildPolicy,
  type PolicyContext,
  type PolicyTargetRef,
  type TollgatePolicy,
} from './policy-keys.ts';
import type { PathEntry, RouteOutcome } from './routes.ts';

export { type PolicyAttachment, type PolicyOutcome, policiesInForce } from './policy-force.ts';
export {
  POLICY_GROUP,
  POLICY_KIND,
  type PolicyTargetRef,
  policySecrets,
  type TollgatePolicy,
} from './policy-keys.ts';

/**
 * Attaches TollgatePolicies to the paths they target (docs/gateway-api.md#tollgatepolicy): the most
 * specific target wins (a route's rule, the route, a Gateway's listener, the Gateway); two policies
 * on the same target: the older wins and the newer is Conflicted; a target that does not exist is
 * TargetNotFound. A policy that cannot be built (a missing Secret, an unknown key) closes the paths
 * it covers with 503 auth_misconfigured, never leaves them open. The entries given are left as they
 * are: an entry a policy governs comes back as a copy with a new path carrying it (entries and paths
 * are shared between translations: translation-cache.ts). Status is not decided here: policiesInForce
 * (policy-force.ts) reads it from the table built.
 */
export function applyPolicies(
  entries: readonly PathEntry[],
  routes: readonly RouteOutcome[],
  gateways: readonly ResolvedGateway[],
  input: PolicyContext & { policies: readonly TollgatePolicy[] },
  memo: PolicyMemo = PLAIN,
): { attachment: PolicyAttachment; entries: readonly PathEntry[] } {
  const attachment: PolicyAttachment = { drafts: [], holders: [] };
  if (input.policies.length === 0) return { attachment, entries };
  let routeIndex: Map<string, RouteOutcome> | undefined;
  const routeOf = (kind: string, id: string) => {
    if (routeIndex === undefined) {
      routeIndex = new Map();
      // The first of a name, as a search in order would find it.
      for (const route of routes) {
        const key = `${route.kind} ${route.namespace}/${route.name}`;
        if (!routeIndex.has(key)) routeIndex.set(key, route);
      }
    }
    return routeIndex.get(`${kind} ${id}`);
  };
  /** target key → the policy holding it (older first). */
  const holders = new Map<string, PolicyHolder>();
  for (const [order, policy] of [...input.policies].sort(byAge).entries()) {
    const namespace = policy.metadata?.namespace ?? 'default';
    const draft: PolicyDraft = {
      namespace,
      name: policy.metadata?.name ?? '',
      generation: policy.metadata?.generation,
      order,
      built: memo.build(policy, input),
      held: 0,
      missing: [],
      conflicted: [],
      shapeless: false,
    };
    attachment.drafts.push(draft);
    // targetRefs the CRD schema would refuse (not a list): the policy is invalid and holds nothing.
    if (!Array.isArray(policy.spec?.targetRefs ?? [])) {
      draft.shapeless = true;
      continue;
    }
    for (const ref of policy.spec?.targetRefs ?? []) {
      const target = targetOf(ref, namespace, routeOf, gateways);
      if (target === null) {
        draft.missing.push(
          `${ref.kind ?? '?'} ${namespace}/${ref.name ?? ''}${ref.sectionName ? ` section ${ref.sectionName}` : ''}`,
        );
        continue;
      }
      const key = keyOf(target);
      const holder = holders.get(key);
      if (holder !== undefined) {
        draft.conflicted.push(`${key} already has the policy ${holder.draft.namespace}/${holder.draft.name}`);
        continue;
      }
      const held = { draft, target };
      holders.set(key, held);
      attachment.holders.push(held);
      draft.held += 1;
    }
    if ((policy.spec?.targetRefs ?? []).length === 0) draft.missing.push('it names no targetRefs');
  }

  if (holders.size === 0) return { attachment, entries };
  const out: PathEntry[] = [];
  for (const entry of entries) {
    // Most specific level first; within a level (a host served through two listeners), the oldest.
    // A rule without a name can only be targeted through its route or above.
    const levels = [
      entry.rule.name === null ? [] : [`rule ${entry.kind} ${entry.route} ${entry.rule.name}`],
      [`route ${entry.kind} ${entry.route}`],
      entry.gateways.map((via) => `listener ${via.gateway} ${via.listener}`),
      entry.gateways.map((via) => `gateway ${via.gateway}`),
    ];
    let chosen: PolicyHolder | undefined;
    for (const keys of levels) {
      for (const key of keys) {
        const holder = holders.get(key);
        if (holder !== undefined && (chosen === undefined || holder.draft.order < chosen.draft.order))
          chosen = holder;
      }
      if (chosen !== undefined) break;
    }
    if (chosen === undefined) out.push(entry);
    else out.push({ ...entry, path: memo.patch(entry.path, chosen.draft.built) });
  }
  return { attachment, entries: out };
}

/** How applyPolicies builds a policy and a path carrying one; translation-cache.ts gives memoised ones. */
export interface PolicyMemo {
  build(policy: TollgatePolicy, context: PolicyContext): BuiltPolicy;
  patch(path: PathConfig, built: BuiltPolicy): PathConfig;
}

const PLAIN: PolicyMemo = { build: buildPolicy, patch: withPolicy };

/** A new path: `path` with the settings the policy makes (closed when it cannot be built). */
export function withPolicy(path: PathConfig, built: BuiltPolicy): PathConfig {
  const { policies, ...rest } = built.patch;
  const next: PathConfig = { ...path, ...rest };
  // A route's own policies (a URLRewrite filter) stay; the policy's keys are added beside them.
  if (policies !== undefined) next.policies = { ...path.policies, ...policies };
  if (built.broken !== null) next.unavailable = built.broken;
  return next;
}

function keyOf(target: PolicyTarget): string {
  switch (target.level) {
    case 'rule':
      return `rule ${target.kind} ${target.route} ${target.rule}`;
    case 'route':
      return `route ${target.kind} ${target.route}`;
    case 'listener':
      return `listener ${target.gateway} ${target.listener}`;
    case 'gateway':
      return `gateway ${target.gateway}`;
  }
}

/** What a targetRef names (policies are local: targets live in the policy's namespace), or null. */
function targetOf(
  ref: PolicyTargetRef,
  namespace: string,
  routeOf: (kind: string, id: string) => RouteOutcome | undefined,
  gateways: readonly ResolvedGateway[],
): PolicyTarget | null {
  if ((ref.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP || !ref.name) return null;
  const id = `${namespace}/${ref.name}`;
  if (ref.kind === 'Gateway') {
    const gateway = gateways.find((item) => item.namespace === namespace && item.name === ref.name);
    if (gateway === undefined) return null;
    if (ref.sectionName === undefined) return { level: 'gateway', gateway: id };
    if (!gateway.listeners.some((listener) => listener.name === ref.sectionName)) return null;
    return { level: 'listener', gateway: id, listener: ref.sectionName };
  }
  if (ref.kind === 'HTTPRoute' || ref.kind === 'GRPCRoute') {
    const route = routeOf(ref.kind, id);
    if (route === undefined || route.parents.length === 0) return null;
    if (ref.sectionName === undefined) return { level: 'route', kind: ref.kind, route: id };
    if (!route.ruleNames.includes(ref.sectionName)) return null;
    return { level: 'rule', kind: ref.kind, route: id, rule: ref.sectionName };
  }
  return null;
}
