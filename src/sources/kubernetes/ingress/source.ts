import {
  CoreV1Api,
  type KubeConfig,
  NetworkingV1Api,
  setHeaderOptions,
  type V1Ingress,
  type V1IngressClass,
  type V1IngressLoadBalancerIngress,
  type V1Service,
} from '@kubernetes/client-node';
import type { KubernetesSettings, ListenAddress, UpstreamsConfig } from '../../../config/types.ts';
import type { Logger } from '../../../log.ts';
import { reaches } from '../endpoints.ts';
import { recordEvent } from '../events.ts';
import { createLimiter } from '../limit.ts';
import { ingressRejected } from '../metrics.ts';
import type { AgedClaim } from '../ownership.ts';
import { followPublishedAddresses, isIpAddress } from '../published-addresses.ts';
import type { WatchTuning } from '../resource-watch.ts';
import { SecretWatches } from '../secret-watches.ts';
import { createTranslationLoop, type TranslatingSource } from '../translation-loop.ts';
import type { IngressReport } from './reports.ts';
import {
  INGRESS_CONTROLLER,
  type IngressTranslation,
  isOurs,
  ourClasses,
  secretsOf,
  translateIngresses,
} from './translate.ts';

export interface IngressSourceOptions {
  kubeConfig: KubeConfig;
  settings: KubernetesSettings & { ingressClass: string };
  logger: Logger;
  /** upstreams.yaml as live now: its routes win over Ingress routes. */
  base: () => UpstreamsConfig;
  /** A new translation, after any change (coalesced; never before every watch listed once). */
  onTranslation: (translation: IngressTranslation) => void;
  tuning?: Partial<WatchTuning> | undefined;
  /** Hosts Gateway API routes claim (docs/gateway-api.md#host-ownership); none when not served. */
  otherClaims?: () => readonly AgedClaim[];
  /** Tollgate's own bound listeners: an Ingress's auth-url may not target them (docs/ingress.md). */
  ownListeners?: (() => readonly ListenAddress[]) | undefined;
  /** main.yaml's `oidc_providers` names: an Ingress's auth-oidc-provider must be one. */
  oidcProviders?: readonly string[] | undefined;
}

/** baseChanged: upstreams.yaml or the Gateway API routes' claims changed (host ownership). */
export type IngressSource = TranslatingSource<IngressTranslation>;

/** Ingress status writes in flight at once (kubernetes/limit.ts). */
const STATUS_WRITES_AT_ONCE = 8;

/**
 * The Ingress side of the Kubernetes source (docs/ingress.md): informers for IngressClasses,
 * Ingresses and Services (in `watch_namespaces`, else cluster-wide), and one per Secret an Ingress
 * of ours names (auth, TLS) — Secrets are read only by name, only when needed. It never compiles:
 * each change gives a new translation to the provider, which merges and compiles it like a reload.
 * It also writes back what it did: Events and `tollgate_ingress_rejected` for problems, and
 * `status.loadBalancer` of served Ingresses.
 */
export function createIngressSource(options: IngressSourceOptions): IngressSource {
  const { kubeConfig, settings, logger } = options;
  const networking = kubeConfig.makeApiClient(NetworkingV1Api);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const namespaces = settings.watchNamespaces ?? null;
  let classes: readonly V1IngressClass[] = [];
  const ingresses = new Map<string, readonly V1Ingress[]>();
  const services = new Map<string, readonly V1Service[]>();
  let reported = new Map<string, string>();
  const statusWritten = new Map<string, string>();
  const limitWrites = createLimiter(STATUS_WRITES_AT_ONCE);
  const loop = createTranslationLoop<IngressTranslation>({
    kubeConfig,
    logger,
    tuning: options.tuning,
    translate,
    translated: (next) => {
      report(next.reports);
      writeStatus(next.reports);
      options.onTranslation(next);
    },
    stop: () => secretWatches.stop(),
  });
  const { watch } = loop;
  // The Secrets the objects name, each on its own watch (kubernetes/secret-watches.ts).
  const secretWatches = new SecretWatches(watch, core);

  loop.track(
    watch<V1IngressClass>(
      'ingressclasses',
      'IngressClasses',
      '/apis/networking.k8s.io/v1/ingressclasses',
      (o) => networking.listIngressClass({}, o),
      (objects) => {
        classes = objects;
      },
    ),
  );
  for (const namespace of namespaces ?? [null]) {
    const where = namespace ?? 'every namespace';
    const key = namespace ?? '*';
    loop.track(
      watch<V1Ingress>(
        'ingresses',
        `Ingresses in ${where}`,
        namespace
          ? `/apis/networking.k8s.io/v1/namespaces/${namespace}/ingresses`
          : '/apis/networking.k8s.io/v1/ingresses',
        (o) =>
          namespace
            ? networking.listNamespacedIngress({ namespace }, o)
            : networking.listIngressForAllNamespaces({}, o),
        (objects) => ingresses.set(key, objects),
      ),
      watch<V1Service>(
        'services',
        `Services in ${where}`,
        namespace ? `/api/v1/namespaces/${namespace}/services` : '/api/v1/services',
        (o) =>
          namespace ? core.listNamespacedService({ namespace }, o) : core.listServiceForAllNamespaces({}, o),
        (objects) => services.set(key, objects),
      ),
    );
  }
  const published = followPublishedAddresses(settings, watch, core);
  if (published.watch) loop.track(published.watch);

  const allIngresses = () => [...ingresses.values()].flat();

  function translate(): IngressTranslation | null {
    // Secrets first: a translation never concludes "missing" about a Secret not listed yet.
    const ours = ourClasses({ className: settings.ingressClass, classes });
    const wanted = new Set(
      allIngresses()
        .filter((item) => isOurs(item, ours))
        .flatMap(secretsOf),
    );
    secretWatches.follow(wanted);
    if (!secretWatches.synced) return null;
    const secrets = secretWatches.current();
    const serviceMap = new Map<string, V1Service>();
    for (const service of [...services.values()].flat())
      serviceMap.set(`${service.metadata?.namespace}/${service.metadata?.name}`, service);
    return translateIngresses({
      className: settings.ingressClass,
      classes,
      ingresses: allIngresses(),
      services: serviceMap,
      secrets,
      base: options.base(),
      otherClaims: options.otherClaims?.() ?? [],
      reachesTollgate: (host, port) =>
        (options.ownListeners?.() ?? []).some((listener) => reaches(listener, host, port)),
      oidcProviders: options.oidcProviders ?? [],
    });
  }

  /** Logs, Events and the gauge, for what changed since the last translation. */
  function report(reports: ReadonlyMap<string, IngressReport>): void {
    const now = new Map<string, string>();
    for (const [key, item] of reports) {
      const text = JSON.stringify([item.problems, item.warnings, item.notices]);
      now.set(key, text);
      ingressRejected.set({ namespace: item.namespace, name: item.name }, item.problems.length > 0 ? 1 : 0);
      if (reported.get(key) === text) continue;
      const warnings = [...item.warnings, ...item.notices.map((notice) => notice.message)];
      if (item.problems.length > 0) {
        logger.warn(
          { ingress: key, problems: item.problems, warnings, served: item.served },
          item.served ? 'ingress partly served' : 'ingress rejected: left out of the routing table',
        );
        void event(item, 'Warning', item.served ? 'PartlyServed' : 'Rejected', item.problems.join('; '));
      } else if (warnings.length > 0) {
        logger.warn({ ingress: key, warnings }, 'ingress served with warnings');
      } else {
        logger.info({ ingress: key }, 'ingress served');
        if (reported.has(key)) void event(item, 'Normal', 'Served', 'served by Tollgate');
      }
      // One Event per kind of warning, each with its reason (docs/ingress.md#when-something-is-wrong).
      for (const [reason, messages] of warningsByReason(item))
        void event(item, 'Warning', reason, messages.join('; '));
    }
    for (const key of reported.keys()) {
      if (now.has(key)) continue;
      const [namespace, name] = key.split('/') as [string, string];
      ingressRejected.remove({ namespace, name });
    }
    reported = now;
  }

  async function event(item: IngressReport, type: 'Normal' | 'Warning', reason: string, message: string) {
    const ingress = allIngresses().find(
      (candidate) =>
        candidate.metadata?.namespace === item.namespace && candidate.metadata?.name === item.name,
    );
    await recordEvent(
      core,
      logger,
      INGRESS_CONTROLLER,
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'Ingress',
        namespace: item.namespace,
        name: item.name,
        stored: ingress,
      },
      type,
      reason,
      message,
    );
  }

  /** The addresses Ingress status announces (kubernetes/published-addresses.ts). */
  function publishedAddresses(): V1IngressLoadBalancerIngress[] | null {
    return (
      published
        .current()
        ?.map((address) => (isIpAddress(address) ? { ip: address } : { hostname: address })) ?? null
    );
  }

  function writeStatus(reports: ReadonlyMap<string, IngressReport>): void {
    const addresses = publishedAddresses();
    if (addresses === null) return;
    const wanted = JSON.stringify(addresses);
    // Looked up by name, not searched: every served Ingress is checked on every translation.
    const byName = new Map<string, V1Ingress>();
    for (const candidate of allIngresses()) {
      const id = `${candidate.metadata?.namespace}/${candidate.metadata?.name}`;
      if (!byName.has(id)) byName.set(id, candidate);
    }
    for (const [key, item] of reports) {
      if (!item.served) continue;
      const ingress = byName.get(`${item.namespace}/${item.name}`);
      const current = JSON.stringify(
        (ingress?.status?.loadBalancer?.ingress ?? []).map((entry) =>
          entry.ip ? { ip: entry.ip } : { hostname: entry.hostname },
        ),
      );
      if (current === wanted || statusWritten.get(key) === wanted) continue;
      statusWritten.set(key, wanted);
      limitWrites(() =>
        networking.patchNamespacedIngressStatus(
          {
            name: item.name,
            namespace: item.namespace,
            body: { status: { loadBalancer: { ingress: addresses } } },
          },
          setHeaderOptions('Content-Type', 'application/merge-patch+json'),
        ),
      ).then(
        () => logger.info({ ingress: key, addresses }, 'ingress status written'),
        (error: Error) => {
          statusWritten.delete(key);
          logger.warn(
            { ingress: key, error: error.message?.split('\n', 1)[0] },
            'could not write the Ingress status',
          );
        },
      );
    }
  }

  return loop.source;
}

/** An Ingress's warnings by Event reason: ignored annotations are `Ignored`, notices carry their own. */
function warningsByReason(item: IngressReport): Map<string, string[]> {
  const byReason = new Map<string, string[]>();
  if (item.warnings.length > 0) byReason.set('Ignored', [...item.warnings]);
  for (const notice of item.notices) {
    const messages = byReason.get(notice.reason) ?? [];
    byReason.set(notice.reason, messages);
    messages.push(notice.message);
  }
  return byReason;
}
