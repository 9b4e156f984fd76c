import { lastSyncTimestamp, watchRestartsTotal, watchUp } from './metrics.ts';
import type { RestartReason, WatchedResource } from './resource-watch.ts';

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
 * up when all its watches are, and its last sync is that of its stalest watch.
 */
export function createWatchHealth(sink: WatchMetricsSink, now: () => number = Date.now): WatchHealth {
  interface State {
    resource: WatchedResource;
    /** Null until the first attempt ended either way, so that the first outcome is logged. */
    up: boolean | null;
    synced: boolean;
    lastSeen: number;
  }
  const members = new Set<State>();
  const publish = (resource: WatchedResource) => {
    const mine = [...members].filter((m) => m.resource === resource);
    if (mine.length === 0) return;
    sink.setUp(
      resource,
      mine.every((m) => m.up === true),
    );
    const seen = mine.filter((m) => m.synced).map((m) => m.lastSeen);
    if (seen.length === mine.length) sink.setLastSync(resource, Math.min(...seen) / 1000);
  };
  return {
    register(resource) {
      const state: State = { resource, up: null, synced: false, lastSeen: 0 };
      members.add(state);
      publish(resource);
      return {
        setUp(up) {
          if (state.up === up) return false;
          state.up = up;
          publish(resource);
          return true;
        },
        synced() {
          state.synced = true;
          state.lastSeen = now();
          publish(resource);
        },
        touch() {
          if (!state.synced) return;
          state.lastSeen = now();
          publish(resource);
        },
        restarted(reason) {
          sink.restarted(resource, reason);
        },
        unregister() {
          members.delete(state);
          publish(resource);
        },
      };
    },
    allSynced: () => [...members].every((m) => m.synced),
  };
}

/** The sink that feeds the prom-client families on the admin listener's /metrics. */
export const prometheusWatchMetrics: WatchMetricsSink = {
  setUp: (resource, up) => watchUp.set({ resource }, up ? 1 : 0),
  restarted: (resource, reason) => watchRestartsTotal.inc({ resource, reason }),
  setLastSync: (resource, seconds) => lastSyncTimestamp.set({ resource }, seconds),
};
