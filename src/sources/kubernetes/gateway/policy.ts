import type { ResolvedGateway } from './listeners.ts';
import { byAge, type Condition, condition, GATEWAY_GROUP } from './objects.ts';
import {
  type BuiltPolicy,
  buildPolicy,
  type PolicyContext,
  type PolicyTargetRef,
  type TollgatePolicy,
} from './policy-keys.ts';
import type { PathEntry, RouteOutcome } from './routes.ts';

export {
  POLICY_GROUP,
  POLICY_KIND,
  type PolicyTargetRef,
  policySecrets,
  type TollgatePolicy,
} from './policy-keys.ts';

export interface PolicyOutcome {
  namespace: string;
  name: string;
  conditions: Condition[];
  /** What is wrong, for Events and logs. */
  problems: string[];
}

/** How specific a target is: a rule or listener (sectionName) beats its route, a route its Gateway. */
const SPECIFICITY = { rule: 3, route: 2, listener: 1, gateway: 0 } as const;

/**
 * Attaches TollgatePolicies to the paths they target (docs/gateway-api.md#tollgatepolicy): the most
 * specific target wins (a route's rule, the route, a Gateway's listener, the Gateway); two policies
 * on the same target: the older wins and the newer is Conflicted; a target that does not exist is
 * TargetNotFound. A policy that cannot be built (a missing Secret, an unknown key) closes the paths
 * it covers with 503 auth_misconfigured, never leaves them open. Mutates the entries' paths.
 */
export function applyPolicies(
  entries: readonly PathEntry[],
  routes: readonly RouteOutcome[],
  gateways: readonly ResolvedGateway[],
  input: PolicyContext & { policies: readonly TollgatePolicy[] },
): PolicyOutcome[] {
  const outcomes: PolicyOutcome[] = [];
  /** target key → the policy holding it (older first). */
  const holders = new Map<string, { policy: TollgatePolicy; built: BuiltPolicy; level: number }>();
  for (const policy of [...input.policies].sort(byAge)) {
    const namespace = policy.metadata?.namespace ?? 'default';
    const generation = policy.metadata?.generation;
    const outcome: PolicyOutcome = {
      namespace,
      name: policy.metadata?.name ?? '',
      conditions: [],
      problems: [],
    };
    outcomes.push(outcome);
    const built = buildPolicy(policy, input);
    // targetRefs the CRD schema would refuse (not a list): the policy is invalid and holds nothing.
    if (!Array.isArray(policy.spec?.targetRefs ?? [])) {
      outcome.problems.push('spec.targetRefs is not a list');
      outcome.conditions.push(
        condition('Accepted', false, 'Invalid', 'spec.targetRefs is not a list', generation),
      );
      continue;
    }
    const missing: string[] = [];
    const conflicted: string[] = [];
    let held = 0;
    for (const ref of policy.spec?.targetRefs ?? []) {
      const target = targetOf(ref, namespace, routes, gateways);
      if (target === null) {
        missing.push(
          `${ref.kind ?? '?'} ${namespace}/${ref.name ?? ''}${ref.sectionName ? ` section ${ref.sectionName}` : ''}`,
        );
        continue;
      }
      const holder = holders.get(target.key);
      if (holder !== undefined) {
        conflicted.push(
          `${target.key} already has the policy ${holder.policy.metadata?.namespace}/${holder.policy.metadata?.name}`,
        );
        continue;
      }
      holders.set(target.key, { policy, built, level: target.level });
      held += 1;
    }
    if ((policy.spec?.targetRefs ?? []).length === 0) missing.push('it names no targetRefs');
    outcome.problems.push(
      ...(built.broken === null ? [] : [built.broken]),
      ...missing.map((item) => `target not found: ${item}`),
      ...conflicted.map((item) => `conflicted: ${item}`),
    );
    outcome.conditions.push(
      held === 0 && conflicted.length > 0
        ? condition('Accepted', false, 'Conflicted', conflicted.join('; '), generation)
        : held === 0
          ? condition('Accepted', false, 'TargetNotFound', missing.join('; ') || 'no target', generation)
          : built.broken !== null
            ? condition(
                'Accepted',
                false,
                'Invalid',
                `${built.broken}: the paths it covers answer 503`,
                generation,
              )
            : condition('Accepted', true, 'Accepted', 'attached', generation),
    );
    if (held > 0 && conflicted.length > 0)
      outcome.conditions.push(condition('Conflicted', true, 'Conflicted', conflicted.join('; '), generation));
    if (held > 0 && missing.length > 0)
      outcome.conditions.push(
        condition('TargetNotFound', true, 'TargetNotFound', missing.join('; '), generation),
      );
  }

  for (const entry of entries) {
    const candidates = [
      entry.rule.name === null ? null : holders.get(`rule ${entry.kind} ${entry.route} ${entry.rule.name}`),
      holders.get(`route ${entry.kind} ${entry.route}`),
      ...entry.gateways.map((via) => holders.get(`listener ${via.gateway} ${via.listener}`)),
      ...entry.gateways.map((via) => holders.get(`gateway ${via.gateway}`)),
    ];
    const chosen = candidates.find((candidate) => candidate !== undefined);
    if (!chosen) continue;
    const { policies, ...rest } = chosen.built.patch;
    Object.assign(entry.path, rest);
    // A route's own policies (a URLRewrite filter) stay; the policy's keys are added beside them.
    if (policies !== undefined) entry.path.policies = { ...entry.path.policies, ...policies };
    if (chosen.built.broken !== null) entry.path.unavailable = chosen.built.broken;
  }
  return outcomes;
}

/** The key of what a targetRef names (policies are local: targets live in the policy's namespace). */
function targetOf(
  ref: PolicyTargetRef,
  namespace: string,
  routes: readonly RouteOutcome[],
  gateways: readonly ResolvedGateway[],
): { key: string; level: number } | null {
  if ((ref.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP || !ref.name) return null;
  const id = `${namespace}/${ref.name}`;
  if (ref.kind === 'Gateway') {
    const gateway = gateways.find((item) => item.namespace === namespace && item.name === ref.name);
    if (gateway === undefined) return null;
    if (ref.sectionName === undefined) return { key: `gateway ${id}`, level: SPECIFICITY.gateway };
    if (!gateway.listeners.some((listener) => listener.name === ref.sectionName)) return null;
    return { key: `listener ${id} ${ref.sectionName}`, level: SPECIFICITY.listener };
  }
  if (ref.kind === 'HTTPRoute' || ref.kind === 'GRPCRoute') {
    const route = routes.find(
      (item) => item.kind === ref.kind && item.namespace === namespace && item.name === ref.name,
    );
    if (route === undefined || route.parents.length === 0) return null;
    if (ref.sectionName === undefined) return { key: `route ${ref.kind} ${id}`, level: SPECIFICITY.route };
    if (!route.ruleNames.includes(ref.sectionName)) return null;
    return { key: `rule ${ref.kind} ${id} ${ref.sectionName}`, level: SPECIFICITY.rule };
  }
  return null;
}
