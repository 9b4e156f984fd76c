import { lastSyncTimestamp, watchRestartsTotal, watchUp } from './metrics.ts';
import type { RestartReason, WatchedResource } from './watch-kinds.ts';

/** What one watch reports about itself. */
export interface WatchMember {
  /** Returns true when the state changed (the caller logs only then). */
  setUp(up: boolean): boolean;
  /** A list succeeded and its objects were handed over. */
  synced(): void;
  /** Something arrived from the server (stream opened, event, bookmark): known current until now. */
  touch(): void;
  restarted(reason: RestartReason): void;
  unregister(): void;
}

export interface WatchMetricsSink {
  setUp(resource: WatchedResource, up: boolean): void;
  restarted(resource: WatchedResource, reason: RestartReason): void;
  setLastSync(resource: WatchedResource, seconds: number): void;
}

export interface WatchHealth {
  register(resource: WatchedResource): WatchMember;
  /** Every registered watch has listed at least once. */
  allSynced(): boolean;
}

/**
 * Folds the state of every watch into one value per resource, as the metrics expose it: a resource is
 * up when all its watches are, and its last sync is that of its stalest watch. Kept per resource,
 * with counts, so that an event costs the same with five watches as with five thousand.
 */
export function createWatchHealth(sink: WatchMetricsSink, now: () => number = Date.now): WatchHealth {
  interface State {
    resource: WatchedResource;
    /** Null until the first attempt ended either way, so that the first outcome is logged. */
    up: boolean | null;
    synced: boolean;
    lastSeen: number;
  }
  interface Group {
    members: Set<State>;
    /** Members whose state is up: the resource is up when all are. */
    upCount: number;
    /** Members that listed at least once. */
    syncedCount: number;
    /** What was last published (null: nothing yet), to skip writes that change nothing. */
    published: { up: boolean; lastSync: number | null } | null;
  }
  const groups = new Map<WatchedResource, Group>();
  let unsynced = 0;
  const groupOf = (resource: WatchedResource): Group => {
    let group = groups.get(resource);
    if (group === undefined) {
      group = { members: new Set(), upCount: 0, syncedCount: 0, published: null };
      groups.set(resource, group);
    }
    return group;
  };
  const publish = (resource: WatchedResource, group: Group) => {
    if (group.members.size === 0) return;
    const up = group.upCount === group.members.size;
    // The stalest watch's time: a scan of this resource's watches, only once all have synced.
    let lastSync: number | null = null;
    if (group.syncedCount === group.members.size) {
      lastSync = Number.POSITIVE_INFINITY;
      for (const member of group.members) if (member.lastSeen < lastSync) lastSync = member.lastSeen;
    }
    if (group.published?.up !== up) sink.setUp(resource, up);
    if (lastSync !== null && group.published?.lastSync !== lastSync)
      sink.setLastSync(resource, lastSync / 1000);
    group.published = { up, lastSync };
  };
  return {
    register(resource) {
      const state: State = { resource, up: null, synced: false, lastSeen: 0 };
      const group = groupOf(resource);
      group.members.add(state);
      unsynced += 1;
      publish(resource, group);
      return {
        setUp(up) {
          if (state.up === up) return false;
          if (state.up === true) group.upCount -= 1;
          state.up = up;
          if (up) group.upCount += 1;
          publish(resource, group);
          return true;
        },
        synced() {
          if (!state.synced) {
            state.synced = true;
            group.syncedCount += 1;
            unsynced -= 1;
          }
          state.lastSeen = now();
          publish(resource, group);
        },
        touch() {
          if (!state.synced) return;
          const last = group.published?.lastSync ?? null;
          const wasStalest = last === null || state.lastSeen <= last;
          state.lastSeen = now();
          // Only the stalest watch moving on can move the resource's last sync.
          if (wasStalest) publish(resource, group);
        },
        restarted(reason) {
          sink.restarted(resource, reason);
        },
        unregister() {
          if (!group.members.delete(state)) return;
          if (state.up === true) group.upCount -= 1;
          if (state.synced) group.syncedCount -= 1;
          else unsynced -= 1;
          group.published = null;
          publish(resource, group);
        },
      };
    },
    allSynced: () => unsynced === 0,
  };
}

/** The sink that feeds the prom-client families on the admin listener's /metrics. */
export const prometheusWatchMetrics: WatchMetricsSink = {
  setUp: (resource, up) => watchUp.set({ resource }, up ? 1 : 0),
  restarted: (resource, reason) => watchRestartsTotal.inc({ resource, reason }),
  setLastSync: (resource, seconds) => lastSyncTimestamp.set({ resource }, seconds),
};
