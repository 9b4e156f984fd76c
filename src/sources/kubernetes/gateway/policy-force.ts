import { isDeepStrictEqual } from 'node:util';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import type { RouteKind } from './listeners.ts';
import { type Condition, condition } from './objects.ts';
import type { BuiltPolicy } from './policy-keys.ts';
import type { PathEntry } from './routes.ts';

/**
 * What a TollgatePolicy reports is what the routing table enforces (docs/gateway-api.md#tollgatepolicy):
 * after each translation, every path of the table built is checked against the policies whose
 * targets cover it, by a reading of "covers" written apart from the one that attached them
 * (policy.ts). A path that does not carry the settings of the policy governing it is closed (503
 * auth_misconfigured) and that policy is not Accepted. Status is derived here, from the table, so a
 * policy cannot be reported Accepted while a path it targets is served without it.
 */

/** How specific a target is: a rule or listener (sectionName) beats its route, a route its Gateway. */
export const SPECIFICITY = { rule: 3, route: 2, listener: 1, gateway: 0 } as const;

/** What one targetRef of a policy resolved to (route and Gateway as `namespace/name`). */
export type PolicyTarget =
  | { level: 'rule'; kind: RouteKind; route: string; rule: string }
  | { level: 'route'; kind: RouteKind; route: string }
  | { level: 'listener'; gateway: string; listener: string }
  | { level: 'gateway'; gateway: string };

/** One policy as attached, before its status is known. */
export interface PolicyDraft {
  namespace: string;
  name: string;
  generation: number | undefined;
  /** Its place in age order (oldest 0): the older of two policies on one target or path wins. */
  order: number;
  built: BuiltPolicy;
  /** Targets it holds; those named but missing or already held by an older policy. */
  held: number;
  missing: string[];
  conflicted: string[];
  /** targetRefs is not a list: it holds nothing. */
  shapeless: boolean;
}

export interface PolicyHolder {
  draft: PolicyDraft;
  target: PolicyTarget;
}

export interface PolicyAttachment {
  drafts: PolicyDraft[];
  /** Every target held, with the policy holding it. */
  holders: PolicyHolder[];
}

export interface PolicyOutcome {
  namespace: string;
  name: string;
  conditions: Condition[];
  /** What is wrong, for Events and logs. */
  problems: string[];
  /** What the author should change though the policy is honoured (a Warning Event and log). */
  warnings: string[];
}

/** How many paths a status message names before it says "and N more". */
const NAMED_PATHS = 3;

/** True when the target covers the path: the path's rule, route, or a listener or Gateway it is served through. */
export function covers(target: PolicyTarget, entry: PathEntry): boolean {
  switch (target.level) {
    case 'rule':
      return entry.kind === target.kind && entry.route === target.route && entry.rule.name === target.rule;
    case 'route':
      return entry.kind === target.kind && entry.route === target.route;
    case 'listener':
      return entry.gateways.some((via) => via.gateway === target.gateway && via.listener === target.listener);
    case 'gateway':
      return entry.gateways.some((via) => via.gateway === target.gateway);
  }
}

/**
 * The policy governing a path: of the held targets covering it, the most specific; at equal
 * specificity (a host served through two listeners, each with its policy) the oldest. Also the
 * policies it shadows at that specificity. Undefined: no policy covers the path.
 */
export function governing(
  holders: readonly PolicyHolder[],
  entry: PathEntry,
): { winner: PolicyHolder; shadowed: PolicyHolder[] } | undefined {
  let best: PolicyHolder[] = [];
  for (const holder of holders) {
    if (!covers(holder.target, entry)) continue;
    const level = SPECIFICITY[holder.target.level];
    const top = best[0] === undefined ? -1 : SPECIFICITY[best[0].target.level];
    if (level > top) best = [holder];
    else if (level === top) best.push(holder);
  }
  best.sort((a, b) => a.draft.order - b.draft.order);
  const [winner, ...rest] = best;
  if (winner === undefined) return undefined;
  return { winner, shadowed: rest.filter((holder) => holder.draft !== winner.draft) };
}

/** True when the path carries every setting the policy makes (a broken policy: the path is closed). */
export function carries(path: PathConfig, built: BuiltPolicy): boolean {
  if (built.broken !== null) return path.unavailable !== null && path.unavailable !== undefined;
  const { authorization, rateLimit, policies } = built.patch;
  if (authorization !== undefined && !isDeepStrictEqual(path.authorization, authorization)) return false;
  if (rateLimit !== undefined && path.rateLimit !== rateLimit) return false;
  for (const [key, value] of Object.entries(policies ?? {}))
    if (!isDeepStrictEqual((path.policies as Record<string, unknown> | null | undefined)?.[key], value))
      return false;
  return true;
}

/**
 * Checks the table built against the policies and derives their status from it. Runs on every
 * translation, in production: a path whose governing policy is not on it is closed (503
 * auth_misconfigured) and the policy is reported `Accepted: False` with the paths named. The table
 * given is left as it is: `hosts` is the table to serve, each closed path a new object (with its
 * host), every other host and path the one given.
 */
export function policiesInForce(
  attachment: PolicyAttachment,
  hosts: readonly HostConfig[],
  entries: readonly PathEntry[],
): { policies: PolicyOutcome[]; hosts: HostConfig[] } {
  const entryOf = new Map<PathConfig, PathEntry>(entries.map((entry) => [entry.path, entry]));
  const governed = new Map<PolicyDraft, number>();
  const notInForce = new Map<PolicyDraft, string[]>();
  const shadowedOn = new Map<PolicyDraft, string[]>();
  const note = (map: Map<PolicyDraft, string[]>, draft: PolicyDraft, text: string) => {
    const list = map.get(draft) ?? [];
    map.set(draft, list);
    list.push(text);
  };
  const checked = hosts.map((host) => {
    const copy: { paths: PathConfig[] | null } = { paths: null };
    const close = (index: number, path: PathConfig, unavailable: string) => {
      copy.paths ??= [...host.paths];
      copy.paths[index] = { ...path, unavailable };
    };
    for (const [index, path] of host.paths.entries()) {
      const entry = entryOf.get(path);
      if (entry === undefined) {
        // Every path of this table comes from a route entry; one that cannot be traced to its route
        // cannot be checked either, so it is closed rather than served unchecked.
        if (path.unavailable === null || path.unavailable === undefined)
          close(index, path, 'this path cannot be traced to its route: its policies cannot be checked');
        continue;
      }
      const found = governing(attachment.holders, entry);
      if (found === undefined) continue;
      const where = `${host.name}${path.exact ? ' =' : ' '}${path.prefix} (${entry.kind} ${entry.route} rule ${entry.rule.name ?? entry.rule.index})`;
      const { draft } = found.winner;
      for (const other of found.shadowed)
        note(
          shadowedOn,
          other.draft,
          `${where} is governed by the older policy ${draft.namespace}/${draft.name}`,
        );
      if (carries(path, draft.built)) {
        governed.set(draft, (governed.get(draft) ?? 0) + 1);
        continue;
      }
      close(index, path, `TollgatePolicy ${draft.namespace}/${draft.name} is not in force on this path`);
      note(notInForce, draft, where);
    }
    return copy.paths === null ? host : { ...host, paths: copy.paths };
  });
  const policies = attachment.drafts.map((draft) =>
    outcomeOf(draft, governed.get(draft) ?? 0, notInForce.get(draft) ?? [], shadowedOn.get(draft) ?? []),
  );
  return { policies, hosts: checked };
}

function outcomeOf(
  draft: PolicyDraft,
  governed: number,
  notInForce: readonly string[],
  shadowed: readonly string[],
): PolicyOutcome {
  const generation = draft.generation;
  const outcome: PolicyOutcome = {
    namespace: draft.namespace,
    name: draft.name,
    conditions: [],
    problems: [],
    warnings: [...(draft.built.warnings ?? [])],
  };
  if (draft.shapeless) {
    outcome.problems.push('spec.targetRefs is not a list');
    outcome.conditions.push(
      condition('Accepted', false, 'Invalid', 'spec.targetRefs is not a list', generation),
    );
    return outcome;
  }
  const { broken } = draft.built;
  const conflicted = [...draft.conflicted, ...shadowed];
  const unenforced =
    notInForce.length === 0
      ? null
      : `not in force on ${listed(notInForce)}: ${notInForce.length === 1 ? 'it answers' : 'they answer'} 503`;
  outcome.problems.push(
    ...(broken === null ? [] : [broken]),
    ...(unenforced === null ? [] : [unenforced]),
    ...draft.missing.map((item) => `target not found: ${item}`),
    ...draft.conflicted.map((item) => `conflicted: ${item}`),
    ...(shadowed.length === 0 ? [] : [`conflicted: ${listed(shadowed)}`]),
  );
  const allShadowed = governed === 0 && notInForce.length === 0 && shadowed.length > 0;
  outcome.conditions.push(
    draft.held === 0 && draft.conflicted.length > 0
      ? condition('Accepted', false, 'Conflicted', draft.conflicted.join('; '), generation)
      : draft.held === 0
        ? condition('Accepted', false, 'TargetNotFound', draft.missing.join('; ') || 'no target', generation)
        : broken !== null
          ? condition('Accepted', false, 'Invalid', `${broken}: the paths it covers answer 503`, generation)
          : unenforced !== null
            ? condition('Accepted', false, 'Invalid', unenforced, generation)
            : allShadowed
              ? condition('Accepted', false, 'Conflicted', listed(shadowed), generation)
              : condition(
                  'Accepted',
                  true,
                  'Accepted',
                  [`in force on ${governed} ${governed === 1 ? 'path' : 'paths'}`, ...outcome.warnings].join(
                    '; warning: ',
                  ),
                  generation,
                ),
  );
  if (draft.held > 0 && conflicted.length > 0 && !allShadowed)
    outcome.conditions.push(
      condition(
        'Conflicted',
        true,
        'Conflicted',
        [...draft.conflicted, listed(shadowed)].filter(Boolean).join('; '),
        generation,
      ),
    );
  if (draft.held > 0 && draft.missing.length > 0)
    outcome.conditions.push(
      condition('TargetNotFound', true, 'TargetNotFound', draft.missing.join('; '), generation),
    );
  return outcome;
}

/** The first few items, and how many more. */
function listed(items: readonly string[]): string {
  if (items.length === 0) return '';
  const named = items.slice(0, NAMED_PATHS).join('; ');
  return items.length > NAMED_PATHS ? `${named} and ${items.length - NAMED_PATHS} more` : named;
}
