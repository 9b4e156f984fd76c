import type { V1Ingress } from '@kubernetes/client-node';
import type { PathConfig } from '../../../config/types.ts';
import { DEFAULT_HOST, normaliseHostKey } from '../../../routing/normalise.ts';
import { olderFirst } from '../older-first.ts';
import type { AgedClaim } from '../ownership.ts';

/**
 * What conflicts between Ingresses are decided by (docs/ingress.md#host-ownership): their age (the
 * oldest wins), the hosts each names (its claim on them) and the key of each path it serves.
 */

/** The key of a path in the conflict rules: host + path + whether it is exact. */
export const claimKey = (host: string, path: PathConfig) => `${host} ${path.exact ? '=' : ''}${path.prefix}`;

/**
 * What every translation reads of an Ingress's metadata, read once per object: a sort compares each
 * object many times, and strings made once keep their hash for the maps keyed by them.
 */
export interface Age {
  /** Creation time (ms; unknown: +Infinity). */
  time: number;
  /** `namespace/name` as written (the tie-break). */
  key: string;
  namespace: string;
  name: string;
  /** `namespace/name`, `default` for a missing namespace: the key of its report. */
  id: string;
}

const ages = new WeakMap<V1Ingress, Age>();

export function ageOf(ingress: V1Ingress): Age {
  let age = ages.get(ingress);
  if (age === undefined) {
    const value = ingress.metadata?.creationTimestamp as unknown;
    const ms = value instanceof Date ? value.getTime() : Date.parse(String(value ?? ''));
    const namespace = ingress.metadata?.namespace ?? 'default';
    const name = ingress.metadata?.name ?? '';
    age = {
      time: Number.isNaN(ms) ? Number.POSITIVE_INFINITY : ms,
      key: `${ingress.metadata?.namespace}/${ingress.metadata?.name}`,
      namespace,
      name,
      id: `${namespace}/${name}`,
    };
    ages.set(ingress, age);
  }
  return age;
}

function byAges(a: Age, b: Age): number {
  const difference = olderFirst(a.time, b.time);
  if (difference !== 0) return difference;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/** Oldest first (creationTimestamp, then namespace/name): the order conflicts are decided in. */
export function byAge(a: V1Ingress, b: V1Ingress): number {
  return byAges(ageOf(a), ageOf(b));
}

/** `ingresses` sorted byAge, each age read once. */
export function oldestFirst(ingresses: readonly V1Ingress[]): V1Ingress[] {
  return ingresses
    .map((ingress) => ({ ingress, age: ageOf(ingress) }))
    .sort((a, b) => byAges(a.age, b.age))
    .map((item) => item.ingress);
}

/** Claims read once per Ingress object. */
const claimOf = new WeakMap<V1Ingress, AgedClaim>();

/** The hosts an Ingress names: its rules' (a rule without host and defaultBackend name `DEFAULT`). */
export function hostClaim(ingress: V1Ingress): AgedClaim {
  let claim = claimOf.get(ingress);
  if (claim === undefined) {
    claim = hostClaimAnew(ingress);
    claimOf.set(ingress, claim);
  }
  return claim;
}

function hostClaimAnew(ingress: V1Ingress): AgedClaim {
  const namespace = ingress.metadata?.namespace ?? 'default';
  const hosts = new Set<string>();
  for (const rule of ingress.spec?.rules ?? []) {
    if (rule.host === undefined || rule.host === '') hosts.add(DEFAULT_HOST);
    else {
      const key = hostKey(rule.host);
      if (key.ok) hosts.add(key.value);
    }
  }
  if (ingress.spec?.defaultBackend) hosts.add(DEFAULT_HOST);
  return {
    namespace,
    ingress: `${namespace}/${ingress.metadata?.name ?? ''}`,
    hosts: [...hosts],
    created: ageOf(ingress).time,
  };
}

/** Host key of an Ingress host: a wildcard is refused (routing matches whole host names). */
export function hostKey(host: string): { ok: true; value: string } | { ok: false; reason: string } {
  if (host.startsWith('*.'))
    return { ok: false, reason: 'is a wildcard host, which Tollgate does not route' };
  return normaliseHostKey(host);
}
