import { sha256Hex, waitsForConfigMap } from '../../config/load.ts';
import { resolveServiceRef, type ServiceRef, serviceRefKey } from '../../config/service-ref.ts';
import type { ListenAddress, MainConfig, UpstreamsConfig } from '../../config/types.ts';
import type { Logger } from '../../log.ts';
import { compileRoutingTable, type EndpointLookup, recompileServers } from '../../routing/compile.ts';
import type { RoutingTable } from '../../routing/types.ts';
import type { Runtime } from '../../runtime.ts';
import type { UpstreamsApplier } from '../apply-upstreams.ts';
import type { CertificateStore } from '../certificate-store.ts';
import { reaches } from './endpoints.ts';
import { createGatewaySource, type GatewaySource } from './gateway/source.ts';
import type { GatewayTranslation } from './gateway/translate.ts';
import { type CertificatePem, createIngressCertificates } from './ingress/certificates.ts';
import { byCreation, hostOwners, ownedHosts, withClaimedHosts } from './ingress/ownership.ts';
import { createIngressSource, type IngressSource } from './ingress/source.ts';
import { type IngressTranslation, mergeIngressRoutes } from './ingress/translate.ts';
import { connectKube } from './kubeconfig.ts';
import { createRebuilds } from './rebuilds.ts';
import type { WatchTuning } from './resource-watch.ts';
import {
  type ConfigMapContent,
  createKubernetesSource,
  type EndpointSnapshot,
  type KubernetesSource,
  UPSTREAMS_KEY,
} from './source.ts';
import { serviceRefs } from './use.ts';

export interface KubernetesProviderOptions {
  /** The TLS listener's SNI store (none without a TLS listener): Ingress TLS Secrets are added to it. */
  certificates?: CertificateStore | null;
  main: MainConfig;
  /** The config live at start. */
  initial: UpstreamsConfig;
  runtime: Runtime;
  logger: Logger;
  tuning?: Partial<WatchTuning>;
  /** Tollgate's own bound listeners: endpoints reaching them are dropped (docs/security.md). */
  ownListeners?: () => readonly ListenAddress[];
}

export interface KubernetesProvider {
  /** compile for every apply: the config with the Ingress routes and the Services' current ready endpoints. */
  compile(config: UpstreamsConfig): RoutingTable;
  /** The config with the Ingress routes merged in: what is compiled (and what workers are sent). */
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
 * The Kubernetes side of a running Tollgate: owns the source, keeps the live config, and turns
 * every endpoint change into a new table compiled from that same config (docs/kubernetes.md), so an
 * endpoint change and a reload meet in the same compile and swap. Throws when no credentials exist.
 */
export function startKubernetesProvider(options: KubernetesProviderOptions): KubernetesProvider {
  const { main, runtime, logger } = options;
  const connection = connectKube({
    kubeconfig: main.kubernetes?.kubeconfig,
    namespace: main.kubernetes?.namespace,
  });
  let live = options.initial;
  // Started without an upstreams.yaml file: not ready until the ConfigMap's copy went live.
  let configArrived: (() => void) | null = null;
  const arrived = waitsForConfigMap(live)
    ? new Promise<void>((resolve) => {
        configArrived = resolve;
      })
    : null;
  let endpoints: EndpointSnapshot = new Map();
  let applier: UpstreamsApplier | null = null;
  // ConfigMap content that arrived before the apply path existed (listen() attaches it).
  const pendingConfigMap: ConfigMapContent[] = [];

  const endpointsOf: EndpointLookup = (ref) =>
    endpoints.get(serviceRefKey(resolveServiceRef(ref, connection.namespace))) ?? [];
  let ingress: IngressSource | null = null;
  const servedCertificates = createIngressCertificates(logger);
  let lastServed: string | null = null;
  let gateway: GatewaySource | null = null;
  let lastGatewayServed: string | null = null;
  let lastIngressClaims: string | null = null;
  let lastRouteClaims: string | null = null;
  // The translation each source serves now: replaced only when what it serves (hosts, certificates,
  // claims) changed, so that the effective config stays the same object between changes (and an
  // endpoint change can keep it and recompile only its servers).
  let ingressServed: IngressTranslation | null = null;
  let gatewayServed: GatewayTranslation | null = null;
  // upstreams.yaml first, then Ingresses, then Gateway API routes: each adds only hosts not yet served
  // (the translations already left out hosts another owner holds; docs/gateway-api.md#host-ownership).
  // Each keeps only the hosts its namespace owns by both sources' claims now (one translation may
  // predate the other's latest claims); last, a host claimed but served by nobody (its owner broken
  // for now) is held closed.
  // Endpoint changes compile the same three inputs again and again: the merge is kept for them
  // (translations and configs are never changed once made).
  let merged: {
    config: UpstreamsConfig;
    fromIngress: IngressTranslation | null;
    fromGateway: GatewayTranslation | null;
    result: UpstreamsConfig;
  } | null = null;
  const effective = (config: UpstreamsConfig) => {
    const fromIngress = ingressServed;
    const fromGateway = gatewayServed;
    // Until both sources listed their objects, the other's claims are unknown: serve neither yet.
    if ((ingress !== null && fromIngress === null) || (gateway !== null && fromGateway === null))
      return config;
    if (merged?.config === config && merged.fromIngress === fromIngress && merged.fromGateway === fromGateway)
      return merged.result;
    const claims = byCreation([...(fromIngress?.claims ?? []), ...(fromGateway?.claims ?? [])]);
    const owners = hostOwners(
      config.hosts.map((host) => host.name),
      claims,
    );
    const result = withClaimedHosts(
      mergeIngressRoutes(
        mergeIngressRoutes(config, ownedHosts(fromIngress?.hosts ?? [], owners)),
        ownedHosts(fromGateway?.hosts ?? [], owners),
      ),
      claims,
    );
    merged = { config, fromIngress, fromGateway, result };
    return result;
  };
  const allCertificates = (): CertificatePem[] => {
    const fromIngress = ingress?.translation();
    const fromGateway = gateway?.translation();
    return [
      ...(fromIngress ? certificatesOf(fromIngress) : []),
      ...(fromGateway ? gatewayCertificatesOf(fromGateway) : []),
    ];
  };
  const compile = (config: UpstreamsConfig) => compileRoutingTable(effective(config), endpointsOf);
  // The key of each `service:` reference of the effective config, kept per reference object: an
  // endpoint change asks it of every path, and the config stays the same objects between changes.
  const refKeys = new WeakMap<ServiceRef, string>();
  const keyOf = (ref: ServiceRef) => {
    let key = refKeys.get(ref);
    if (key === undefined) {
      key = serviceRefKey(resolveServiceRef(ref, connection.namespace));
      refKeys.set(ref, key);
    }
    return key;
  };
  const rebuilds = createRebuilds({
    logger,
    rebuild: (why) => {
      const config = effective(live);
      // Only endpoints changed: the routes of those Services get their servers, the rest stays.
      const partial =
        why.sources.size === 0
          ? recompileServers(runtime.table(), config, endpointsOf, (ref) => why.services.has(keyOf(ref)))
          : null;
      const table = partial ?? compileRoutingTable(config, endpointsOf);
      runtime.swapTable(table);
      return {
        routes: table.routes.length,
        servers: table.servers.length,
        partial: partial !== null,
      };
    },
  });

  const applyConfigMap = (content: ConfigMapContent) => {
    if (applier === null) {
      pendingConfigMap.splice(0, pendingConfigMap.length, content);
      return;
    }
    const name = `${connection.namespace}/${main.kubernetes?.upstreamsConfigMap}`;
    // Messages name the ConfigMap and its key, where the user has to look: `configmap/apps/x/upstreams.yaml:5:9: …`.
    const origin = `configmap/${name}/${UPSTREAMS_KEY}`;
    if (!content.ok) {
      applier.apply({ kind: 'unavailable', reason: content.problem }, 'configmap', origin);
      return;
    }
    const hash = sha256Hex(content.text);
    if (hash === runtime.table().sourceHash) return; // what is live already (e.g. the same ConfigMap mounted)
    applier.apply({ kind: 'content', text: content.text, hash }, 'configmap', origin);
  };

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
    onConfigMap: applyConfigMap,
  });
  const watchServicesOf = (config: UpstreamsConfig) =>
    source.watchServices(
      serviceRefs(effective(config)).map((ref) => resolveServiceRef(ref, connection.namespace)),
    );
  const ingressClass = main.kubernetes?.ingressClass;
  if (main.kubernetes && ingressClass) {
    ingress = createIngressSource({
      kubeConfig: connection.kubeConfig,
      settings: { ...main.kubernetes, ingressClass },
      logger,
      tuning: options.tuning,
      ownListeners: options.ownListeners,
      oidcProviders: Object.keys(main.oidcProviders ?? {}),
      base: () => live,
      otherClaims: () => gateway?.translation()?.claims ?? [],
      onTranslation: (translation) => {
        // The hosts Ingresses name are claims the Gateway API routes must respect, and the reverse
        // (docs/gateway-api.md#host-ownership). Claims depend on each source's own objects only, so
        // telling the other source when they change settles after one round.
        const claims = JSON.stringify(translation.claims ?? []);
        if (claims !== lastIngressClaims) {
          lastIngressClaims = claims;
          gateway?.baseChanged();
        }
        // Most changes (any Service in a watched namespace, an unrelated annotation) leave the routes
        // and certificates as they were: no new table, no broadcast to workers, no log line.
        // Claims too: a host claimed but not served is held closed (withClaimedHosts).
        const served = JSON.stringify([translation.hosts, translation.certificates, claims]);
        if (served === lastServed) return;
        lastServed = served;
        ingressServed = translation;
        if (options.certificates) servedCertificates.update(options.certificates, allCertificates());
        watchServicesOf(live);
        rebuilds.request({ source: 'ingresses' });
      },
    });
  }
  const gatewayClass = main.kubernetes?.gatewayClass;
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
        fileHosts: live.hosts.map((host) => host.name),
        ingressClaims: ingress?.translation()?.claims ?? [],
      }),
      onTranslation: (translation) => {
        const claims = JSON.stringify(translation.claims ?? []);
        if (claims !== lastRouteClaims) {
          lastRouteClaims = claims;
          ingress?.baseChanged();
        }
        const served = JSON.stringify([translation.hosts, translation.certificates, claims]);
        if (served === lastGatewayServed) return;
        lastGatewayServed = served;
        gatewayServed = translation;
        if (options.certificates) servedCertificates.update(options.certificates, allCertificates());
        watchServicesOf(live);
        rebuilds.request({ source: 'gateway api routes' });
      },
    });
  }
  watchServicesOf(live);
  logger.info(
    {
      credentials: connection.origin,
      namespace: connection.namespace,
      // A count: with thousands of Services a list would make one enormous line.
      services: serviceRefs(live).length,
    },
    'kubernetes provider started',
  );
  if (arrived !== null) {
    logger.info(
      { file: live.file, configmap: main.kubernetes?.upstreamsConfigMap },
      'no upstreams.yaml file: not ready until the upstreams ConfigMap is read through the API',
    );
  }

  return {
    compile,
    effective,
    certificates: allCertificates,
    endpointsOf,
    configApplied(config) {
      live = config;
      watchServicesOf(config);
      ingress?.baseChanged();
      gateway?.baseChanged();
      if (!waitsForConfigMap(config)) {
        configArrived?.();
        configArrived = null;
      }
    },
    attach(next) {
      applier = next;
      for (const content of pendingConfigMap.splice(0)) applyConfigMap(content);
    },
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

function gatewayCertificatesOf(translation: GatewayTranslation): CertificatePem[] {
  return translation.certificates.map((item) => ({
    names: item.names,
    certificate: item.certificate,
    key: item.key,
    ...(item.clientCertificates === undefined ? {} : { clientCertificates: item.clientCertificates }),
  }));
}

function certificatesOf(translation: IngressTranslation): CertificatePem[] {
  return translation.certificates.map((item) => ({
    names: item.hosts,
    certificate: item.certificate,
    key: item.key,
    ...(item.clientCertificates === undefined ? {} : { clientCertificates: item.clientCertificates }),
  }));
}
