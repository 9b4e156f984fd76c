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
import { followPublishedAddresses, isIpAddress } from '../published-addresses.ts';
import { type ResourceWatch, type WatchTuning, watchStarter } from '../resource-watch.ts';
import { SecretWatches } from '../secret-watches.ts';
import { createWatchHealth, prometheusWatchMetrics, type WatchHealth } from '../watch-health.ts';
import type { AgedClaim } from './ownership.ts';
import {
  INGRESS_CONTROLLER,
  type IngressReport,
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
  tuning?: Partial<WatchTuning>;
  /** Hosts Gateway API routes claim (docs/gateway-api.md#host-ownership); none when not served. */
  otherClaims?: () => readonly AgedClaim[];
  /** Tollgate's own bound listeners: an Ingress's auth-url may not target them (docs/ingress.md). */
  ownListeners?: () => readonly ListenAddress[];
  /** main.yaml's `oidc_providers` names: an Ingress's auth-oidc-provider must be one. */
  oidcProviders?: readonly string[];
}

export interface IngressSource {
  /** The last translation, or null before the first sync. */
  translation(): IngressTranslation | null;
  /** upstreams.yaml changed: translate again (its routes take precedence). */
  baseChanged(): void;
  synced(): boolean;
  whenSynced(): Promise<void>;
  close(): Promise<void>;
}

/** Ingress status writes in flight at once (kubernetes/limit.ts). */
const STATUS_WRITES_AT_ONCE = 8;

const EMPTY: IngressTranslation = { hosts: [], certificates: [], reports: new Map() };

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
  const health: WatchHealth = createWatchHealth(prometheusWatchMetrics);
  const namespaces = settings.watchNamespaces ?? null;
  let classes: readonly V1IngressClass[] = [];
  const ingresses = new Map<string, readonly V1Ingress[]>();
  const services = new Map<string, readonly V1Service[]>();
  let last: IngressTranslation | null = null;
  let reported = new Map<string, string>();
  const statusWritten = new Map<string, string>();
  const limitWrites = createLimiter(STATUS_WRITES_AT_ONCE);
  let closed = false;
  let scheduled = false;
  const waiters: Array<() => void> = [];
  const watches: ResourceWatch[] = [];

  const watch = watchStarter({
    kubeConfig,
    health,
    logger,
    tuning: options.tuning,
    onChange: () => schedule(),
  });
  // The Secrets the objects name, each on its own watch (kubernetes/secret-watches.ts).
  const secretWatches = new SecretWatches(watch, core);

  watches.push(
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
    watches.push(
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
  if (published.watch) watches.push(published.watch);

  const allIngresses = () => [...ingresses.values()].flat();

  function schedule(): void {
    if (scheduled || closed) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      if (!closed) translate();
    });
  }

  function translate(): void {
    if (!watches.every((item) => item.synced)) return;
    // Secrets first: a translation never concludes "missing" about a Secret not listed yet.
    const ours = ourClasses({ className: settings.ingressClass, classes });
    const wanted = new Set(
      allIngresses()
        .filter((item) => isOurs(item, ours))
        .flatMap(secretsOf),
    );
    secretWatches.follow(wanted);
    if (!secretWatches.synced) return;
    const secrets = secretWatches.current();
    const serviceMap = new Map<string, V1Service>();
    for (const service of [...services.values()].flat())
      serviceMap.set(`${service.metadata?.namespace}/${service.metadata?.name}`, service);
    const next = translateIngresses({
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
    last = next;
    report(next.reports);
    writeStatus(next.reports);
    options.onTranslation(next);
    for (const resolve of waiters.splice(0)) resolve();
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

  return {
    translation: () => last,
    baseChanged: () => schedule(),
    synced: () => last !== null,
    whenSynced: () =>
      new Promise<void>((resolve) => {
        if (last !== null) resolve();
        else waiters.push(resolve);
      }),
    async close() {
      closed = true;
      await Promise.all([...watches.map((item) => item.stop()), secretWatches.stop()]);
    },
  };
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

export { EMPTY as NO_INGRESS_ROUTES };
