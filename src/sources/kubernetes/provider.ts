import { waitsForConfigMap } from '../../config/load.ts';
import { resolveServiceRef, type ServiceRef, serviceRefKey } from '../../config/service-ref.ts';
import type {
  HostConfig,
  ListenAddress,
  MainConfig,
  ServerAddress,
  UpstreamsConfig,
} from '../../config/types.ts';
import type { Logger } from '../../log.ts';
import type { EndpointLookup } from '../../routing/compile.ts';
import type { RoutingTable } from '../../routing/types.ts';
import type { Runtime } from '../../runtime.ts';
import type { UpstreamsApplier } from '../apply-upstreams.ts';
import type { CertificateStore } from '../certificate-store.ts';
import { reaches } from './endpoints.ts';
import { createGatewaySource, type GatewaySource } from './gateway/source.ts';
import { type CertificatePem, createIngressCertificates } from './ingress/certificates.ts';
import { createIngressSource, type IngressSource } from './ingress/source.ts';
import { connectKube } from './kubeconfig.ts';
import {
  createKubernetesMerge,
  gatewayRoutes,
  ingressRoutes,
  type SourceName,
  type SourceRoutes,
} from './merge.ts';
import { createRebuilds } from './rebuilds.ts';
import type { WatchTuning } from './resource-watch.ts';
import { createKubernetesSource, type EndpointSnapshot, type KubernetesSource } from './source.ts';
import { pathServiceRefs, serviceRefs } from './use.ts';

const NO_SERVERS: readonly ServerAddress[] = Object.freeze([]);

export interface KubernetesProviderOptions {
  /** The TLS listener's SNI store (none without a TLS listener): Ingress TLS Secrets are added to it. */
  certificates?: CertificateStore | null;
  main: MainConfig;
  /** The config live at start. */
  initial: UpstreamsConfig;
  runtime: Runtime;
  logger: Logger;
  tuning?: Partial<WatchTuning> | undefined;
  /** Tollgate's own bound listeners: endpoints reaching them are dropped (docs/security.md). */
  ownListeners?: (() => readonly ListenAddress[]) | undefined;
}

export interface KubernetesProvider {
  /**
   * compile for every apply: the config with the Ingress and Gateway API routes and the Services'
   * current ready endpoints; throws, saying why, when the merged config is refused (merge.ts).
   */
  compile(config: UpstreamsConfig): RoutingTable;
  /** The config with the Ingress and Gateway API routes merged in: what is compiled (and what workers are sent). */
  effective(config: UpstreamsConfig): UpstreamsConfig;
  /** The ready servers of a `service:` reference now (what compile uses; a primary sends them on). */
  endpointsOf: EndpointLookup;
  /** The Ingress TLS certificates now (what the SNI store has; a primary sends them on). */
  certificates(): CertificatePem[];
  /** Tells the provider a config went live (start, file reload, ConfigMap): watches follow it. */
  configApplied(config: UpstreamsConfig): void;
  /** Hands ConfigMap contents to the shared apply path (parse → validate → compile → swap). */
  attach(applier: UpstreamsApplier): void;
  /** Every watch listed once: readiness. */
  whenSynced(): Promise<void>;
  synced(): boolean;
  close(): Promise<void>;
}

/**
 * The Kubernetes side of a running Tollgate: owns the watches (endpoints, the upstreams ConfigMap,
 * Ingresses, Gateway API objects) and schedules the rebuilds their changes call for; merge.ts
 * combines upstreams.yaml with the translations, validates, compiles and swaps (docs/kubernetes.md),
 * so an endpoint change and a reload meet in the same compile and swap. Throws when no credentials
 * exist.
 */
export function startKubernetesProvider(options: KubernetesProviderOptions): KubernetesProvider {
  const { main, runtime, logger } = options;
  const connection = connectKube({
    kubeconfig: main.kubernetes?.kubeconfig,
    namespace: main.kubernetes?.namespace,
  });
  // Started without an upstreams.yaml file: not ready until the ConfigMap's copy went live.
  let configArrived: (() => void) | null = null;
  const arrived = waitsForConfigMap(options.initial)
    ? new Promise<void>((resolve) => {
        configArrived = resolve;
      })
    : null;
  let endpoints: EndpointSnapshot = new Map();
  // Asked for every path of every compile: the key is kept per reference object (configs are never
  // changed once made), and a Service without servers answers the same empty list each time, so that
  // a compile can tell an unchanged answer by identity (routing/compile.ts keeps those routes).
  const refKeys = new WeakMap<ServiceRef, string>();
  // Each snapshot is a new Map never changed after (source.ts): the same snapshot, the same answers,
  // so a compile keeps whole hosts without asking for each of their Services again.
  const endpointsOf: EndpointLookup = Object.assign(
    (ref: ServiceRef) => {
      let key = refKeys.get(ref);
      if (key === undefined) {
        key = serviceRefKey(resolveServiceRef(ref, connection.namespace));
        refKeys.set(ref, key);
      }
      return endpoints.get(key) ?? NO_SERVERS;
    },
    { snapshot: () => endpoints },
  );
  const ingressClass = main.kubernetes?.ingressClass;
  const gatewayClass = main.kubernetes?.gatewayClass;
  // upstreams.yaml, the translations and their validation meet in merge.ts alone.
  const merge = createKubernetesMerge({
    main,
    runtime,
    logger,
    namespace: connection.namespace,
    initial: options.initial,
    sources: [
      ...(main.kubernetes && ingressClass ? (['ingresses'] as const) : []),
      ...(main.kubernetes && gatewayClass ? (['gateway api routes'] as const) : []),
    ],
    endpointsOf,
  });
  const servedCertificates = createIngressCertificates(logger);
  const rebuilds = createRebuilds({ logger, rebuild: merge.rebuild });

  const source: KubernetesSource = createKubernetesSource({
    connection,
    logger,
    upstreamsConfigMap: main.kubernetes?.upstreamsConfigMap ?? null,
    tuning: options.tuning,
    ownListeners: options.ownListeners,
    onEndpoints: (snapshot, changed) => {
      endpoints = snapshot;
      rebuilds.request({ services: changed });
    },
    onConfigMap: merge.configMapChanged,
  });
  // The Services the EndpointSlice watches follow, as last handed over: an edit that names the same
  // Services in the same order (nearly every one) hands nothing over. Kept per host object, which
  // the merge keeps while a host's paths stay the same (merge.ts internHosts).
  const hostServices = new WeakMap<HostConfig, string>();
  const servicesOfHost = (host: HostConfig) => {
    let text = hostServices.get(host);
    if (text === undefined) {
      text = host.paths
        .map((path) =>
          pathServiceRefs(path)
            .map((ref) => serviceRefKey(resolveServiceRef(ref, connection.namespace)))
            .join(','),
        )
        .join(' ');
      hostServices.set(host, text);
    }
    return text;
  };
  // The hosts last handed over, with their Services: a host that is the same object is skipped
  // without a look at its paths, a changed one compares its Services' text.
  let watched: { hosts: readonly HostConfig[]; named: readonly string[] } | null = null;
  const sameServices = (hosts: readonly HostConfig[]) => {
    if (watched === null || watched.hosts.length !== hosts.length) return false;
    for (let index = 0; index < hosts.length; index++) {
      const host = hosts[index] as HostConfig;
      if (host !== watched.hosts[index] && servicesOfHost(host) !== watched.named[index]) return false;
    }
    return true;
  };
  const watchServicesOf = (config: UpstreamsConfig) => {
    const effective = merge.effective(config);
    if (sameServices(effective.hosts)) {
      // Same Services: keep the new host objects, so that the next change skips them by identity.
      if (watched !== null) watched = { hosts: effective.hosts, named: watched.named };
      return;
    }
    watched = { hosts: effective.hosts, named: effective.hosts.map(servicesOfHost) };
    source.watchServices(serviceRefs(effective).map((ref) => resolveServiceRef(ref, connection.namespace)));
  };
  let ingress: IngressSource | null = null;
  let gateway: GatewaySource | null = null;
  const otherSource = (name: SourceName) => (name === 'ingresses' ? gateway : ingress);
  // What either source does with a new translation: tell the other when its claims changed, and
  // when what it serves changed, serve its certificates, watch its Services and rebuild.
  const translated = (name: SourceName, routes: SourceRoutes) => {
    const change = merge.translated(name, routes);
    if (change.claims) otherSource(name)?.baseChanged();
    if (!change.served) return;
    if (options.certificates) servedCertificates.update(options.certificates, merge.certificates());
    watchServicesOf(merge.base());
    rebuilds.request({ source: name });
  };
  if (main.kubernetes && ingressClass) {
    ingress = createIngressSource({
      kubeConfig: connection.kubeConfig,
      settings: { ...main.kubernetes, ingressClass },
      logger,
      tuning: options.tuning,
      ownListeners: options.ownListeners,
      oidcProviders: Object.keys(main.oidcProviders ?? {}),
      base: merge.base,
      otherClaims: () => merge.claimsOf('gateway api routes'),
      onTranslation: (translation) => translated('ingresses', ingressRoutes(translation)),
    });
  }
  if (main.kubernetes && gatewayClass) {
    gateway = createGatewaySource({
      kubeConfig: connection.kubeConfig,
      settings: { ...main.kubernetes, gatewayClass },
      logger,
      tuning: options.tuning,
      reachesTollgate: (host, port) =>
        (options.ownListeners?.() ?? []).some((listener) => reaches(listener, host, port)),
      oidcProviders: Object.keys(main.oidcProviders ?? {}),
      claims: () => ({
        fileHosts: merge.base().hosts.map((host) => host.name),
        ingressClaims: merge.claimsOf('ingresses'),
      }),
      onTranslation: (translation) => translated('gateway api routes', gatewayRoutes(translation)),
    });
  }
  const initial = options.initial;
  watchServicesOf(initial);
  logger.info(
    {
      credentials: connection.origin,
      namespace: connection.namespace,
      // A count: with thousands of Services a list would make one enormous line.
      services: serviceRefs(initial).length,
    },
    'kubernetes provider started',
  );
  if (arrived !== null) {
    logger.info(
      { file: initial.file, configmap: main.kubernetes?.upstreamsConfigMap },
      'no upstreams.yaml file: not ready until the upstreams ConfigMap is read through the API',
    );
  }

  return {
    compile: merge.compile,
    effective: merge.effective,
    certificates: merge.certificates,
    endpointsOf,
    configApplied(config) {
      merge.baseApplied(config);
      watchServicesOf(config);
      ingress?.baseChanged();
      gateway?.baseChanged();
      if (!waitsForConfigMap(config)) {
        configArrived?.();
        configArrived = null;
      }
    },
    attach: merge.attach,
    whenSynced: async () => {
      await Promise.all([source.whenSynced(), ingress?.whenSynced(), gateway?.whenSynced(), arrived]);
      // The Ingress routes named Services whose EndpointSlice watches started since.
      await source.whenSynced();
      // Ready means served: the table with every source's first state went live.
      await rebuilds.idle();
    },
    synced: () =>
      source.synced() &&
      (ingress?.synced() ?? true) &&
      (gateway?.synced() ?? true) &&
      configArrived === null &&
      !rebuilds.pending(),
    close: async () => {
      rebuilds.close();
      await Promise.all([source.close(), ingress?.close(), gateway?.close()]);
    },
  };
}
