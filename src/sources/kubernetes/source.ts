import {
  CoreV1Api,
  DiscoveryV1Api,
  type V1ConfigMap,
  type V1EndpointSlice,
  type V1ServicePort,
} from '@kubernetes/client-node';
import { type ResolvedServiceRef, serviceRefKey } from '../../config/service-ref.ts';
import type { ListenAddress, ServerAddress } from '../../config/types.ts';
import type { Logger } from '../../log.ts';
import { DROP_REASONS, type DroppedEndpoint, offeredPorts, readyServers } from './endpoints.ts';
import type { KubeConnection } from './kubeconfig.ts';
import { endpointsDropped } from './metrics.ts';
import { type ResourceWatch, startResourceWatch, type WatchTuning } from './resource-watch.ts';
import {
  createWatchHealth,
  prometheusWatchMetrics,
  type WatchHealth,
  type WatchMetricsSink,
} from './watch-health.ts';

/** The label the EndpointSlice controller puts on every slice of a Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** The ConfigMap data key holding upstreams.yaml. */
export const UPSTREAMS_KEY = 'upstreams.yaml';

/** Ready servers per Service reference, keyed by serviceRefKey (`name.namespace:port`). */
export type EndpointSnapshot = ReadonlyMap<string, readonly ServerAddress[]>;

/** What the ConfigMap holds for upstreams.yaml, or why it holds nothing usable. */
export type ConfigMapContent = { ok: true; text: string } | { ok: false; problem: string };

export interface KubernetesSourceOptions {
  connection: KubeConnection;
  logger: Logger;
  /** main.yaml `kubernetes.upstreams_configmap`: watch this ConfigMap for upstreams.yaml. */
  upstreamsConfigMap?: string | null;
  /** Called after the ready endpoints of a watched Service changed (coalesced, never for a no-op). */
  onEndpoints?: (snapshot: EndpointSnapshot) => void;
  /** Called when the ConfigMap's upstreams.yaml changed, appeared or went away. */
  onConfigMap?: (content: ConfigMapContent) => void;
  metrics?: WatchMetricsSink;
  tuning?: Partial<WatchTuning>;
  /** Tollgate's own bound listeners: endpoints reaching them are dropped (docs/security.md). */
  ownListeners?: () => readonly ListenAddress[];
}

export interface KubernetesSource {
  readonly namespace: string;
  /**
   * Watches exactly the Services these references name: starts the missing watches and stops the
   * ones no reference names any more. Call it with every config that goes live.
   */
  watchServices(refs: readonly ResolvedServiceRef[]): void;
  /** Ready servers of every watched reference whose Service has been listed at least once. */
  endpoints(): EndpointSnapshot;
  /** The ConfigMap's upstreams.yaml as last seen, or null before the first successful list. */
  configMap(): ConfigMapContent | null;
  /** Every watch started so far has listed at least once (readiness). */
  synced(): boolean;
  /** Resolves once synced() holds. */
  whenSynced(): Promise<void>;
  close(): Promise<void>;
}

interface ServiceWatch {
  readonly watch: ResourceWatch;
  slices: readonly V1EndpointSlice[];
}

/**
 * Servers and config from the Kubernetes API (docs/kubernetes.md): one EndpointSlice informer per
 * watched Service (namespaced, label-selected), and one for the upstreams ConfigMap (namespaced,
 * field-selected by name). It never compiles anything: it hands snapshots to the apply path.
 */
export function createKubernetesSource(options: KubernetesSourceOptions): KubernetesSource {
  const { connection, logger } = options;
  const { kubeConfig, namespace } = connection;
  const discovery = kubeConfig.makeApiClient(DiscoveryV1Api);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const health: WatchHealth = createWatchHealth(options.metrics ?? prometheusWatchMetrics);
  const serviceWatches = new Map<string, ServiceWatch>();
  let refs: readonly ResolvedServiceRef[] = [];
  let lastSnapshot: EndpointSnapshot = new Map();
  let configMapContent: ConfigMapContent | null = null;
  let closed = false;
  const syncWaiters: Array<() => void> = [];
  const warnedPorts = new Set<string>();
  // Dropped endpoints are warned about once while they stay in the API, again if they come back.
  let warnedDrops = new Set<string>();

  // Port lists of Services whose `service:` number matched no pod port, read with a GET (no watch:
  // a Service's ports rarely change; they are read again whenever its EndpointSlices change).
  const servicePorts = new Map<string, { ports: readonly V1ServicePort[] | null; done: boolean }>();
  const servicePortsKnown = (serviceNamespace: string, name: string) =>
    servicePorts.get(`${serviceNamespace}/${name}`)?.done === true;
  const servicePortName = (serviceNamespace: string, name: string, port: number): string | null => {
    const id = `${serviceNamespace}/${name}`;
    const entry = servicePorts.get(id);
    if (entry === undefined) {
      const pending = { ports: null as readonly V1ServicePort[] | null, done: false };
      servicePorts.set(id, pending);
      core
        .readNamespacedService({ name, namespace: serviceNamespace })
        .then(
          (object) => {
            pending.ports = object.spec?.ports ?? [];
          },
          (error: unknown) => {
            logger.warn(
              { kubernetes_service: id, error: (error as Error).message?.split('\n', 1)[0] },
              'could not read the Service to map its port number (RBAC: get services)',
            );
          },
        )
        .finally(() => {
          pending.done = true;
          if (servicePorts.get(id) === pending) publishEndpoints();
        });
      return null;
    }
    const found = entry.ports?.find(
      (candidate) => candidate.port === port && (candidate.protocol ?? 'TCP') === 'TCP',
    );
    return found === undefined ? null : (found.name ?? '');
  };

  const checkSynced = () => {
    if (!health.allSynced()) return;
    for (const resolve of syncWaiters.splice(0)) resolve();
  };

  const computeSnapshot = (): EndpointSnapshot => {
    const snapshot = new Map<string, readonly ServerAddress[]>();
    const drops = new Map<string, DroppedEndpoint & { service: string }>();
    for (const ref of refs) {
      const serviceWatch = serviceWatches.get(`${ref.namespace}/${ref.name}`);
      if (!serviceWatch?.watch.synced) continue;
      const key = serviceRefKey(ref);
      const filter = {
        ownListeners: options.ownListeners,
        onDrop: (drop: DroppedEndpoint) =>
          drops.set(`${drop.slice} ${drop.reason} ${drop.value}`, { ...drop, service: key }),
      };
      let servers = readyServers(serviceWatch.slices, ref.port, filter);
      if (servers.length === 0 && serviceWatch.slices.length > 0 && typeof ref.port === 'number') {
        // No pod port has this number: it may be the Service's own port (`web:80` in front of pods
        // on 8080), as an Ingress backend means it. The Service says which slice port that is.
        const mapped = servicePortName(ref.namespace, ref.name, ref.port);
        if (mapped !== null) servers = readyServers(serviceWatch.slices, mapped, filter);
      }
      if (servers.length === 0 && serviceWatch.slices.length > 0 && typeof ref.port === 'number') {
        const offered = offeredPorts(serviceWatch.slices);
        if (offered.length > 0 && !warnedPorts.has(key) && servicePortsKnown(ref.namespace, ref.name)) {
          warnedPorts.add(key);
          logger.warn(
            { kubernetes_service: key, offered },
            'neither a pod port of the EndpointSlices nor a port of the Service has this number',
          );
        }
      }
      snapshot.set(key, Object.freeze(servers));
    }
    reportDrops(drops);
    return snapshot;
  };

  const reportDrops = (drops: ReadonlyMap<string, DroppedEndpoint & { service: string }>) => {
    const counts = new Map(DROP_REASONS.map((reason) => [reason, 0]));
    for (const [id, drop] of drops) {
      counts.set(drop.reason, (counts.get(drop.reason) ?? 0) + 1);
      if (!warnedDrops.has(id))
        logger.warn(
          { kubernetes_service: drop.service, slice: drop.slice, reason: drop.reason, endpoint: drop.value },
          'EndpointSlice entry ignored: not a usable server (docs/security.md)',
        );
    }
    warnedDrops = new Set(drops.keys());
    for (const [reason, count] of counts) endpointsDropped.set({ reason }, count);
  };

  const publishEndpoints = () => {
    if (closed) return;
    const next = computeSnapshot();
    if (sameSnapshot(next, lastSnapshot)) return;
    lastSnapshot = next;
    options.onEndpoints?.(next);
  };

  const startServiceWatch = (name: string, serviceNamespace: string): ServiceWatch => {
    const labelSelector = `${SERVICE_NAME_LABEL}=${name}`;
    const entry: { watch?: ResourceWatch; slices: readonly V1EndpointSlice[] } = { slices: [] };
    entry.watch = startResourceWatch<V1EndpointSlice>({
      kubeConfig,
      resource: 'endpointslices',
      description: `EndpointSlices of ${name}.${serviceNamespace}`,
      path: `/apis/discovery.k8s.io/v1/namespaces/${serviceNamespace}/endpointslices`,
      list: (callOptions) =>
        discovery.listNamespacedEndpointSlice({ namespace: serviceNamespace, labelSelector }, callOptions),
      labelSelector,
      onObjects: (slices) => {
        entry.slices = slices;
        servicePorts.delete(`${serviceNamespace}/${name}`);
        checkSynced();
        publishEndpoints();
      },
      health,
      logger,
      tuning: options.tuning,
    });
    return entry as ServiceWatch;
  };

  function startConfigMapWatch(name: string): ResourceWatch {
    const fieldSelector = `metadata.name=${name}`;
    return startResourceWatch<V1ConfigMap>({
      kubeConfig,
      resource: 'configmaps',
      description: `ConfigMap ${name}.${namespace}`,
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      list: (callOptions) => core.listNamespacedConfigMap({ namespace, fieldSelector }, callOptions),
      fieldSelector,
      onObjects: (maps) => {
        const next = configMapText(
          maps.find((map) => map.metadata?.name === name),
          `${namespace}/${name}`,
        );
        if (!closed && (configMapContent === null || !sameContent(configMapContent, next))) {
          configMapContent = next;
          options.onConfigMap?.(next);
        }
        // After the config went live: the Services it names are being watched now, and count too.
        checkSynced();
      },
      health,
      logger,
      tuning: options.tuning,
    });
  }
  const configMapWatch = options.upstreamsConfigMap ? startConfigMapWatch(options.upstreamsConfigMap) : null;

  return {
    namespace,
    watchServices(next) {
      refs = [...next];
      const wanted = new Map(next.map((ref) => [`${ref.namespace}/${ref.name}`, ref]));
      for (const [key, serviceWatch] of serviceWatches) {
        if (!wanted.has(key)) {
          serviceWatches.delete(key);
          void serviceWatch.watch.stop();
        }
      }
      for (const [key, ref] of wanted) {
        if (!serviceWatches.has(key)) serviceWatches.set(key, startServiceWatch(ref.name, ref.namespace));
      }
      checkSynced();
      publishEndpoints();
    },
    endpoints: () => lastSnapshot,
    configMap: () => configMapContent,
    synced: () => health.allSynced(),
    whenSynced: () =>
      new Promise<void>((resolve) => {
        if (health.allSynced()) resolve();
        else syncWaiters.push(resolve);
      }),
    async close() {
      closed = true;
      await Promise.all([
        ...[...serviceWatches.values()].map((serviceWatch) => serviceWatch.watch.stop()),
        configMapWatch?.stop(),
      ]);
      serviceWatches.clear();
    },
  };
}

function configMapText(map: V1ConfigMap | undefined, name: string): ConfigMapContent {
  if (!map) return { ok: false, problem: `ConfigMap ${name} does not exist` };
  const text = map.data?.[UPSTREAMS_KEY];
  if (typeof text !== 'string')
    return { ok: false, problem: `ConfigMap ${name} has no '${UPSTREAMS_KEY}' key` };
  return { ok: true, text };
}

function sameContent(a: ConfigMapContent, b: ConfigMapContent): boolean {
  return a.ok && b.ok ? a.text === b.text : !a.ok && !b.ok && a.problem === b.problem;
}

function sameSnapshot(a: EndpointSnapshot, b: EndpointSnapshot): boolean {
  if (a.size !== b.size) return false;
  for (const [key, servers] of a) {
    const other = b.get(key);
    if (!other || other.length !== servers.length) return false;
    if (servers.some((server, i) => server.raw !== other[i]?.raw)) return false;
  }
  return true;
}
