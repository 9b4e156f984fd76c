import { sha256Hex } from '../../config/load.ts';
import { resolveServiceRef, type ServiceRef, serviceRefKey } from '../../config/service-ref.ts';
import type { HostConfig, MainConfig, PathConfig, UpstreamsConfig } from '../../config/types.ts';
import { checkOidcReferences } from '../../config/validate-oidc.ts';
import { compiledSize, MAX_COMPILED_SIZE } from '../../config/validate-upstreams.ts';
import type { Logger } from '../../log.ts';
import {
  compileRoutingTable,
  type EndpointLookup,
  recompileServers,
  serverCount,
} from '../../routing/compile.ts';
import type { RoutingTable } from '../../routing/types.ts';
import type { Runtime } from '../../runtime.ts';
import type { UpstreamsApplier } from '../apply-upstreams.ts';
import type { GatewayTranslation } from './gateway/translate.ts';
import type { CertificatePem } from './ingress/certificates.ts';
import type { IngressTranslation } from './ingress/translate.ts';
import {
  type AgedClaim,
  byCreation,
  type HostOwner,
  hostOwners,
  ownedHosts,
  sameClaims,
  sameNamesAt,
  withClaimedHosts,
} from './ownership.ts';
import type { RebuildCause, RebuildOutcome } from './rebuilds.ts';
import { sameItems } from './same-items.ts';
import { type ConfigMapContent, UPSTREAMS_KEY } from './source.ts';

/**
 * The one place the Kubernetes side's routes meet upstreams.yaml (docs/kubernetes.md): upstreams.yaml
 * (the file or its ConfigMap) first, then the Ingresses, then the Gateway API routes. Host ownership
 * by what each object names (docs/gateway-api.md#host-ownership): upstreams.yaml's hosts are its own,
 * any other host belongs to the namespace of the oldest object naming it; a claimed host its owner
 * serves nothing on is held closed (503). The merged config is validated as upstreams.yaml is (the
 * compiled-size cap, the OpenID provider references) before it is compiled; and this module alone
 * hands tables to the runtime and ConfigMap contents to the apply path.
 */

/** The sources merged after upstreams.yaml, in this order (also the `sources` of the rebuild log). */
export type SourceName = 'ingresses' | 'gateway api routes';

/** What the merge reads of one source's translation. */
export interface SourceRoutes {
  hosts: readonly HostConfig[];
  /** The hosts its objects name, with their age (none: it claims only the hosts it serves). */
  claims?: readonly AgedClaim[];
  certificates: readonly CertificatePem[];
}

/** An Ingress translation as the merge reads it. */
export function ingressRoutes(translation: IngressTranslation): SourceRoutes {
  return {
    hosts: translation.hosts,
    claims: translation.claims ?? [],
    certificates: translation.certificates.map((item) => ({
      names: item.hosts,
      certificate: item.certificate,
      key: item.key,
      ...(item.clientCertificates === undefined ? {} : { clientCertificates: item.clientCertificates }),
    })),
  };
}

/** A Gateway API translation as the merge reads it. */
export function gatewayRoutes(translation: GatewayTranslation): SourceRoutes {
  return {
    hosts: translation.hosts,
    claims: translation.claims ?? [],
    certificates: translation.certificates.map((item) => ({
      names: item.names,
      certificate: item.certificate,
      key: item.key,
      ...(item.clientCertificates === undefined ? {} : { clientCertificates: item.clientCertificates }),
    })),
  };
}

/**
 * upstreams.yaml's config with each source's hosts added, in the order given. Each source keeps only
 * the hosts its namespace owns by every source's claims now (one translation may predate another's
 * latest claims); each adds only hosts not served yet; last, a host claimed but served by nobody
 * (its owner broken for now) is held closed. Pure: never changes its inputs.
 *
 * Called on every change with nearly the same inputs, it costs what changed plus one walk over the
 * hosts (docs/benchmark.md, "Control plane at scale"): the owners are kept while upstreams.yaml's
 * hosts and every source's claims are the same arrays, each host's ownership verdict while it is the
 * same object with the same owner (ownedHosts), each closed host while its claim is the same object
 * (withClaimedHosts), and the merged config itself while its hosts are the same objects in order.
 */
export function mergeSources(base: UpstreamsConfig, sources: readonly SourceRoutes[]): UpstreamsConfig {
  const { claims, owners } = ownersOf(base, sources);
  let merged = base;
  for (const source of sources) merged = withSourceHosts(merged, ownedHosts(source.hosts, owners));
  const result = withClaimedHosts(merged, claims);
  // The same hosts as the last merge of this base: the same config object, so that what is kept per
  // config (the compile's table, the endpoint-only recompile) stays valid.
  const last = lastMerge.get(base);
  if (last !== undefined && sameItems(last.hosts, result.hosts)) return last;
  lastMerge.set(base, result);
  return result;
}

/** The last merge of each upstreams.yaml config. */
const lastMerge = new WeakMap<UpstreamsConfig, UpstreamsConfig>();

/**
 * Every source's claims oldest first and the owners they give, kept per upstreams.yaml hosts array
 * while every source's claims are the same arrays (neither is changed once made).
 */
const ownersKept = new WeakMap<
  readonly HostConfig[],
  {
    claimLists: readonly (readonly AgedClaim[] | undefined)[];
    claims: AgedClaim[];
    owners: ReadonlyMap<string, HostOwner>;
  }
>();

function ownersOf(
  base: UpstreamsConfig,
  sources: readonly SourceRoutes[],
): { claims: AgedClaim[]; owners: ReadonlyMap<string, HostOwner> } {
  const claimLists = sources.map((source) => source.claims);
  const known = ownersKept.get(base.hosts);
  if (known !== undefined && sameItems(known.claimLists, claimLists)) return known;
  const claims = byCreation(sources.flatMap((source) => source.claims ?? []));
  const owners = hostOwners(
    base.hosts.map((host) => host.name),
    claims,
  );
  const kept = { claimLists, claims, owners };
  ownersKept.set(base.hosts, kept);
  return kept;
}

/**
 * The config with the hosts added that it does not serve yet. A host upstreams.yaml names is its own
 * (docs/ingress.md#host-ownership): the translations never give one to an Ingress or a route, and one
 * made against the previous upstreams.yaml loses the hosts the new one took.
 */
export function withSourceHosts(base: UpstreamsConfig, hosts: readonly HostConfig[]): UpstreamsConfig {
  if (hosts.length === 0) return base;
  const added = addedHosts(base.hosts, hosts);
  return added.length === 0 ? base : { ...base, hosts: [...base.hosts, ...added] };
}

/**
 * The hosts whose names `served` does not name, in order. From a like call before (the same lengths,
 * and every host that is not the same object at its position has the same name as then: the same
 * names served, the same positions kept) the last list with those positions' new objects put in:
 * an edit then costs identity walks, not a set of every host name (docs/benchmark.md, "Control
 * plane at scale").
 */
function addedHosts(served: readonly HostConfig[], hosts: readonly HostConfig[]): readonly HostConfig[] {
  const key = `${served.length} ${hosts.length} ${hosts[0]?.name} ${hosts[hosts.length - 1]?.name}`;
  const last = lastAdded.get(key);
  if (last !== undefined && sameNamesAt(last.served, served) && sameNamesAt(last.hosts, hosts)) {
    let added: HostConfig[] | null = null;
    for (let position = 0; position < hosts.length; position++) {
      const host = hosts[position] as HostConfig;
      const at = last.at[position] as number;
      if (host === last.hosts[position] || at < 0) continue;
      added ??= [...last.added];
      added[at] = host;
    }
    const result = added ?? last.added;
    lastAdded.set(key, { served, hosts, added: result, at: last.at });
    return result;
  }
  const names = new Set(served.map((host) => host.name));
  const at = new Int32Array(hosts.length);
  const added: HostConfig[] = [];
  hosts.forEach((host, position) => {
    at[position] = names.has(host.name) ? -1 : added.length;
    if (at[position] >= 0) added.push(host);
  });
  // A few like calls are what the sources make; more are dropped, not kept.
  if (lastAdded.size >= 8 && !lastAdded.has(key)) lastAdded.clear();
  lastAdded.set(key, { served, hosts, added, at });
  return added;
}

/** addedHosts' last calls, by the lengths and the first and last host names. */
const lastAdded = new Map<
  string,
  {
    served: readonly HostConfig[];
    hosts: readonly HostConfig[];
    added: readonly HostConfig[];
    /** For each position of `hosts`, its index in `added`, or -1. */
    at: Int32Array;
  }
>();

/**
 * The merged config with every path of a source whose OpenID provider reference does not hold
 * (an unknown `oidc_providers` name; a route on the default host, which has no host of its own to
 * come back to, without the provider's `redirect_url`) closed with the reason: the checks
 * upstreams.yaml gets at load (config/validate-oidc.ts), applied to the paths the Kubernetes objects
 * add. Such a path answered 503 at request time already; now it says why. upstreams.yaml's own paths
 * were checked when it loaded; a path closed already keeps its reason.
 */
export function withReferencesChecked(config: UpstreamsConfig, main: MainConfig): UpstreamsConfig {
  // The last call with the same main.yaml and file: a host at the same position that is the same
  // object has the same result (what checkHost reads is the host, main and file), so a change costs
  // one identity walk and the changed hosts' checks, and the count of closed hosts is carried.
  const last = lastReferencesCheck;
  if (
    last !== null &&
    last.main === main &&
    last.file === config.file &&
    last.hosts.length === config.hosts.length
  ) {
    let altered = last.altered;
    const changed: [position: number, result: HostConfig][] = [];
    config.hosts.forEach((host, position) => {
      const before = last.hosts[position] as HostConfig;
      if (before === host) return;
      const was = last.results?.[position] ?? before;
      const now = checkHost(host, config, main);
      if (was !== before) altered--;
      if (now !== host) altered++;
      changed.push([position, now]);
    });
    let next: HostConfig[] | null = null;
    if (altered > 0) {
      // Every other position holds the same host as last time, and so the same result.
      next = changed.length === 0 && last.results !== null ? last.results : [...(last.results ?? last.hosts)];
      for (const [position, result] of changed) next[position] = result;
    }
    lastReferencesCheck = { main, file: config.file, hosts: config.hosts, results: next, altered };
    return next === null ? config : { ...config, hosts: next };
  }
  let changed = false;
  let altered = 0;
  const hosts = config.hosts.map((host) => {
    const result = checkHost(host, config, main);
    if (result !== host) {
      changed = true;
      altered++;
    }
    return result;
  });
  lastReferencesCheck = {
    main,
    file: config.file,
    hosts: config.hosts,
    results: changed ? hosts : null,
    altered,
  };
  return changed ? { ...config, hosts } : config;
}

/**
 * The last withReferencesChecked call: its input hosts, the results position for position when any
 * host was closed (null: every result is its input host), and how many were.
 */
let lastReferencesCheck: {
  main: MainConfig;
  file: UpstreamsConfig['file'];
  hosts: readonly HostConfig[];
  results: HostConfig[] | null;
  altered: number;
} | null = null;

/** One host's withReferencesChecked result, kept per host object. */
function checkHost(host: HostConfig, config: UpstreamsConfig, main: MainConfig): HostConfig {
  // What the check reads besides the host: main.yaml's providers and the file named in messages.
  const known = referencesChecked.get(host);
  if (known !== undefined && known.main === main && known.file === config.file) return known.result;
  let hostChanged = false;
  const paths = host.paths.map((path) => {
    if (!path.origin || path.unavailable || path.authorization?.oidc === undefined) return path;
    // The path's own reference alone: upstreams.yaml's global policy was checked at load.
    const alone = { ...config, authorization: null, hosts: [{ name: host.name, paths: [path] }] };
    const issues = checkOidcReferences(main, alone);
    if (issues.length === 0) return path;
    hostChanged = true;
    return { ...path, unavailable: issues.map((issue) => issue.message).join('; ') };
  });
  const result = hostChanged ? { ...host, paths } : host;
  referencesChecked.set(host, { main, file: config.file, result });
  return result;
}

/** Each host's withReferencesChecked result, with what else it read (hosts are never changed once made). */
const referencesChecked = new WeakMap<
  HostConfig,
  { main: MainConfig; file: UpstreamsConfig['file']; result: HostConfig }
>();

/**
 * Why the merged config may not be compiled, or null: the compiled-size cap upstreams.yaml is held
 * to (docs/security.md, "Config files") holds for the config with every source's routes as well, so
 * that no number of Ingresses or routes can make a compile unbounded.
 */
export function mergedConfigProblem(config: UpstreamsConfig): string | null {
  const size = mergedSize(config);
  if (size <= MAX_COMPILED_SIZE) return null;
  return (
    `the routing table with the Kubernetes routes would hold ${size} route servers ` +
    `(hosts × paths × servers), more than ${MAX_COMPILED_SIZE}`
  );
}

/**
 * compiledSize of the config, as a running total: from the last call's when the hosts are as many,
 * moved by the hosts that are not the same objects at the same positions (a change counts the hosts
 * it made, after one identity walk).
 */
export function mergedSize(config: UpstreamsConfig): number {
  const last = lastSize;
  let size = 0;
  if (last !== null && last.hosts.length === config.hosts.length) {
    size = last.size;
    config.hosts.forEach((host, position) => {
      const before = last.hosts[position] as HostConfig;
      if (before !== host) size += hostSize(host, config) - hostSize(before, config);
    });
  } else for (const host of config.hosts) size += hostSize(host, config);
  lastSize = { hosts: config.hosts, size };
  return size;
}

let lastSize: { hosts: readonly HostConfig[]; size: number } | null = null;

/** A host's share of compiledSize, kept per host object: a change to one host counts that host again. */
function hostSize(host: HostConfig, config: UpstreamsConfig): number {
  let size = hostSizes.get(host);
  if (size === undefined) {
    size = compiledSize({ ...config, hosts: [host] });
    hostSizes.set(host, size);
  }
  return size;
}

/** Each host's share of compiledSize. */
const hostSizes = new WeakMap<HostConfig, number>();

export interface KubernetesMergeOptions {
  main: MainConfig;
  runtime: Runtime;
  logger: Logger;
  /** The namespace a `service:` reference without one means. */
  namespace: string;
  /** upstreams.yaml as live at start. */
  initial: UpstreamsConfig;
  /** The sources served (each merged once it translated): nothing is merged before each did. */
  sources: readonly SourceName[];
  endpointsOf: EndpointLookup;
}

export interface KubernetesMerge {
  /** upstreams.yaml as live now. */
  base(): UpstreamsConfig;
  /** A config went live (start, file reload, ConfigMap). */
  baseApplied(config: UpstreamsConfig): void;
  /**
   * A source's new translation. `claims`: the hosts it names changed (the other source must
   * translate again: host ownership); `served`: what it serves changed (a rebuild is due).
   */
  translated(source: SourceName, routes: SourceRoutes): { claims: boolean; served: boolean };
  /** The claims a source's objects make now (what the other source's translation respects). */
  claimsOf(source: SourceName): readonly AgedClaim[];
  /** The config with every source's routes merged in: what is compiled (and what workers are sent). */
  effective(config: UpstreamsConfig): UpstreamsConfig;
  /** The apply path's compile: the merged config's table; throws, saying why, when it is refused. */
  compile(config: UpstreamsConfig): RoutingTable;
  /** Compiles the live config with the sources' and endpoints' changes and swaps it in (null: refused, kept). */
  rebuild(cause: RebuildCause): RebuildOutcome | null;
  /** The certificates every source serves now. */
  certificates(): CertificatePem[];
  /** Hands ConfigMap contents to the apply path (parse → validate → compile → swap). */
  attach(applier: UpstreamsApplier): void;
  /** The upstreams ConfigMap's content (kept until attach when the apply path does not exist yet). */
  configMapChanged(content: ConfigMapContent): void;
}

/**
 * The stateful side of the merge: the translation each source serves now, the last merge that
 * passed validation, and the swaps. A merge that is refused is logged once (one error line) and
 * the previous routes keep serving: those of the last translations that passed, or upstreams.yaml
 * alone when none did yet.
 */
export function createKubernetesMerge(options: KubernetesMergeOptions): KubernetesMerge {
  const { main, runtime, logger, endpointsOf } = options;
  let live = options.initial;
  let applier: UpstreamsApplier | null = null;
  // ConfigMap content that arrived before the apply path existed (listen() attaches it).
  const pendingConfigMap: ConfigMapContent[] = [];

  // The translation each source serves now: replaced only when what it serves (hosts, certificates,
  // claims) changed, so that the merged config stays the same object between changes (and an
  // endpoint change can keep it and recompile only its servers).
  const served = new Map<
    SourceName,
    {
      routes: SourceRoutes;
      hosts: ReadonlyMap<string, ServedHost>;
      certificates: string;
    }
  >();
  // Every source's routes in order, once each translated (null before): a new array on each change.
  let latest: readonly SourceRoutes[] | null = null;
  // The last routes whose merge passed validation: what keeps serving while a newer merge is refused.
  let good: readonly SourceRoutes[] | null = null;
  // Endpoint changes merge the same inputs again and again: the outcome is kept per routes array
  // (translations and configs are never changed once made).
  const attempts = new WeakMap<
    readonly SourceRoutes[],
    { config: UpstreamsConfig; result: UpstreamsConfig; problem: string | null }
  >();
  let refusal: string | null = null;

  const attempt = (config: UpstreamsConfig, routes: readonly SourceRoutes[]) => {
    const known = attempts.get(routes);
    if (known?.config === config) return known;
    const result = withReferencesChecked(mergeSources(config, routes), main);
    const outcome = { config, result, problem: mergedConfigProblem(result) };
    attempts.set(routes, outcome);
    return outcome;
  };
  const refused = (problem: string | null) => {
    if (problem === refusal) return;
    refusal = problem;
    if (problem === null) logger.info({}, 'kubernetes routes accepted again');
    else
      logger.error(
        { limit: MAX_COMPILED_SIZE },
        `kubernetes routes refused: ${problem}; the previous routing table keeps serving`,
      );
  };
  /**
   * The config to compile for `config`: merged with the latest routes when that passes, else with
   * the last routes that passed (upstreams.yaml alone when none did yet); `config: null` when neither
   * passes, which only a new upstreams.yaml can cause (the reload is refused, `problem` says why).
   */
  const resolve = (config: UpstreamsConfig): { config: UpstreamsConfig | null; problem: string | null } => {
    if (latest === null) return { config, problem: null };
    const tried = attempt(config, latest);
    // Said only about the config serving: a new upstreams.yaml that does not fit is refused by the
    // apply path, which says so itself.
    const serving = config === live;
    if (tried.problem === null) {
      good = latest;
      if (serving) refused(null);
      return { config: tried.result, problem: null };
    }
    if (serving) refused(tried.problem);
    if (good === null) return { config, problem: tried.problem };
    const fallback = attempt(config, good);
    return { config: fallback.problem === null ? fallback.result : null, problem: fallback.problem };
  };

  const refKeys = new WeakMap<ServiceRef, string>();
  // The key of each `service:` reference of the merged config, kept per reference object: an
  // endpoint change asks it of every path, and the config stays the same objects between changes.
  const keyOf = (ref: ServiceRef) => {
    let key = refKeys.get(ref);
    if (key === undefined) {
      key = serviceRefKey(resolveServiceRef(ref, options.namespace));
      refKeys.set(ref, key);
    }
    return key;
  };

  const applyConfigMap = (content: ConfigMapContent) => {
    if (applier === null) {
      pendingConfigMap.splice(0, pendingConfigMap.length, content);
      return;
    }
    const name = `${options.namespace}/${main.kubernetes?.upstreamsConfigMap}`;
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

  return {
    base: () => live,
    baseApplied(config) {
      live = config;
    },
    translated(source, routes) {
      const before = served.get(source);
      // The hosts one source names are claims the other must respect, and the reverse
      // (docs/gateway-api.md#host-ownership). Claims depend on each source's own objects only, so
      // telling the other source when they change settles after one round.
      const claimsChanged =
        before === undefined || !sameClaims(before.routes.claims ?? [], routes.claims ?? []);
      // Most changes (any Service in a watched namespace, an unrelated annotation) leave the routes
      // and certificates as they were: no new table, no broadcast to workers, no log line. Claims
      // too: a host claimed but not served is held closed (withClaimedHosts). A path equal to one
      // served already keeps the object served, so the compile keeps its route (routing/compile.ts).
      const interned = internHosts(routes.hosts, before?.hosts);
      const certificates = JSON.stringify(routes.certificates);
      const change = {
        claims: claimsChanged,
        served:
          before === undefined ||
          !sameItems(interned.hosts, before.routes.hosts) ||
          certificates !== before.certificates ||
          claimsChanged,
      };
      if (!change.served) {
        // The translation's host objects, so that the next one that keeps them is checked by identity.
        if (before !== undefined) before.hosts = interned.served;
        return change;
      }
      served.set(source, {
        // Equal claims keep the array served: the owners computed from it are kept (mergeSources).
        routes: {
          ...routes,
          hosts: interned.hosts,
          claims: claimsChanged ? (routes.claims ?? []) : (before.routes.claims ?? []),
        },
        hosts: interned.served,
        certificates,
      });
      // Until every source listed its objects, the others' claims are unknown: serve none yet.
      const all = options.sources.map((name) => served.get(name)?.routes);
      latest = all.every((item) => item !== undefined) ? (all as SourceRoutes[]) : null;
      return change;
    },
    claimsOf: (source) => served.get(source)?.routes.claims ?? [],
    effective: (config) => resolve(config).config ?? config,
    compile(config) {
      const merged = resolve(config);
      if (merged.config === null) throw new Error(merged.problem ?? 'the merged routing table is refused');
      return compileRoutingTable(merged.config, endpointsOf);
    },
    rebuild(cause) {
      const config = resolve(live).config ?? live;
      // Only endpoints changed (or a source's change was refused): the routes of those Services get
      // their servers, the rest stays.
      const routesKept = cause.sources.size === 0 || refusal !== null;
      const partial = routesKept
        ? recompileServers(runtime.table(), config, endpointsOf, { keys: cause.services, keyOf })
        : null;
      // A refused change and no endpoint change: the table serving is the one to keep.
      if (partial !== null && cause.services.size === 0) return null;
      // A source's change: the routes of paths that did not change are kept (routing/compile.ts).
      const table = partial ?? compileRoutingTable(config, endpointsOf, runtime.table());
      runtime.swapTable(table);
      return { routes: table.routes.length, servers: serverCount(table), partial: partial !== null };
    },
    certificates: () => options.sources.flatMap((name) => served.get(name)?.routes.certificates ?? []),
    attach(next) {
      applier = next;
      for (const content of pendingConfigMap.splice(0)) applyConfigMap(content);
    },
    configMapChanged: applyConfigMap,
  };
}

/** What one source serves on one host: the host object served and the translation's it came from. */
export interface ServedHost {
  /** The translation's host object this was interned from. */
  readonly from: HostConfig;
  /** The host served (its paths interned). */
  readonly host: HostConfig;
  /** The paths served, by content key (made when a new path object needs it). */
  byKey?: Map<string, PathConfig>;
  /** The paths served, as a set (made when first asked). */
  paths?: Set<PathConfig>;
}

/**
 * A translation's hosts with every path equal in content to one the source served last (on the same
 * host) replaced by that object, and a host whose paths are all the ones it served, in order, by
 * that host object: what did not change must stay the same object for the compile to keep its route
 * and the health checker to skip it. Equal means the same contentKey, which tells apart everything
 * a compile reads.
 *
 * A translation that keeps its objects (docs/benchmark.md, "Control plane at scale": an unchanged
 * Ingress or route gives the very same PathConfig, never changed once returned) costs identity
 * checks only: the translation's host object served last is kept as it was, and a path object the
 * host serves already is kept without its content key; only new path objects are keyed (once each,
 * contentKeyOf).
 */
export function internHosts(
  hosts: readonly HostConfig[],
  before: ReadonlyMap<string, ServedHost> | undefined,
): { hosts: HostConfig[]; served: Map<string, ServedHost> } {
  const served = new Map<string, ServedHost>();
  const interned = hosts.map((host) => {
    const previous = before?.get(host.name);
    if (previous !== undefined && previous.from === host) {
      served.set(host.name, previous);
      return previous.host;
    }
    // Paths of this translation keyed on this host: the first object of each content wins, as the
    // served one does.
    let fresh: Map<string, PathConfig> | null = null;
    const kept = host.paths.map((path) => {
      if (previous !== undefined && servedPaths(previous).has(path)) return path;
      // Kept per object only once served: a new object equal to a served one is dropped at once.
      const key = contentKeys.get(path) ?? contentKey(path);
      const known = fresh?.get(key) ?? (previous === undefined ? undefined : servedByKey(previous).get(key));
      if (known !== undefined) return known;
      contentKeys.set(path, key);
      fresh ??= new Map();
      fresh.set(key, path);
      return path;
    });
    const result =
      previous !== undefined && sameItems(previous.host.paths, kept)
        ? previous.host
        : sameItems(host.paths, kept)
          ? host
          : { ...host, paths: kept };
    served.set(
      host.name,
      result === previous?.host ? { ...previous, from: host } : { from: host, host: result },
    );
    return result;
  });
  return { hosts: interned, served };
}

function servedPaths(entry: ServedHost): Set<PathConfig> {
  entry.paths ??= new Set(entry.host.paths);
  return entry.paths;
}

function servedByKey(entry: ServedHost): Map<string, PathConfig> {
  if (entry.byKey === undefined) {
    entry.byKey = new Map();
    for (const path of entry.host.paths)
      if (!entry.byKey.has(contentKeyOf(path))) entry.byKey.set(contentKeyOf(path), path);
  }
  return entry.byKey;
}

/** contentKey, kept per path object: paths are never changed once made. */
function contentKeyOf(path: PathConfig): string {
  let key = contentKeys.get(path);
  if (key === undefined) {
    key = contentKey(path);
    contentKeys.set(path, key);
  }
  return key;
}

const contentKeys = new WeakMap<PathConfig, string>();

/**
 * A path's content as text: JSON, with what JSON would blur spelled out (a property set to
 * undefined, a number that is not finite); an object that is not plain data (a class instance, a
 * Map, a RegExp) makes the text unique, so such a path is never taken for another.
 */
export function contentKey(path: PathConfig): string {
  return JSON.stringify(path, (_key, value: unknown) => {
    if (value === undefined) return '\u0000undefined';
    if (typeof value === 'number') return Number.isFinite(value) ? value : `\u0000${value}`;
    if (typeof value === 'bigint' || typeof value === 'function' || typeof value === 'symbol')
      return `\u0000${uniqueMark()}`;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      const prototype = Object.getPrototypeOf(value);
      if (prototype !== Object.prototype && prototype !== null) return `\u0000${uniqueMark()}`;
    }
    return value;
  });
}

let marks = 0;
const uniqueMark = () => `unique ${++marks}`;
