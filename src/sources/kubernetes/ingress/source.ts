import {
  CoreV1Api,
  type KubeConfig,
  NetworkingV1Api,
  setHeaderOptions,
  type V1Ingress,
  type V1IngressClass,
  type V1IngressLoadBalancerIngress,
  type V1Secret,
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
import { IngressTranslationCache } from './cache.ts';
import { INGRESS_CONTROLLER, isOurs, ourClasses } from './classes.ts';
import type { IngressReport } from './reports.ts';
import { type IngressTranslation, secretsOf, translateIngresses } from './translate.ts';

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
  let reported: ReadonlyMap<string, IngressReport> = new Map();
  const statusWritten = new Map<string, string>();
  // Kept from one translation to the next, so an edit costs the work of what changed
  // (docs/benchmark.md#control-plane-at-scale): each Ingress's build (cache.ts), its Secrets,
  // the Service map while no Service changed, the Secret map while no Secret changed.
  const cache = new IngressTranslationCache();
  const secretNames = new WeakMap<V1Ingress, readonly string[]>();
  let serviceLists: ReadonlyArray<readonly V1Service[]> = [];
  let serviceMap: ReadonlyMap<string, V1Service> = new Map();
  let secretMap: ReadonlyMap<string, V1Secret> = new Map();
  const oidcProviders = options.oidcProviders ?? [];
  const reachesTollgate = (host: string, port: number) =>
    (options.ownListeners?.() ?? []).some((listener) => reaches(listener, host, port));
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
    const ingressList = allIngresses();
    const wanted = new Set<string>();
    for (const item of ingressList)
      if (isOurs(item, ours)) for (const key of namedSecrets(item)) wanted.add(key);
    secretWatches.follow(wanted);
    if (!secretWatches.synced) return null;
    return translateIngresses(
      {
        className: settings.ingressClass,
        classes,
        ingresses: ingressList,
        services: currentServices(),
        secrets: currentSecrets(),
        base: options.base(),
        otherClaims: options.otherClaims?.() ?? [],
        reachesTollgate,
        oidcProviders,
      },
      cache,
    );
  }

  /** An Ingress's Secrets (secretsOf), read once per object. */
  function namedSecrets(ingress: V1Ingress): readonly string[] {
    let names = secretNames.get(ingress);
    if (names === undefined) {
      names = secretsOf(ingress);
      secretNames.set(ingress, names);
    }
    return names;
  }

  /** Services by `namespace/name`: the same map while no Service watch brought a new list. */
  function currentServices(): ReadonlyMap<string, V1Service> {
    const lists = [...services.values()];
    if (lists.length === serviceLists.length && lists.every((list, index) => list === serviceLists[index]))
      return serviceMap;
    const map = new Map<string, V1Service>();
    for (const list of lists)
      for (const service of list)
        map.set(`${service.metadata?.namespace}/${service.metadata?.name}`, service);
    serviceLists = lists;
    serviceMap = map;
    return map;
  }

  /** The Secrets followed: the same map while each holds the same object (a map is never changed once given). */
  function currentSecrets(): ReadonlyMap<string, V1Secret> {
    const now = secretWatches.current();
    const same =
      now.size === secretMap.size && [...now].every(([key, found]) => secretMap.get(key) === found);
    if (!same) secretMap = now;
    return secretMap;
  }

  /** Logs, Events and the gauge, for what changed since the last translation. */
  function report(reports: ReadonlyMap<string, IngressReport>): void {
    for (const [key, item] of reports) {
      const before = reported.get(key);
      // Told the same as last time (a report the translation kept is the same object): nothing new
      // to log, no Event, and the gauge already says it.
      if (before !== undefined && sameTold(before, item)) continue;
      ingressRejected.set({ namespace: item.namespace, name: item.name }, item.problems.length > 0 ? 1 : 0);
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
        if (before !== undefined) void event(item, 'Normal', 'Served', 'served by Tollgate');
      }
      // One Event per kind of warning, each with its reason (docs/ingress.md#when-something-is-wrong).
      for (const [reason, messages] of warningsByReason(item))
        void event(item, 'Warning', reason, messages.join('; '));
    }
    for (const key of reported.keys()) {
      if (reports.has(key)) continue;
      const [namespace, name] = key.split('/') as [string, string];
      ingressRejected.remove({ namespace, name });
    }
    // Kept as they are: a translation's reports are not changed once handed over.
    reported = reports;
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
    const byName = ingressesByName();
    for (const [key, item] of reports) {
      if (!item.served || statusWritten.get(key) === wanted) continue;
      const ingress = byName.get(key);
      if (statusOf(ingress) === wanted) continue;
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

  /** Each Ingress by `namespace/name` (the first of a name): made again only when a watch brought a new list. */
  let byNameLists: ReadonlyArray<readonly V1Ingress[]> = [];
  let byName = new Map<string, V1Ingress>();
  function ingressesByName(): ReadonlyMap<string, V1Ingress> {
    const lists = [...ingresses.values()];
    if (lists.length === byNameLists.length && lists.every((list, index) => list === byNameLists[index]))
      return byName;
    byName = new Map();
    for (const list of lists)
      for (const candidate of list) {
        const id = `${candidate.metadata?.namespace}/${candidate.metadata?.name}`;
        if (!byName.has(id)) byName.set(id, candidate);
      }
    byNameLists = lists;
    return byName;
  }

  return loop.source;
}

/** The addresses an Ingress's status announces, as JSON, read once per object (undefined: none). */
const statusTexts = new WeakMap<V1Ingress, string>();
function statusOf(ingress: V1Ingress | undefined): string {
  const read = (item: V1Ingress | undefined) =>
    JSON.stringify(
      (item?.status?.loadBalancer?.ingress ?? []).map((entry) =>
        entry.ip ? { ip: entry.ip } : { hostname: entry.hostname },
      ),
    );
  if (ingress === undefined) return read(undefined);
  let text = statusTexts.get(ingress);
  if (text === undefined) {
    text = read(ingress);
    statusTexts.set(ingress, text);
  }
  return text;
}

/** Two reports that tell the same (what report() logs and sends as Events; `served` aside). */
function sameTold(a: IngressReport, b: IngressReport): boolean {
  const sameStrings = (x: readonly string[], y: readonly string[]) =>
    x.length === y.length && x.every((item, index) => item === y[index]);
  return (
    a === b ||
    (sameStrings(a.problems, b.problems) &&
      sameStrings(a.warnings, b.warnings) &&
      a.notices.length === b.notices.length &&
      a.notices.every(
        (notice, index) =>
          notice.reason === b.notices[index]?.reason && notice.message === b.notices[index]?.message,
      ))
  );
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
