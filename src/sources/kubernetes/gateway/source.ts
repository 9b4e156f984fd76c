import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1Namespace,
  type V1Service,
} from '@kubernetes/client-node';
import type { KubernetesSettings } from '../../../config/types.ts';
import type { Logger } from '../../../log.ts';
import { recordEvent } from '../events.ts';
import { gatewayRoutes } from '../metrics.ts';
import type { AgedClaim } from '../ownership.ts';
import { followPublishedAddresses, isIpAddress } from '../published-addresses.ts';
import type { ResourceWatch, WatchTuning } from '../resource-watch.ts';
import { ConfigMapWatches, SecretWatches } from '../secret-watches.ts';
import { createTranslationLoop, type TranslatingSource } from '../translation-loop.ts';
import type { WatchedResource } from '../watch-kinds.ts';
import {
  GATEWAY_CONTROLLER,
  type Gateway,
  type GatewayClass,
  type HttpRoute,
  type ReferenceGrant,
} from './objects.ts';
import type { TollgatePolicy } from './policy.ts';
import { API_OF, createStatusWriter } from './status.ts';
import { createStatusMemo, forgettingFailedWrites } from './status-memo.ts';
import {
  configMapsWanted,
  type DesiredStatus,
  type GatewayInput,
  type GatewayTranslation,
  type RouteOutcome,
  secretsWanted,
  translateGateways,
} from './translate.ts';
import { GatewayTranslationCache } from './translation-cache.ts';

export interface GatewaySourceOptions {
  kubeConfig: KubeConfig;
  settings: KubernetesSettings & { gatewayClass: string };
  logger: Logger;
  /** Hosts upstreams.yaml serves and the Ingresses' claims, as live now: they take precedence by age. */
  claims: () => { fileHosts: readonly string[]; ingressClaims: readonly AgedClaim[] };
  /** A new translation, after any change (coalesced; never before every watch listed once). */
  onTranslation: (translation: GatewayTranslation) => void;
  tuning?: Partial<WatchTuning> | undefined;
  reachesTollgate?: ((host: string, port: number) => boolean) | undefined;
  /** The names of main.yaml's `oidc_providers`. */
  oidcProviders?: readonly string[] | undefined;
}

/** baseChanged: upstreams.yaml or the Ingresses' claims changed (host ownership). */
export interface GatewaySource extends TranslatingSource<GatewayTranslation> {
  /** Every queued status write done (tests). */
  statusIdle(): Promise<void>;
}

type Stored = KubernetesObject & { status?: Record<string, unknown> };

/**
 * The Gateway API side of the Kubernetes source (docs/gateway-api.md): informers for GatewayClasses,
 * Namespaces (their labels, for allowedRoutes selectors), and in `watch_namespaces` (else
 * cluster-wide) Gateways, HTTPRoutes, GRPCRoutes, ReferenceGrants, TollgatePolicies and Services;
 * one per Secret a listener or policy names. It never compiles: each change gives a new translation
 * to the provider, which merges and compiles it like a reload. It writes back what it did: status
 * (one writer), Events for problems, and tollgate_gateway_routes.
 */
export function createGatewaySource(options: GatewaySourceOptions): GatewaySource {
  const { kubeConfig, settings, logger } = options;
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const namespaces = settings.watchNamespaces ?? null;
  const stores = new Map<string, readonly Stored[]>();
  /** The watches of each custom kind: a status write finds its object through them by name. */
  const watchesOf = new Map<string, ResourceWatch[]>();
  let namespaceObjects: readonly V1Namespace[] = [];
  /** What the last report said of everything but routes: key → text. */
  let reported = new Map<string, string>();
  /**
   * Per route reported last (`kind namespace/name`): its text, what it was made from, and its labels
   * on tollgate_gateway_routes. Kept and updated in place, so that a translation in which one route
   * changed costs a look-up per route, not new maps of every route (docs/benchmark.md).
   */
  const routeReports = new Map<string, RouteReport>();
  /** Counts the reports: a route report not seen by the latest one is gone. */
  let generation = 0;
  const missingKinds = new Set<string>();
  /** One list for every translation: a policy's cached build compares it by identity. */
  const oidcProviders = options.oidcProviders ?? [];
  /** Each route, Gateway and policy translated, kept while what it read is the same (translation-cache.ts). */
  const cache = new GatewayTranslationCache();
  /** The Services by `namespace/name`, rebuilt only when a Services watch brought new objects. */
  let namespaceIndex: {
    objects: readonly V1Namespace[];
    labels: Map<string, Readonly<Record<string, string>>>;
  } | null = null;
  let serviceIndex: { lists: ReadonlyArray<readonly Stored[]>; services: Map<string, V1Service> } | null =
    null;
  const loop = createTranslationLoop<GatewayTranslation>({
    kubeConfig,
    logger,
    tuning: options.tuning,
    translate,
    translated: (next) => {
      report(next);
      const changed = handed.changed(next.statuses, storedOf);
      // Never an empty write: the writer's drain, started on an empty queue, ends before `running` is
      // set, which would leave it looking busy and take no later write (gateway/status.ts).
      if (changed.length > 0) writer.write(changed);
      options.onTranslation(next);
    },
    stop: () => {
      writer.close();
      return Promise.all([secretWatches.stop(), configMapWatches.stop()]);
    },
  });
  const { watch } = loop;
  // The Secrets the objects name, each on its own watch (kubernetes/secret-watches.ts).
  const secretWatches = new SecretWatches(watch, core);
  const configMapWatches = new ConfigMapWatches(watch, core);

  /** List + watch of a custom kind, in one namespace or all (cluster-scoped kinds: namespace null). */
  const watchCustom = (
    resource: WatchedResource,
    api: { group: string; version: string; plural: string; clusterScoped?: boolean },
    namespace: string | null,
  ) => {
    const base = `/apis/${api.group}/${api.version}`;
    const key = `${resource} ${namespace ?? '*'}`;
    const started = watch<Stored>(
      resource,
      `${api.plural} in ${api.clusterScoped ? 'the cluster' : (namespace ?? 'every namespace')}`,
      namespace && !api.clusterScoped
        ? `${base}/namespaces/${namespace}/${api.plural}`
        : `${base}/${api.plural}`,
      (o) =>
        (
          (api.clusterScoped
            ? custom.listClusterCustomObject({ ...api }, o)
            : namespace
              ? custom.listNamespacedCustomObject({ ...api, namespace }, o)
              : custom.listCustomObjectForAllNamespaces(
                  { ...api, resourcePlural: api.plural },
                  o,
                )) as Promise<KubernetesListObject<Stored>>
        ).catch((error: { code?: number }) => {
          // The CRD is not installed (GRPCRoute before Gateway API v1.1, TollgatePolicy without the
          // chart's CRD): nothing of that kind exists, which must not hold back every other route.
          if (error?.code !== 404) throw error;
          if (!missingKinds.has(api.plural)) {
            missingKinds.add(api.plural);
            logger.warn(
              { resource: `${api.group}/${api.version} ${api.plural}` },
              'kind not served by the API server (CRD not installed?): read as none',
            );
          }
          return { apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '' }, items: [] };
        }),
      (objects) => stores.set(key, objects),
    );
    watchesOf.set(resource, [...(watchesOf.get(resource) ?? []), started]);
    return started;
  };

  loop.track(
    watchCustom('gatewayclasses', API_OF.gatewayclasses, null),
    watch<V1Namespace>(
      'namespaces',
      'Namespaces',
      '/api/v1/namespaces',
      (o) => core.listNamespace({}, o),
      (objects) => {
        namespaceObjects = objects;
      },
    ),
  );
  const REFERENCE_GRANTS = {
    group: 'gateway.networking.k8s.io',
    version: 'v1beta1',
    plural: 'referencegrants',
  };
  for (const namespace of namespaces ?? [null]) {
    loop.track(
      watchCustom('gateways', API_OF.gateways, namespace),
      watchCustom('httproutes', API_OF.httproutes, namespace),
      watchCustom('grpcroutes', API_OF.grpcroutes, namespace),
      watchCustom('referencegrants', REFERENCE_GRANTS, namespace),
      watchCustom('tollgatepolicies', API_OF.tollgatepolicies, namespace),
      watch<V1Service>(
        'services',
        `Services in ${namespace ?? 'every namespace'}`,
        namespace ? `/api/v1/namespaces/${namespace}/services` : '/api/v1/services',
        (o) =>
          namespace ? core.listNamespacedService({ namespace }, o) : core.listServiceForAllNamespaces({}, o),
        (objects) => stores.set(`services ${namespace ?? '*'}`, objects as Stored[]),
      ),
    );
  }
  const published = followPublishedAddresses(settings, watch, core);
  if (published.watch) loop.track(published.watch);

  const objectsOf = <T>(resource: string): T[] =>
    [...stores.entries()]
      .filter(([key]) => key.startsWith(`${resource} `))
      .flatMap(([, list]) => list) as T[];

  /** The object a status is about, as the watches last saw it: looked up by name, not searched. */
  const storedOf = (status: DesiredStatus): Stored | undefined => {
    const namespace = API_OF[status.resource].clusterScoped ? undefined : status.namespace;
    for (const watched of watchesOf.get(status.resource) ?? []) {
      const found = watched.get(status.name, namespace) as Stored | undefined;
      if (found !== undefined) return found;
    }
    return undefined;
  };
  const handed = createStatusMemo();
  const writer = createStatusWriter({
    custom: forgettingFailedWrites(custom, handed),
    logger,
    current: storedOf,
  });

  function translate(): GatewayTranslation | null {
    const base = {
      className: settings.gatewayClass,
      gatewayNames: settings.gatewayNames ?? null,
      classes: objectsOf<GatewayClass>('gatewayclasses'),
      gateways: objectsOf<Gateway>('gateways'),
      policies: objectsOf<TollgatePolicy>('tollgatepolicies'),
    };
    // Secrets first: a translation never concludes "missing" about a Secret not listed yet.
    secretWatches.follow(new Set(secretsWanted(base)));
    configMapWatches.follow(new Set(configMapsWanted(base)));
    if (!secretWatches.synced || !configMapWatches.synced) return null;
    const secrets = secretWatches.current();
    const input: GatewayInput = {
      ...base,
      httpRoutes: objectsOf<HttpRoute>('httproutes'),
      grpcRoutes: objectsOf<HttpRoute>('grpcroutes'),
      grants: objectsOf<ReferenceGrant>('referencegrants'),
      namespaces: namespacesNow(),
      services: servicesNow(),
      secrets,
      configMaps: configMapWatches.current(),
      ...options.claims(),
      addresses: publishedAddresses(),
      reachesTollgate: options.reachesTollgate,
      oidcProviders,
    };
    try {
      return translateGateways(input, cache);
    } catch (error) {
      // A translation bug must not stop serving what is live: keep the last one, say so loudly.
      logger.error({ err: error }, 'gateway api translation failed; the previous routes keep serving');
      return null;
    }
  }

  /** Namespace labels by name: the last map while the Namespaces watch holds the same list. */
  function namespacesNow(): GatewayInput['namespaces'] {
    if (namespaceIndex?.objects !== namespaceObjects)
      namespaceIndex = {
        objects: namespaceObjects,
        labels: new Map(
          namespaceObjects.map((item) => [item.metadata?.name ?? '', item.metadata?.labels ?? {}]),
        ),
      };
    return namespaceIndex.labels;
  }

  /** The Services by `namespace/name`: the last index while every Services watch holds the same list. */
  function servicesNow(): Map<string, V1Service> {
    const lists = [...stores.entries()]
      .filter(([key]) => key.startsWith('services '))
      .map(([, list]) => list);
    if (
      serviceIndex !== null &&
      serviceIndex.lists.length === lists.length &&
      serviceIndex.lists.every((list, index) => list === lists[index])
    )
      return serviceIndex.services;
    const services = new Map<string, V1Service>();
    for (const list of lists)
      for (const service of list as readonly V1Service[])
        services.set(`${service.metadata?.namespace}/${service.metadata?.name}`, service);
    serviceIndex = { lists, services };
    return services;
  }

  /** Logs, Events and the gauge, for what changed since the last translation. */
  function report(translation: GatewayTranslation): void {
    const now = new Map<string, string>();
    for (const problem of translation.malformed ?? []) {
      now.set(`malformed ${problem}`, problem);
      if (!reported.has(`malformed ${problem}`))
        logger.warn({ problem }, 'gateway api object malformed: left out');
    }
    // The configured class refused (a parametersRef): nothing of it is served; say so once.
    const ownClass = translation.statuses.find(
      (item) => item.resource === 'gatewayclasses' && item.name === settings.gatewayClass,
    );
    const refused = (
      ownClass?.status.conditions as Array<{ type: string; status: string; message: string }>
    )?.find((item) => item.type === 'Accepted' && item.status === 'False')?.message;
    if (refused !== undefined) {
      const key = `GatewayClass ${settings.gatewayClass}`;
      now.set(key, refused);
      if (reported.get(key) !== refused) {
        logger.warn(
          { gatewayClass: settings.gatewayClass, problem: refused },
          'gateway class not accepted: none of its Gateways is served',
        );
        // A cluster-scoped object's Events live in the default namespace.
        void event('GatewayClass', 'default', settings.gatewayClass, 'Warning', 'InvalidParameters', refused);
      }
    }
    for (const gateway of translation.gateways) {
      // A listener that cannot be served: a Warning Event on its Gateway (its status says the same).
      const problems = gateway.listeners
        .filter((listener) => !listener.usable)
        .map(
          (listener) =>
            `listener ${listener.name}: ${listener.conditions.find((c) => c.status === 'False')?.message ?? 'not served'}`,
        );
      const key = `Gateway ${gateway.namespace}/${gateway.name}`;
      const text = JSON.stringify(problems);
      now.set(key, text);
      if (reported.get(key) === text || problems.length === 0) continue;
      logger.warn({ gateway: key, problems }, 'gateway listeners not served');
      void event(
        'Gateway',
        gateway.namespace,
        gateway.name,
        'Warning',
        'ListenerNotServed',
        problems.join('; '),
      );
    }
    // The first report starts from nothing, as the gauge then holds no route of this source.
    if (generation === 0) gatewayRoutes.reset();
    generation++;
    let seen = 0;
    for (const route of translation.routes) {
      // A malformed route names no parent it could be told through: it still gets its Event.
      if (route.parents.length === 0 && route.problems.length === 0) continue;
      const key = routeKey(route);
      const before = routeReports.get(key);
      if (before?.seen === generation) continue; // named twice: told once
      seen++;
      // The same problems (the very list of an unchanged route's outcome): the same text and labels,
      // nothing to tell.
      if (before !== undefined && before.problems === route.problems && before.accepted === route.accepted) {
        before.seen = generation;
        continue;
      }
      const text = JSON.stringify([route.accepted, route.problems]);
      const accepted = String(route.accepted);
      const labels =
        before !== undefined && before.labels.accepted === accepted
          ? before.labels
          : { kind: route.kind, namespace: route.namespace, name: route.name, accepted };
      routeReports.set(key, {
        accepted: route.accepted,
        problems: route.problems,
        text,
        labels,
        seen: generation,
      });
      // tollgate_gateway_routes: a route whose `accepted` changed is moved to its new label set.
      if (before !== undefined && before.labels !== labels) gatewayRoutes.remove(before.labels);
      if (before?.labels !== labels) gatewayRoutes.set(labels, 1);
      if (before?.text === text) continue;
      if (route.problems.length > 0) {
        logger.warn(
          { route: key, problems: route.problems, accepted: route.accepted },
          'gateway route not served as written',
        );
        void event(
          route.kind,
          route.namespace,
          route.name,
          'Warning',
          route.accepted ? 'PartlyServed' : 'Rejected',
          route.problems.join('; '),
        );
      } else {
        logger.info({ route: key }, 'gateway route served');
        if (before !== undefined)
          void event(route.kind, route.namespace, route.name, 'Normal', 'Served', 'served by Tollgate');
      }
    }
    // Routes gone (or now without parent and problem): off the gauge. Every report kept is one this
    // report saw, unless some are left: only then are they walked.
    if (seen < routeReports.size) {
      for (const [key, entry] of routeReports) {
        if (entry.seen === generation) continue;
        routeReports.delete(key);
        gatewayRoutes.remove(entry.labels);
      }
    }
    for (const policy of translation.policies) {
      const key = `TollgatePolicy ${policy.namespace}/${policy.name}`;
      const text = JSON.stringify([policy.problems, policy.warnings]);
      now.set(key, text);
      if (reported.get(key) === text) continue;
      if (policy.problems.length === 0) {
        // Honoured, with something to change (docs/gateway-api.md#tollgatepolicy).
        if (policy.warnings.length === 0) continue;
        logger.warn({ policy: key, warnings: policy.warnings }, 'tollgate policy applied with a warning');
        void event(
          'TollgatePolicy',
          policy.namespace,
          policy.name,
          'Warning',
          'PolicyWarning',
          policy.warnings.join('; '),
        );
        continue;
      }
      logger.warn({ policy: key, problems: policy.problems }, 'tollgate policy not applied as written');
      void event(
        'TollgatePolicy',
        policy.namespace,
        policy.name,
        'Warning',
        'PolicyProblem',
        policy.problems.join('; '),
      );
    }
    reported = now;
  }

  async function event(
    kind: string,
    namespace: string,
    name: string,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ) {
    const apiVersion = kind === 'TollgatePolicy' ? 'tollgate.io/v1alpha1' : 'gateway.networking.k8s.io/v1';
    const resource = {
      TollgatePolicy: 'tollgatepolicies',
      HTTPRoute: 'httproutes',
      GRPCRoute: 'grpcroutes',
      Gateway: 'gateways',
      GatewayClass: 'gatewayclasses',
    }[kind];
    const object = objectsOf<Stored>(resource ?? '').find(
      (item) =>
        (kind === 'GatewayClass' || item.metadata?.namespace === namespace) && item.metadata?.name === name,
    );
    await recordEvent(
      core,
      logger,
      GATEWAY_CONTROLLER,
      { apiVersion, kind, namespace, name, stored: object },
      type,
      reason,
      message,
    );
  }

  /** What Gateway status announces (kubernetes/published-addresses.ts). */
  function publishedAddresses(): GatewayInput['addresses'] {
    return (
      published.current()?.map((value) => ({
        type: isIpAddress(value) ? ('IPAddress' as const) : ('Hostname' as const),
        value,
      })) ?? null
    );
  }

  return { ...loop.source, statusIdle: () => writer.idle() };
}

/** What the last report said of a route (createGatewaySource's report). */
interface RouteReport {
  accepted: boolean;
  problems: readonly string[];
  text: string;
  /** Its labels on tollgate_gateway_routes. */
  labels: { kind: string; namespace: string; name: string; accepted: string };
  /** The report that saw it last. */
  seen: number;
}

/** `HTTPRoute namespace/name`, made once per outcome object (an unchanged route keeps its outcome). */
const routeKeys = new WeakMap<RouteOutcome, string>();
function routeKey(route: RouteOutcome): string {
  let key = routeKeys.get(route);
  if (key === undefined) {
    key = `${route.kind} ${route.namespace}/${route.name}`;
    routeKeys.set(route, key);
  }
  return key;
}
