import type { MainConfig, UpstreamsConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import { configInfo } from '../observe/metrics.ts';
import type { EndpointLookup } from '../routing/compile.ts';
import type { RoutingTable } from '../routing/types.ts';
import type { Phase } from '../runtime.ts';
import type { ConfigSnapshot } from '../snapshot.ts';
import {
  type ConfigPublisher,
  type ReloadSource,
  UPSTREAMS_METRIC_NAME,
} from '../sources/apply-upstreams.ts';
import { recordLoadedAtStart, recordReload } from '../sources/files.ts';
import type { CertificatePem } from '../sources/kubernetes/ingress/certificates.ts';

/** What the Kubernetes provider adds to every snapshot once it runs (docs/kubernetes.md). */
export interface KubernetesInputs {
  effective(config: UpstreamsConfig): UpstreamsConfig;
  certificates(): CertificatePem[];
  endpointsOf: EndpointLookup;
}

/**
 * The control plane's record of the configuration it serves, and the one place a new one goes out:
 * every source (a reloaded file, a ConfigMap, a Kubernetes endpoint or route change, a rotated
 * masterkey_file) calls publish(), which builds the snapshot, hands it to every data plane, and
 * counts the reload (tollgate_config_reloads_total, tollgate_config_info, the /status journal).
 */
export interface LiveConfig extends ConfigPublisher {
  /** Readiness (docs/reload.md): `ready` once every source delivered its first state. */
  phase: Phase;
  /** The table of the last snapshot. */
  table(): RoutingTable;
  snapshot(): ConfigSnapshot;
  /**
   * Publishes a snapshot with `table`. `reload` says a new upstreams config went live (counted as a
   * successful reload); without it the config stays (an endpoint change, a new masterkey).
   */
  publish(table: RoutingTable, reload?: { config: UpstreamsConfig; via: ReloadSource }): void;
  /** A reload refused: the live snapshot stays, the refusal is counted and journalled. */
  refused(via: ReloadSource, problems: readonly string[]): void;
  /**
   * Marks the config loaded at start as live in the metrics and the journal (when watching), or a
   * file it reads (`source`: jwks_file) as loaded.
   */
  recordStart(source?: string): void;
  /** Called with every snapshot published, and the one it replaces. */
  onSnapshot(listener: (next: ConfigSnapshot, previous: ConfigSnapshot) => void): void;
  /** From now on the snapshots carry what the Kubernetes provider adds. */
  follow(kubernetes: KubernetesInputs): void;
}

export interface LiveConfigOptions {
  main: MainConfig;
  logger: Logger;
  /** The table compiled at start, and upstreams.yaml as loaded. */
  table: RoutingTable;
  upstreams: UpstreamsConfig;
  masterkey: () => string | null;
}

const NO_ENDPOINTS: EndpointLookup = () => [];

export function createLiveConfig(options: LiveConfigOptions): LiveConfig {
  const { main, logger, masterkey } = options;
  const listeners: Array<(next: ConfigSnapshot, previous: ConfigSnapshot) => void> = [];
  let kubernetes: KubernetesInputs | null = null;
  // upstreams.yaml as live, before any Ingress or Gateway API route is merged in.
  let base = options.upstreams;
  const build = (table: RoutingTable): ConfigSnapshot => ({
    table,
    upstreams: kubernetes ? kubernetes.effective(base) : base,
    masterkey: masterkey(),
    certificates: kubernetes?.certificates() ?? [],
    endpointsOf: kubernetes?.endpointsOf ?? NO_ENDPOINTS,
  });
  let current = build(options.table);

  return {
    main,
    logger,
    phase: 'starting',
    table: () => current.table,
    snapshot: () => current,
    publish(table, reload) {
      if (reload) base = reload.config;
      const previous = current;
      current = build(table);
      for (const listener of listeners) listener(current, previous);
      if (reload) {
        recordReload(reload.via.source, 'success', { origin: reload.via.origin, hash: table.hash });
        recordLiveConfig(table.hash);
      }
    },
    refused(via, problems) {
      recordReload(via.source, 'failure', { origin: via.origin, problems });
    },
    recordStart(source = UPSTREAMS_METRIC_NAME) {
      if (source !== UPSTREAMS_METRIC_NAME) return recordLoadedAtStart(source);
      recordLoadedAtStart(source, { hash: current.table.hash });
      recordLiveConfig(current.table.hash);
    },
    onSnapshot(listener) {
      listeners.push(listener);
    },
    follow(next) {
      kubernetes = next;
    },
  };
}

/** Exposes which upstreams.yaml is live: tollgate_config_info{hash} (and the success timestamp). */
function recordLiveConfig(hash: string): void {
  // Exactly one hash series at a time: a dashboard joining on it must never see two "live" configs.
  configInfo.reset();
  configInfo.set({ hash }, 1);
}
