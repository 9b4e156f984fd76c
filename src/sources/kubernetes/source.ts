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
  /**
   * Called after the ready endpoints of watched Services changed (coalesced, never for a no-op), with
   * the keys (serviceRefKey) whose servers changed: only their routes need new servers.
   */
  onEndpoints?: (snapshot: EndpointSnapshot, changed: ReadonlySet<string>) => void;
  /** Called when the ConfigMap's upstreams.yaml changed, appeared or went away. */
  onConfigMap?: (content: ConfigMapContent) => void;
  metrics?: WatchMetricsSink;
  tuning?: Partial<WatchTuning> | undefined;
  /** Tollgate's own bound listeners: endpoints reaching them are dropped (docs/security.md). */
  ownListeners?: (() => readonly ListenAddress[]) | undefined;
}

export interface KubernetesSource {
  readonly namespace: string;
  /**
   * Watches exactly the Services these references name: starts the missing namespace watches and
   * stops the ones no reference needs any more. Call it with every config that goes live.
   */
  watchServices(refs: readonly ResolvedServiceRef[]): void;
  /** Ready servers of every watched reference whose namespace has been listed at least once. */
  endpoints(): EndpointSnapshot;
  /** The ConfigMap's upstreams.yaml as last seen, or null before the first successful list. */
  configMap(): ConfigMapContent | null;
  /** Every watch started so far has listed at least once (readiness). */
  synced(): boolean;
  /** Resolves once synced() holds. */
  whenSynced(): Promise<void>;
  close(): Promise<void>;
}

/** One namespace's EndpointSlices (every slice that belongs to a Service), by Service name. */
interface NamespaceSlices {
  readonly watch: ResourceWatch;
  byService: ReadonlyMap<string, readonly V1EndpointSlice[]>;
  listed: boolean;
}

type Drop = DroppedEndpoint & { service: string };

/**
 * Servers and config from the Kubernetes API (docs/kubernetes.md): one EndpointSlice informer per
 * namespace holding watched Services (label-selected on the `kubernetes.io/service-name` label's
 * presence), indexed by Service, and one for the upstreams ConfigMap (namespaced, field-selected by
 * name). A watch per Service would open thousands of streams in a cluster with thousands of
 * Services, each list answering on its own; one per namespace keeps the API's load and Tollgate's
 * start-up flat (docs/benchmark.md#control-plane-at-scale). A slice change recomputes the servers of
 * that slice's Service only. It never compiles anything: it hands snapshots to the apply path.
 */
export function createKubernetesSource(options: KubernetesSourceOptions): KubernetesSource {
  const { connection, logger } = options;
  const { kubeConfig, namespace } = connection;
  const discovery = kubeConfig.makeApiClient(DiscoveryV1Api);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const health: WatchHealth = createWatchHealth(options.metrics ?? prometheusWatchMetrics);
  const sliceWatches = new Map<string, NamespaceSlices>();
  /** The watched references by Service (`namespace/name`): what a change of its slices concerns. */
  let refsByService = new Map<string, ResolvedServiceRef[]>();
  /** The servers of every reference whose namespace was listed, by serviceRefKey. */
  const servers = new Map<string, readonly ServerAddress[]>();
  let lastSnapshot: EndpointSnapshot = new Map();
  let configMapContent: ConfigMapContent | null = null;
  let closed = false;
  const syncWaiters: Array<() => void> = [];
  const warnedPorts = new Set<string>();
  // Dropped endpoints per reference: warned about once while they stay in the API, again if they
  // come back; the gauge counts them all by reason.
  const dropsByRef = new Map<string, ReadonlyMap<string, Drop>>();
  const dropCounts = new Map(DROP_REASONS.map((reason) => [reason, 0]));
  for (const reason of DROP_REASONS) endpointsDropped.set({ reason }, 0);
  /** References whose servers changed since the last publish. */
  const changedKeys = new Set<string>();

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
          if (servicePorts.get(id) === pending && !closed) {
            recompute([id]);
            publishEndpoints();
          }
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

  /** The ready servers of one reference from its Service's slices, and what was dropped. */
  const serversOf = (ref: ResolvedServiceRef, slices: readonly V1EndpointSlice[]) => {
    const key = serviceRefKey(ref);
    const drops = new Map<string, Drop>();
    const filter = {
      ownListeners: options.ownListeners,
      onDrop: (drop: DroppedEndpoint) =>
        drops.set(`${drop.slice} ${drop.reason} ${drop.value}`, { ...drop, service: key }),
    };
    let found = readyServers(slices, ref.port, filter);
    if (found.length === 0 && slices.length > 0 && typeof ref.port === 'number') {
      // No pod port has this number: it may be the Service's own port (`web:80` in front of pods
      // on 8080), as an Ingress backend means it. The Service says which slice port that is.
      const mapped = servicePortName(ref.namespace, ref.name, ref.port);
      if (mapped !== null) found = readyServers(slices, mapped, filter);
    }
    if (found.length === 0 && slices.length > 0 && typeof ref.port === 'number') {
      const offered = offeredPorts(slices);
      if (offered.length > 0 && !warnedPorts.has(key) && servicePortsKnown(ref.namespace, ref.name)) {
        warnedPorts.add(key);
        logger.warn(
          { kubernetes_service: key, offered },
          'neither a pod port of the EndpointSlices nor a port of the Service has this number',
        );
      }
    }
    return { key, found: Object.freeze(found), drops };
  };

  /** A reference's drops replace its previous ones: new ones are warned about, the gauge follows. */
  const setDrops = (key: string, drops: ReadonlyMap<string, Drop> | null) => {
    const before = dropsByRef.get(key);
    for (const drop of before?.values() ?? [])
      dropCounts.set(drop.reason, (dropCounts.get(drop.reason) ?? 1) - 1);
    if (drops === null || drops.size === 0) dropsByRef.delete(key);
    else dropsByRef.set(key, drops);
    for (const [id, drop] of drops ?? []) {
      dropCounts.set(drop.reason, (dropCounts.get(drop.reason) ?? 0) + 1);
      if (!before?.has(id))
        logger.warn(
          { kubernetes_service: drop.service, slice: drop.slice, reason: drop.reason, endpoint: drop.value },
          'EndpointSlice entry ignored: not a usable server (docs/security.md)',
        );
    }
    if (before !== undefined || (drops?.size ?? 0) > 0)
      for (const [reason, count] of dropCounts) endpointsDropped.set({ reason }, count);
  };

  /** Recomputes the servers of every reference to these Services (`namespace/name`). */
  const recompute = (services: Iterable<string>) => {
    for (const id of services) {
      for (const ref of refsByService.get(id) ?? []) {
        const watched = sliceWatches.get(ref.namespace);
        const key = serviceRefKey(ref);
        if (!watched?.listed) {
          if (servers.delete(key)) changedKeys.add(key);
          setDrops(key, null);
          continue;
        }
        const result = serversOf(ref, watched.byService.get(ref.name) ?? []);
        if (!sameServers(servers.get(key), result.found)) {
          servers.set(key, result.found);
          changedKeys.add(key);
        }
        setDrops(key, result.drops);
      }
    }
  };

  const publishEndpoints = () => {
    if (closed || changedKeys.size === 0) return;
    const changed = new Set(changedKeys);
    changedKeys.clear();
    lastSnapshot = new Map(servers);
    options.onEndpoints?.(lastSnapshot, changed);
  };

  const startNamespaceWatch = (sliceNamespace: string): NamespaceSlices => {
    // Every slice the EndpointSlice controller made for a Service carries the label.
    const labelSelector = SERVICE_NAME_LABEL;
    const entry: { watch?: ResourceWatch } & Omit<NamespaceSlices, 'watch'> = {
      byService: new Map(),
      listed: false,
    };
    entry.watch = startResourceWatch<V1EndpointSlice>({
      kubeConfig,
      resource: 'endpointslices',
      description: `EndpointSlices in ${sliceNamespace}`,
      path: `/apis/discovery.k8s.io/v1/namespaces/${sliceNamespace}/endpointslices`,
      list: (callOptions) =>
        discovery.listNamespacedEndpointSlice({ namespace: sliceNamespace, labelSelector }, callOptions),
      labelSelector,
      onObjects: (slices) => {
        const next = slicesByService(slices);
        const changed = new Set<string>();
        for (const [name, list] of next)
          if (!sameSlices(entry.byService.get(name), list)) changed.add(`${sliceNamespace}/${name}`);
        for (const name of entry.byService.keys())
          if (!next.has(name)) changed.add(`${sliceNamespace}/${name}`);
        entry.byService = next;
        for (const id of changed) servicePorts.delete(id);
        if (!entry.listed) {
          // First list: every watched Service of the namespace gets its servers, slices or none.
          entry.listed = true;
          for (const id of refsByService.keys()) if (id.startsWith(`${sliceNamespace}/`)) changed.add(id);
        }
        checkSynced();
        recompute(changed);
        publishEndpoints();
      },
      health,
      logger,
      tuning: options.tuning,
    });
    return entry as NamespaceSlices;
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
      const previous = refsByService;
      refsByService = new Map();
      for (const ref of next) {
        const id = `${ref.namespace}/${ref.name}`;
        const list = refsByService.get(id) ?? [];
        refsByService.set(id, list);
        list.push(ref);
      }
      // References no longer named lose their servers; new ones get theirs.
      const wantedKeys = new Set(next.map(serviceRefKey));
      for (const key of [...servers.keys()]) {
        if (wantedKeys.has(key)) continue;
        servers.delete(key);
        changedKeys.add(key);
        setDrops(key, null);
      }
      const touched: string[] = [];
      for (const [id, list] of refsByService) {
        const before = previous.get(id);
        if (before === undefined || list.some((ref) => !servers.has(serviceRefKey(ref)))) touched.push(id);
      }
      const namespaces = new Set(next.map((ref) => ref.namespace));
      for (const [sliceNamespace, watched] of sliceWatches) {
        if (namespaces.has(sliceNamespace)) continue;
        sliceWatches.delete(sliceNamespace);
        void watched.watch.stop();
      }
      for (const sliceNamespace of namespaces) {
        if (!sliceWatches.has(sliceNamespace))
          sliceWatches.set(sliceNamespace, startNamespaceWatch(sliceNamespace));
      }
      recompute(touched);
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
        ...[...sliceWatches.values()].map((watched) => watched.watch.stop()),
        configMapWatch?.stop(),
      ]);
      sliceWatches.clear();
    },
  };
}

/** Slices by the Service their label names. */
function slicesByService(slices: readonly V1EndpointSlice[]): Map<string, V1EndpointSlice[]> {
  const byService = new Map<string, V1EndpointSlice[]>();
  for (const slice of slices) {
    const name = (slice as { metadata?: { labels?: Record<string, unknown> } } | null)?.metadata?.labels?.[
      SERVICE_NAME_LABEL
    ];
    if (typeof name !== 'string' || name === '') continue;
    const list = byService.get(name) ?? [];
    byService.set(name, list);
    list.push(slice);
  }
  return byService;
}

/** The same slice objects (the informer keeps an unchanged object as it was). */
function sameSlices(a: readonly V1EndpointSlice[] | undefined, b: readonly V1EndpointSlice[]): boolean {
  return a !== undefined && a.length === b.length && a.every((slice, i) => slice === b[i]);
}

function sameServers(a: readonly ServerAddress[] | undefined, b: readonly ServerAddress[]): boolean {
  return a !== undefined && a.length === b.length && a.every((server, i) => server.raw === b[i]?.raw);
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
