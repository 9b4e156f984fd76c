import type { CustomObjectsApi, KubernetesObject } from '@kubernetes/client-node';
import type { DesiredStatus } from './translate.ts';

/**
 * What the Gateway source last handed the status writer, per object: the status it wanted and the
 * object's resourceVersion then. A translation hands on only the statuses that differ from that, so
 * an edit of one route costs one status comparison, not one per route (the writer's merge and
 * canonical comparison, for every route on every translation, was a tenth of the control plane's
 * CPU at 2,000 routes: docs/benchmark.md).
 *
 * Keyed by resourceVersion, not by generation: any change of the stored object (our own write
 * landing, another controller's write, someone clearing the status) hands the status on again, and
 * the writer compares it with what is stored, as before. A write that fails is forgotten
 * (forgettingFailedWrites), so the next translation tries it again.
 */
export interface StatusMemo {
  /** The statuses to hand the writer: those not handed already for the same stored object. */
  changed(
    statuses: readonly DesiredStatus[],
    stored: (status: DesiredStatus) => KubernetesObject | undefined,
  ): DesiredStatus[];
  /** A write of this object failed: hand its status on at the next translation. */
  forget(plural: string, namespace: string | undefined, name: string): void;
}

const keyOf = (plural: string, namespace: string | undefined, name: string) =>
  `${plural}/${namespace ?? ''}/${name}`;

interface Handed {
  resourceVersion: string;
  status: string;
  /** The DesiredStatus it was made from: the same object again (an unchanged route) is not serialised. */
  desired: DesiredStatus;
  /** The call of `changed` that named it last. */
  seen: number;
}

export function createStatusMemo(): StatusMemo {
  // Kept and updated in place: a translation in which one route changed costs a look-up per status,
  // not a new map of every object.
  const handed = new Map<string, Handed>();
  let generation = 0;
  return {
    changed(statuses, stored) {
      generation++;
      let named = 0;
      const out: DesiredStatus[] = [];
      for (const desired of statuses) {
        const resourceVersion = stored(desired)?.metadata?.resourceVersion;
        // Not listed (gone, or not seen yet): the writer decides, as it did without the memo.
        if (resourceVersion === undefined) {
          out.push(desired);
          continue;
        }
        const key = statusKey(desired);
        const before = handed.get(key);
        if (before?.seen !== generation) named++;
        // The same status object for the same stored object: handed already.
        if (
          before !== undefined &&
          before.desired === desired &&
          before.resourceVersion === resourceVersion
        ) {
          before.seen = generation;
          continue;
        }
        const status =
          before?.desired === desired && before.desired.status === desired.status
            ? before.status
            : JSON.stringify(desired.status);
        const unchanged = before?.resourceVersion === resourceVersion && before.status === status;
        handed.set(key, { resourceVersion, status, desired, seen: generation });
        if (unchanged) continue;
        out.push(desired);
      }
      // Objects no translation names any more are dropped with their entries (walked only when some are).
      if (named < handed.size)
        for (const [key, entry] of handed) if (entry.seen !== generation) handed.delete(key);
      return out;
    },
    forget(plural, namespace, name) {
      handed.delete(keyOf(plural, namespace, name));
    },
  };
}

/** The memo's key of a status, made once per DesiredStatus object (an unchanged route keeps its own). */
const statusKeys = new WeakMap<DesiredStatus, string>();
function statusKey(desired: DesiredStatus): string {
  let key = statusKeys.get(desired);
  if (key === undefined) {
    key = keyOf(desired.resource, namespaceOf(desired), desired.name);
    statusKeys.set(desired, key);
  }
  return key;
}

/** Cluster-scoped objects (GatewayClasses) are written by name alone. */
function namespaceOf(desired: DesiredStatus): string | undefined {
  return desired.resource === 'gatewayclasses' ? undefined : desired.namespace;
}

type StatusWrite = (
  param: { plural: string; namespace?: string; name: string },
  ...rest: never[]
) => Promise<unknown>;

/**
 * The API as the status writer uses it, with every failed status write (after the writer's own
 * conflict retries, each of which also fails here) forgotten by the memo.
 */
export function forgettingFailedWrites(custom: CustomObjectsApi, memo: StatusMemo): CustomObjectsApi {
  const wrap =
    (write: StatusWrite): StatusWrite =>
    (param, ...rest) =>
      write.call(custom, param, ...rest).catch((error: unknown) => {
        memo.forget(param.plural, param.namespace, param.name);
        throw error;
      });
  const wrapped = Object.create(custom) as CustomObjectsApi;
  Object.assign(wrapped, {
    replaceNamespacedCustomObjectStatus: wrap(
      custom.replaceNamespacedCustomObjectStatus as unknown as StatusWrite,
    ),
    replaceClusterCustomObjectStatus: wrap(custom.replaceClusterCustomObjectStatus as unknown as StatusWrite),
  });
  return wrapped;
}
