import type { V1Ingress } from '@kubernetes/client-node';
import type { AgedClaim } from '../ownership.ts';
import { sameClaim } from '../ownership.ts';
import type { InForceChecks } from './annotations-in-force.ts';
import type { BuildOutcome } from './build.ts';
import { type CanarySplits, isCanary } from './canary.ts';
import { ageOf, hostClaim, oldestFirst } from './claims.ts';
import { isOurs, type OurClasses, sameClasses } from './classes.ts';
import type { Table, TableCaches } from './table.ts';
import { IngressBuilds, OwnersMemo } from './translation-cache.ts';

/**
 * What translateIngresses keeps from one translation to the next (translation-cache.ts): each
 * Ingress's build with what it read, the order of the Ingresses and their claims, the host owners,
 * and the canary splits and checks made on paths. A source holds one; without one, a translation
 * starts from nothing. Either way the result is the same (test/unit/ingress-translation-cache.test.ts).
 */
export class IngressTranslationCache implements TableCaches {
  readonly mains = new IngressBuilds<BuildOutcome>();
  readonly canaries = new IngressBuilds<BuildOutcome>();
  readonly owners = new OwnersMemo();
  readonly splits: CanarySplits = new WeakMap();
  readonly inForce: InForceChecks = new WeakMap();
  /** The last translation with what tells its parts apart (null: none, or the last one failed). */
  table: Table | null = null;
  #last: {
    input: readonly V1Ingress[];
    classes: OurClasses;
    mains: V1Ingress[];
    canaries: V1Ingress[];
    claims: AgedClaim[];
  } | null = null;

  /**
   * Our Ingresses oldest first, split into main Ingresses (with their claims) and canaries. When the
   * input differs from the last one only by objects replaced in place, each by a newer version of the
   * same Ingress (same age and name, still ours, still a canary or not), the last order is kept with
   * the new objects in it: nothing is sorted, and an unchanged claim stays the same object.
   */
  order(
    ingresses: readonly V1Ingress[],
    classes: OurClasses,
  ): {
    mains: V1Ingress[];
    canaries: V1Ingress[];
    claims: AgedClaim[];
    /** The objects replaced in place (old → new), or null when the order was made anew. */
    swaps: ReadonlyMap<V1Ingress, V1Ingress> | null;
  } {
    const last = this.#last;
    const kept = last === null ? null : swapped(last, ingresses, classes);
    let mains: V1Ingress[];
    let canaries: V1Ingress[];
    let claims: AgedClaim[];
    if (last !== null && kept !== null) {
      if (kept.size === 0) ({ mains, canaries, claims } = last);
      else {
        mains = last.mains.map((ingress) => kept.get(ingress) ?? ingress);
        canaries = last.canaries.map((ingress) => kept.get(ingress) ?? ingress);
        claims = mains.map((ingress, index) => {
          const before = last.claims[index] as AgedClaim;
          if (ingress === last.mains[index]) return before;
          const fresh = hostClaim(ingress);
          return sameClaim(before, fresh) ? before : fresh;
        });
      }
    } else {
      const ours = oldestFirst(ingresses.filter((ingress) => isOurs(ingress, classes)));
      // Canaries own no host and no path: they join the main Ingresses' paths afterwards (canary.ts).
      canaries = ours.filter(isCanary);
      mains = canaries.length === 0 ? ours : ours.filter((ingress) => !isCanary(ingress));
      const before = new Map((last?.claims ?? []).map((claim) => [claim.ingress, claim]));
      claims = mains.map((ingress) => {
        const fresh = hostClaim(ingress);
        const known = before.get(fresh.ingress);
        return known !== undefined && sameClaim(known, fresh) ? known : fresh;
      });
    }
    // A copy: the caller may change its list.
    this.#last = { input: [...ingresses], classes, mains, canaries, claims };
    return { mains, canaries, claims, swaps: kept };
  }
}

/**
 * The objects of `ingresses` that replace, at the same place, an object of the last input as a newer
 * version of the same Ingress that keeps its place in the order (same age and name, still ours or
 * not, still a canary or not): old → new. null when anything else changed.
 */
function swapped(
  last: { input: readonly V1Ingress[]; classes: OurClasses },
  ingresses: readonly V1Ingress[],
  classes: OurClasses,
): Map<V1Ingress, V1Ingress> | null {
  if (ingresses.length !== last.input.length || !sameClasses(classes, last.classes)) return null;
  const swaps = new Map<V1Ingress, V1Ingress>();
  for (let index = 0; index < ingresses.length; index++) {
    const now = ingresses[index] as V1Ingress;
    const before = last.input[index] as V1Ingress;
    if (now === before) continue;
    const [a, b] = [ageOf(now), ageOf(before)];
    if (a.time !== b.time || a.key !== b.key || a.id !== b.id) return null;
    const ours = isOurs(now, classes);
    if (ours !== isOurs(before, classes)) return null;
    if (ours && isCanary(now) !== isCanary(before)) return null;
    swaps.set(before, now);
  }
  return swaps;
}
