import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { Logger } from '../../../log.ts';
import { timeoutOptions } from '../resource-watch.ts';
import {
  type Condition,
  GATEWAY_CONTROLLER,
  type ParentReference,
  type RouteParentStatus,
} from './objects.ts';
import type { DesiredStatus } from './translate.ts';

/** Where each kind lives in the API (group, version, plural; cluster-scoped or not). */
export const API_OF: Record<
  DesiredStatus['resource'],
  { group: string; version: string; plural: string; clusterScoped?: boolean }
> = {
  gatewayclasses: {
    group: 'gateway.networking.k8s.io',
    version: 'v1',
    plural: 'gatewayclasses',
    clusterScoped: true,
  },
  gateways: { group: 'gateway.networking.k8s.io', version: 'v1', plural: 'gateways' },
  httproutes: { group: 'gateway.networking.k8s.io', version: 'v1', plural: 'httproutes' },
  grpcroutes: { group: 'gateway.networking.k8s.io', version: 'v1', plural: 'grpcroutes' },
  tollgatepolicies: { group: 'tollgate.io', version: 'v1alpha1', plural: 'tollgatepolicies' },
};

interface StoredObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  status?: Record<string, unknown>;
}

export interface StatusWriter {
  /** Brings every object's status to what the translation wants (queued; one write at a time). */
  write(statuses: readonly DesiredStatus[]): void;
  /** Resolves when every queued write is done (tests, shutdown). */
  idle(): Promise<void>;
  close(): void;
}

/** A status request that has not answered by then is abandoned (the next translation tries again). */
const REQUEST_TIMEOUT_MS = 10_000;

/** Tries per object before a conflict is given up on (the next translation tries again). */
const CONFLICT_RETRIES = 5;

/**
 * The one writer of Gateway API status (docs/gateway-api.md#status-and-errors). It computes what to write from
 * the object as last seen (the watches' copy), skips a write that would change nothing, and on a
 * 409 Conflict reads the object again and retries (RetryOnConflict). On a route it writes only the
 * `status.parents` entries whose controllerName is Tollgate's, keeping every other controller's.
 * A condition keeps its lastTransitionTime while its status does not change.
 */
export function createStatusWriter(deps: {
  custom: CustomObjectsApi;
  logger: Logger;
  /** The object as the watches last saw it. */
  current: (status: DesiredStatus) => StoredObject | undefined;
  now?: () => Date;
}): StatusWriter {
  const { custom, logger } = deps;
  const now = deps.now ?? (() => new Date());
  const queue = new Map<string, DesiredStatus>();
  let running: Promise<void> | null = null;
  let closed = false;

  const keyOf = (item: DesiredStatus) => `${item.resource}/${item.namespace}/${item.name}`;

  async function writeOne(desired: DesiredStatus): Promise<void> {
    let object = deps.current(desired);
    for (let attempt = 0; attempt < CONFLICT_RETRIES && !closed; attempt++) {
      if (object === undefined) return; // gone: nothing to write
      const status = merged(desired, object.status ?? {}, now());
      if (canonical(status) === canonical(pick(object.status ?? {}, Object.keys(status)))) return;
      const api = API_OF[desired.resource];
      const body = {
        ...object,
        metadata: { ...object.metadata },
        status: { ...(object.status ?? {}), ...status },
      };
      try {
        if (api.clusterScoped)
          await custom.replaceClusterCustomObjectStatus(
            { ...api, name: desired.name, body },
            timeoutOptions(REQUEST_TIMEOUT_MS),
          );
        else
          await custom.replaceNamespacedCustomObjectStatus(
            { ...api, namespace: desired.namespace, name: desired.name, body },
            timeoutOptions(REQUEST_TIMEOUT_MS),
          );
        logger.debug({ object: keyOf(desired) }, 'gateway api status written');
        return;
      } catch (error) {
        const code = (error as { code?: number }).code;
        if (code === 404) return;
        if (code !== 409) {
          logger.warn(
            { object: keyOf(desired), error: (error as Error).message?.split('\n', 1)[0] },
            'could not write a Gateway API status',
          );
          return;
        }
        // Someone wrote it since we read it: read it again (uncached) and recompute.
        try {
          object = (await (api.clusterScoped
            ? custom.getClusterCustomObjectStatus(
                { ...api, name: desired.name },
                timeoutOptions(REQUEST_TIMEOUT_MS),
              )
            : custom.getNamespacedCustomObjectStatus(
                { ...api, namespace: desired.namespace, name: desired.name },
                timeoutOptions(REQUEST_TIMEOUT_MS),
              ))) as StoredObject;
        } catch (readError) {
          if ((readError as { code?: number }).code === 404) return;
          logger.warn({ object: keyOf(desired) }, 'could not read a Gateway API object after a conflict');
          return;
        }
      }
    }
  }

  async function drain(): Promise<void> {
    while (queue.size > 0 && !closed) {
      const [key, desired] = queue.entries().next().value as [string, DesiredStatus];
      queue.delete(key);
      try {
        await writeOne(desired);
      } catch (error) {
        // A status shaped so that the merge trips on it (another writer's garbage): that object
        // alone is skipped; the writer must never stop for the others.
        logger.warn({ object: key, error: (error as Error).message }, 'could not write a Gateway API status');
      }
    }
  }

  /**
   * One drain at a time. `running` is cleared by the drain's own settling, not inside it: a drain
   * with nothing to write ends synchronously, before the caller could assign it, and would
   * otherwise leave the writer looking busy for ever.
   */
  function startDrain(): void {
    if (running !== null) return;
    const run: Promise<void> = drain().finally(() => {
      if (running === run) running = null;
      if (queue.size > 0 && !closed) startDrain();
    });
    running = run;
  }

  return {
    write(statuses) {
      for (const item of statuses) queue.set(keyOf(item), item);
      startDrain();
    },
    idle: async () => {
      while (running !== null) await running;
    },
    close() {
      closed = true;
      queue.clear();
    },
  };
}

/**
 * The status to write: the desired one with each condition's lastTransitionTime kept when its status
 * did not change; for routes, other controllers' parents kept and ours replaced.
 */
function merged(
  desired: DesiredStatus,
  current: Record<string, unknown>,
  time: Date,
): Record<string, unknown> {
  const stamp = time.toISOString().replace(/\.\d+Z$/, 'Z');
  if (desired.resource === 'httproutes' || desired.resource === 'grpcroutes') {
    const existing = (current.parents as RouteParentStatus[] | undefined) ?? [];
    const others = existing.filter(
      (parent) =>
        parent.controllerName !== GATEWAY_CONTROLLER || foreignParent(desired, parent.parentRef ?? {}),
    );
    const ours = ((desired.status.parents as RouteParentStatus[]) ?? []).map((parent) => {
      const before = existing.find(
        (item) =>
          item.controllerName === GATEWAY_CONTROLLER &&
          canonical(item.parentRef) === canonical(parent.parentRef),
      );
      return { ...parent, conditions: withTimes(parent.conditions, before?.conditions ?? [], stamp) };
    });
    return { parents: [...others, ...ours] };
  }
  const result: Record<string, unknown> = { ...desired.status };
  if (Array.isArray(desired.status.conditions))
    result.conditions = withTimes(
      desired.status.conditions as Condition[],
      (current.conditions as Condition[]) ?? [],
      stamp,
    );
  if (Array.isArray(desired.status.listeners)) {
    const before = (current.listeners as Array<{ name: string; conditions?: Condition[] }>) ?? [];
    result.listeners = (desired.status.listeners as Array<{ name: string; conditions: Condition[] }>).map(
      (listener) => ({
        ...listener,
        conditions: withTimes(
          listener.conditions,
          before.find((item) => item.name === listener.name)?.conditions ?? [],
          stamp,
        ),
      }),
    );
  }
  return result;
}

/**
 * A route parent of Tollgate's controllerName that another deployment writes (a Gateway outside
 * this one's `gateway_names`): kept as it is, never replaced or removed.
 */
function foreignParent(desired: DesiredStatus, ref: ParentReference): boolean {
  const own = desired.ownGateways;
  return (
    own !== undefined &&
    (ref.kind ?? 'Gateway') === 'Gateway' &&
    !own.includes(`${ref.namespace ?? desired.namespace}/${ref.name ?? ''}`)
  );
}

function withTimes(
  conditions: readonly Condition[],
  before: readonly Condition[],
  stamp: string,
): Condition[] {
  return conditions.map((item) => {
    const previous = before.find((candidate) => candidate.type === item.type);
    // metav1.Condition: the time the status last changed, not the reason or message.
    const same = previous !== undefined && previous.status === item.status;
    return {
      ...item,
      lastTransitionTime: same && previous.lastTransitionTime ? previous.lastTransitionTime : stamp,
    };
  });
}

function pick(object: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const key of keys) if (key in object) result[key] = object[key];
  return result;
}

/** JSON with object keys sorted: equal values give equal text whatever order the API server used. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, item) =>
    item !== null && typeof item === 'object' && !Array.isArray(item)
      ? Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : item,
  );
}
