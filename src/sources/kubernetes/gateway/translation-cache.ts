import { isDeepStrictEqual } from 'node:util';
import type { V1ConfigMap, V1Secret, V1Service } from '@kubernetes/client-node';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import { olderFirst } from '../older-first.ts';
import { type AgedClaim, type HostOwner, sameClaims } from '../ownership.ts';
import { sameItems } from '../same-items.ts';
import type { Reference } from './grants.ts';
import { type ResolvedGateway, type RouteKind, resolveGateway } from './listeners.ts';
import type { Gateway, HttpRoute, ReferenceGrant } from './objects.ts';
import { type PolicyMemo, withPolicy } from './policy.ts';
import { type BuiltPolicy, buildPolicy, type PolicyContext, type TollgatePolicy } from './policy-keys.ts';
import { type Lookup, recording, sameReads } from './reads.ts';
import type { PathEntry, RouteOutcome } from './routes.ts';
import type { RouteContext } from './rule-types.ts';

/**
 * What one Gateway source keeps from translation to translation, so that an edit costs work in
 * proportion to what changed, not to the number of routes (docs/benchmark.md#control-plane-at-scale):
 * each route's translation, each Gateway resolved, each policy built, each path a policy patched,
 * each host of the table, with every input each one read (the objects found, by identity, or their
 * absence; ReferenceGrant answers). One is reused only while every recorded read gives the same
 * answer, so a cached result is exactly what a translation from scratch would give (the Kubernetes
 * watches keep the same object for an unchanged one). An unchanged route thus yields the very same
 * PathConfig objects, which the merge and the compiler recognise without reading them.
 *
 * Entries of objects gone are dropped: each translation keeps only what it used (begin / commit). A
 * translation that throws commits nothing and the next one starts from the last committed state;
 * route entries and hosts are kept in place instead (an unchanged one costs no copy), so it may also
 * find those the failed one made: each is still checked against what it read before it is reused.
 */
export class GatewayTranslationCache {
  /**
   * Each route's entry, kept in place from translation to translation: an unchanged route costs a
   * look-up, and only entries no translation used since are dropped (commit).
   */
  readonly #routes = new Map<HttpRoute, RouteEntry>();
  /** The same entries by `kind namespace/name`: an edited route's last translation. */
  readonly #named = new Map<string, RouteEntry>();
  /** Counts translations; `#used`: the route entries this one used. */
  #pass = 0;
  #used = 0;
  #gateways = new Map<Gateway, GatewayEntry>();
  #nextGateways = new Map<Gateway, GatewayEntry>();
  #policies = new Map<TollgatePolicy, PolicyEntry>();
  #nextPolicies = new Map<TollgatePolicy, PolicyEntry>();
  /** The Gateways as routes read them (conflicts marked), by `namespace/name`: kept while equal. */
  #views: { resolved: readonly ResolvedGateway[]; views: ResolvedGateway[] } | null = null;
  /** The table's hosts by name (hosts), kept in place from translation to translation. */
  readonly #hosts = new Map<string, HostState>();
  #hostsPass = 0;
  #owners: OwnersEntry | null = null;
  /** Each route's creation time and `namespace/name`, read once per object. */
  readonly #ages = new WeakMap<HttpRoute, RouteAge>();
  /** The routes of the last translation as handed, and the age order made of them. */
  #order: AgeOrder | null = null;
  #nextOrder: AgeOrder | null = null;
  readonly #patched = new WeakMap<PathConfig, { built: BuiltPolicy; path: PathConfig }>();

  /** What routes read through, as last observed, and a count bumped each time one of them changed. */
  #lookups: (Omit<RouteContext, 'permits'> & { grants: readonly ReferenceGrant[] }) | null = null;
  #epochs: Epochs = { gateways: 0, namespaces: 0, services: 0, grants: 0 };

  /**
   * What this translation's routes read through. A lookup that is the very object of the last
   * translation (the source keeps its maps while nothing in them changed: they are never changed in
   * place once given) answers as it did, so a route checked against it then need not be checked
   * again; the grants, a new list every time, are compared item by item.
   */
  observe(context: RouteContext, grants: readonly ReferenceGrant[]): void {
    const last = this.#lookups;
    const before = this.#epochs;
    const epochs = {
      gateways: before.gateways + (last?.gateways === context.gateways ? 0 : 1),
      namespaces: before.namespaces + (last?.namespaces === context.namespaces ? 0 : 1),
      services: before.services + (last?.services === context.services ? 0 : 1),
      grants: before.grants + (last !== null && sameItems(last.grants, grants) ? 0 : 1),
    };
    // Nothing changed: the same object, which every entry checked against it holds (#stillReads).
    if (!isDeepStrictEqual(epochs, before)) this.#epochs = epochs;
    this.#lookups = {
      gateways: context.gateways,
      namespaces: context.namespaces,
      services: context.services,
      grants,
    };
  }

  /** The Gateways by `namespace/name`: the same map while the Gateways are the same objects. */
  gatewayMap(views: readonly ResolvedGateway[]): ReadonlyMap<string, ResolvedGateway> {
    if (this.#gatewayMap?.views !== views)
      this.#gatewayMap = { views, map: new Map(views.map((gateway) => [keyOfGateway(gateway), gateway])) };
    return this.#gatewayMap.map;
  }

  #gatewayMap: { views: readonly ResolvedGateway[]; map: ReadonlyMap<string, ResolvedGateway> } | null = null;

  /** A translation starts: what it does not use is dropped at commit. */
  begin(): void {
    this.#pass += 1;
    this.#used = 0;
    this.#nextOrder = null;
    this.#nextGateways = new Map();
    this.#nextPolicies = new Map();
  }

  /** The translation ended without an error: keep what it used. */
  commit(): void {
    const pass = this.#pass;
    if (this.#routes.size !== this.#used)
      for (const [route, entry] of this.#routes)
        if (entry.pass !== pass || entry.route !== route) this.#routes.delete(route);
    if (this.#named.size !== this.#used)
      for (const [named, entry] of this.#named) if (entry.pass !== pass) this.#named.delete(named);
    this.#order = this.#nextOrder;
    this.#gateways = this.#nextGateways;
    this.#policies = this.#nextPolicies;
  }

  /** resolveGateway, reused while the Gateway and the Secrets, ConfigMaps and grants it read are the same. */
  resolve(
    gateway: Gateway,
    secrets: Lookup<V1Secret>,
    grants: readonly ReferenceGrant[],
    configMaps: Lookup<V1ConfigMap>,
  ): ResolvedGateway {
    const before = this.#gateways.get(gateway);
    if (
      before !== undefined &&
      sameItems(before.grants, grants) &&
      sameReads(secrets, before.secrets) &&
      sameReads(configMaps, before.configMaps)
    ) {
      this.#nextGateways.set(gateway, before);
      return before.resolved;
    }
    const read = {
      secrets: new Map<string, V1Secret | undefined>(),
      configMaps: new Map<string, V1ConfigMap | undefined>(),
    };
    const resolved = resolveGateway(
      gateway,
      recording(secrets, read.secrets),
      grants,
      recording(configMaps, read.configMaps),
    );
    this.#nextGateways.set(gateway, { grants, ...read, resolved });
    return resolved;
  }

  /**
   * The Gateways as routes read them (`mark`: listener conflicts marked on copies), each the very
   * object of the last translation while it is equal to it: a route's translation compares the
   * Gateways it read by identity.
   */
  views(
    resolved: readonly ResolvedGateway[],
    mark: (gateways: readonly ResolvedGateway[]) => ResolvedGateway[],
  ) {
    const last = this.#views;
    if (last !== null && sameItems(last.resolved, resolved)) return last.views;
    const byKey = new Map((last?.views ?? []).map((view) => [keyOfGateway(view), view]));
    const views = mark(resolved).map((view) => {
      const before = byKey.get(keyOfGateway(view));
      return before !== undefined && isDeepStrictEqual(before, view) ? before : view;
    });
    this.#views = { resolved, views };
    return views;
  }

  /**
   * `translate(route, kind, age, context)`, reused while the route is the same object and every
   * Gateway, namespace, Service and ReferenceGrant answer it read is the same. `age` (its place in
   * age order) only orders its paths among others of the same host: a route that kept its
   * translation but moved in age order gets its entries restamped, with the same paths.
   */
  route(
    route: HttpRoute,
    kind: RouteKind,
    age: number,
    context: RouteContext,
    translate: (route: HttpRoute, kind: RouteKind, age: number, context: RouteContext) => RouteOutcome,
  ): RouteEntry {
    // The same object; else the same route written again with what a translation reads of it
    // unchanged (a status write, ours at every change of it, gives a new object).
    let before = this.#routes.get(route);
    const named =
      before?.named ?? `${kind} ${route.metadata?.namespace ?? 'default'}/${route.metadata?.name ?? ''}`;
    if (before === undefined) {
      const last = this.#named.get(named);
      if (last !== undefined && sameTranslatable(last.route, route)) before = last;
    }
    if (before !== undefined && before.kind === kind && this.#stillReads(before, context)) {
      this.#used += 1;
      if (before.route === route && before.age === age) {
        // Unchanged: identity checks only, nothing made.
        before.pass = this.#pass;
        if (this.#named.get(named) !== before) this.#named.set(named, before);
        return before;
      }
      const entry = { ...(before.age === age ? before : restamped(before, age)), route, pass: this.#pass };
      this.#replaced(before);
      this.#routes.set(route, entry);
      this.#named.set(named, entry);
      return entry;
    }
    const recorded = new RecordingContext(context);
    const outcome = translate(route, kind, age, recorded);
    this.#used += 1;
    const reads: RouteReads = {
      gateways: recorded.gateways.seen,
      namespaces: recorded.namespaces.seen,
      services: recorded.services.seen,
      grants: recorded.grants,
    };
    const last = this.#named.get(named);
    const entry: RouteEntry = {
      route,
      named,
      kind,
      age,
      reads,
      checked: this.#epochs,
      pass: this.#pass,
      outcome: this.#samePaths(last, outcome),
    };
    const lastClaim = last?.claim ?? last?.lastClaim;
    if (lastClaim !== undefined) entry.lastClaim = lastClaim;
    if (last !== undefined) this.#replaced(last);
    this.#routes.set(route, entry);
    this.#named.set(named, entry);
    return entry;
  }

  /**
   * An entry a newer version of its route replaces: dropped now rather than found by commit's sweep
   * (which then walks nothing), unless this translation used it already.
   */
  #replaced(entry: RouteEntry): void {
    if (entry.route !== null && entry.pass !== this.#pass && this.#routes.get(entry.route) === entry)
      this.#routes.delete(entry.route);
  }

  /** A route's translation made without the cache (a malformed route): used once, kept nowhere. */
  uncached(kind: RouteKind, age: number, outcome: RouteOutcome): RouteEntry {
    return {
      route: null,
      named: '',
      kind,
      age,
      outcome,
      reads: { gateways: [], namespaces: [], services: [], grants: [] },
      checked: this.#epochs,
      pass: this.#pass,
    };
  }

  /**
   * A route's claim on its hosts (named `kind namespace/name`), the object of the last translation
   * while it says the same (the entry's own, or that of the route's last translation): the owners
   * are then reused (owners) when no claim changed.
   */
  claim(entry: RouteEntry, route: HttpRoute, created: number): AgedClaim {
    const hosts = entry.outcome.claims;
    const namespace = route.metadata?.namespace ?? 'default';
    const own = entry.claim;
    if (
      own !== undefined &&
      own.namespace === namespace &&
      own.created === created &&
      sameItems(own.hosts, hosts)
    )
      return own;
    const name = `${entry.outcome.kind} ${route.metadata?.namespace}/${route.metadata?.name}`;
    const before = entry.lastClaim;
    const claim =
      before !== undefined &&
      before.ingress === name &&
      before.namespace === namespace &&
      before.created === created &&
      sameItems(before.hosts, hosts)
        ? before
        : { namespace, ingress: name, hosts, created };
    // The entry is the cache's own: what it derives is kept on it.
    entry.claim = claim;
    return claim;
  }

  /** True when every read of the entry gives the same answer now (checked only where a lookup changed). */
  #stillReads(entry: RouteEntry, context: RouteContext): boolean {
    const now = this.#epochs;
    if (entry.checked === now) return true;
    if (!stillReads(entry.reads, context, entry.checked, now)) return false;
    // The entry is the cache's own: its reads hold against these lookups too.
    entry.checked = now;
    return true;
  }

  /**
   * A route translated again (it changed, or something it read did) whose paths came out equal to
   * those its last translation gave: those paths, the very objects. A status written to the route,
   * or a Gateway change that leaves its listeners as they were, then costs the merge nothing.
   */
  #samePaths(last: RouteEntry | undefined, outcome: RouteOutcome): RouteOutcome {
    const before = last?.outcome.entries;
    if (before === undefined || before.length === 0) return outcome;
    let kept = 0;
    const entries = outcome.entries.map((item, index) => {
      const old = before[index];
      if (old === undefined || old.host !== item.host || !isDeepStrictEqual(old.path, item.path)) return item;
      kept += 1;
      return { ...item, path: old.path };
    });
    return kept === 0 ? outcome : { ...outcome, entries };
  }

  /**
   * Every route, oldest first (creationTimestamp, then `namespace/name`; HTTPRoutes before GRPCRoutes
   * among equals, as a stable sort of both lists gives). When the lists differ from the last ones only
   * by objects replaced at their place by one of the same age and `namespace/name` (an edit, a status
   * write), the last order is kept with the new objects in it: nothing is sorted, and a translation
   * with nothing replaced gets the very same array.
   */
  order(
    httpRoutes: readonly HttpRoute[],
    grpcRoutes: readonly HttpRoute[],
    read: (route: HttpRoute) => RouteAge,
  ): readonly AgedRoute[] {
    const ageOf = (route: HttpRoute): RouteAge => {
      let age = this.#ages.get(route);
      if (age === undefined) {
        age = read(route);
        this.#ages.set(route, age);
      }
      return age;
    };
    const last = this.#order;
    let routes: readonly AgedRoute[] | null = null;
    if (last !== null) {
      const swaps = new Map<HttpRoute, HttpRoute>();
      if (
        swappedInPlace(last.http, httpRoutes, ageOf, swaps) &&
        swappedInPlace(last.grpc, grpcRoutes, ageOf, swaps)
      )
        routes =
          swaps.size === 0
            ? last.routes
            : last.routes.map((item) => {
                const now = swaps.get(item.route);
                return now === undefined ? item : { ...item, route: now };
              });
    }
    if (routes === null) {
      const all: AgedRoute[] = [];
      for (const route of httpRoutes) all.push({ route, kind: 'HTTPRoute', ...ageOf(route) });
      for (const route of grpcRoutes) all.push({ route, kind: 'GRPCRoute', ...ageOf(route) });
      routes = all.sort(
        (a, b) => olderFirst(a.created, b.created) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
      );
    }
    // Copies of the lists: the caller may change its own.
    this.#nextOrder = {
      http: last !== null && routes === last.routes ? last.http : [...httpRoutes],
      grpc: last !== null && routes === last.routes ? last.grpc : [...grpcRoutes],
      routes,
    };
    return routes;
  }

  /**
   * The host owners (ownership.ts hostOwners over every source's claims), reused while the hosts of
   * upstreams.yaml and every claim are the same (the routes' claims are kept per route: claimOf).
   */
  owners(
    fileHosts: readonly string[],
    ingressClaims: readonly AgedClaim[],
    routeClaims: readonly AgedClaim[],
    compute: () => ReadonlyMap<string, HostOwner>,
  ): ReadonlyMap<string, HostOwner> {
    const last = this.#owners;
    if (
      last !== null &&
      sameItems(last.fileHosts, fileHosts) &&
      sameClaims(last.ingressClaims, ingressClaims) &&
      sameItems(last.routeClaims, routeClaims)
    )
      return last.owners;
    const owners = compute();
    this.#owners = { fileHosts, ingressClaims, routeClaims, owners };
    return owners;
  }

  /**
   * The policy memo of applyPolicies: a policy built again only when it, a Secret it read, a
   * ReferenceGrant, main.yaml's providers or the own-listener check changed; a path patched with a
   * policy once per (path, built policy), so an unchanged path under an unchanged policy stays the
   * same object.
   */
  policyMemo(): PolicyMemo {
    return {
      build: (policy, context) => this.#built(policy, context),
      patch: (path, built) => {
        const before = this.#patched.get(path);
        if (before !== undefined && before.built === built) return before.path;
        const patched = withPolicy(path, built);
        this.#patched.set(path, { built, path: patched });
        return patched;
      },
    };
  }

  #built(policy: TollgatePolicy, context: PolicyContext): BuiltPolicy {
    const before = this.#policies.get(policy);
    if (
      before !== undefined &&
      sameItems(before.grants, context.grants) &&
      before.oidcProviders === context.oidcProviders &&
      before.reachesTollgate === context.reachesTollgate &&
      sameReads(context.secrets, before.secrets)
    ) {
      this.#nextPolicies.set(policy, before);
      return before.built;
    }
    const secrets = new Map<string, V1Secret | undefined>();
    const rebuilt = buildPolicy(policy, { ...context, secrets: recording(context.secrets, secrets) });
    // Built again to the same settings (a ReferenceGrant it does not use changed): the same object,
    // so the paths it patched stay the same objects too.
    const built = before !== undefined && isDeepStrictEqual(before.built, rebuilt) ? before.built : rebuilt;
    const entry: PolicyEntry = {
      grants: context.grants,
      oidcProviders: context.oidcProviders,
      reachesTollgate: context.reachesTollgate,
      secrets,
      built,
    };
    this.#nextPolicies.set(policy, entry);
    return built;
  }

  /**
   * The table's hosts: `entries` grouped by host, each host's paths in the order `ordered` gives. A
   * host whose entries are the same paths with the same ranks, in the same order, as last time is
   * the HostConfig of the last translation, not ordered again. Hosts gone are dropped.
   *
   * Each host's entries are compared with its last group as they come, so an unchanged host costs
   * identity checks and makes nothing; only a host that changed gets a new group.
   */
  hosts(entries: readonly PathEntry[], ordered: (group: readonly PathEntry[]) => PathConfig[]): HostConfig[] {
    const pass = ++this.#hostsPass;
    const known = this.#hosts;
    const seen: HostState[] = [];
    for (const entry of entries) {
      let state = known.get(entry.host);
      if (state === undefined) {
        state = { name: entry.host, group: [], host: null, pass: 0, matched: 0, fresh: null };
        known.set(entry.host, state);
      }
      if (state.pass !== pass) {
        state.pass = pass;
        state.matched = 0;
        state.fresh = null;
        seen.push(state);
      }
      if (state.fresh === null) {
        const before = state.group[state.matched];
        if (before !== undefined && sameEntry(before, entry)) {
          state.matched += 1;
          continue;
        }
        state.fresh = state.group.slice(0, state.matched);
      }
      state.fresh.push(entry);
    }
    const hosts: HostConfig[] = [];
    for (const state of seen) {
      if (state.fresh === null && state.matched < state.group.length)
        state.fresh = state.group.slice(0, state.matched);
      if (state.fresh !== null || state.host === null) {
        const group = state.fresh ?? state.group;
        // The group and its host change together, once the host is made.
        state.host = { name: state.name, paths: ordered(group) };
        state.group = group;
        state.fresh = null;
      }
      hosts.push(state.host);
    }
    if (known.size !== seen.length)
      for (const [name, state] of known) if (state.pass !== pass) known.delete(name);
    return hosts;
  }
}

/** One host of the table as last built (hosts), and where this translation stands in comparing it. */
interface HostState {
  name: string;
  /** The entries its paths were ordered from. */
  group: readonly PathEntry[];
  host: HostConfig | null;
  /** The translation that last saw it. */
  pass: number;
  /** How many of this translation's entries for it matched the group so far. */
  matched: number;
  /** Its entries this translation, once one differed from the group (null: none differed yet). */
  fresh: PathEntry[] | null;
}

/** The same path with the same rank: it orders the same. */
function sameEntry(x: PathEntry, y: PathEntry): boolean {
  return (
    x.path === y.path &&
    x.rank.method === y.rank.method &&
    x.rank.headers === y.rank.headers &&
    x.rank.query === y.rank.query &&
    x.rank.age === y.rank.age &&
    x.rank.match === y.rank.match
  );
}

/** A route's creation time (ms; unknown: +Infinity) and `namespace/name` as written: what age order sorts by. */
export interface RouteAge {
  created: number;
  key: string;
}

/** A route in age order. */
export interface AgedRoute extends RouteAge {
  route: HttpRoute;
  kind: RouteKind;
}

interface AgeOrder {
  http: readonly HttpRoute[];
  grpc: readonly HttpRoute[];
  routes: readonly AgedRoute[];
}

/**
 * True when `now` is `before` with some objects replaced at their place by one of the same age and
 * `namespace/name` (each noted in `swaps`, old → new): sorted, both give the same order.
 */
function swappedInPlace(
  before: readonly HttpRoute[],
  now: readonly HttpRoute[],
  ageOf: (route: HttpRoute) => RouteAge,
  swaps: Map<HttpRoute, HttpRoute>,
): boolean {
  if (before.length !== now.length) return false;
  for (let index = 0; index < now.length; index++) {
    const a = now[index] as HttpRoute;
    const b = before[index] as HttpRoute;
    if (a === b) continue;
    const [x, y] = [ageOf(a), ageOf(b)];
    if (!Object.is(x.created, y.created) || x.key !== y.key) return false;
    swaps.set(b, a);
  }
  return true;
}

/** One route's translation and what it read. */
export interface RouteEntry {
  /** The object translated (or one translated the same: sameTranslatable). */
  route: HttpRoute | null;
  /** `kind namespace/name`. */
  named: string;
  /** The lookups (their epochs) its reads were last found to hold against. */
  checked: Epochs;
  /** Its claim on its hosts, as last handed to the owners (claim). */
  claim?: AgedClaim;
  /** The claim of the route's translation before this one (claim: kept while it says the same). */
  lastClaim?: AgedClaim;
  /** The translation that used it last (GatewayTranslationCache's count). */
  pass: number;
  kind: RouteKind;
  age: number;
  outcome: RouteOutcome;
  reads: RouteReads;
  /** translate.ts's memos of what it derives from the outcome (host ownership, status). */
  owned?: {
    owners: ReadonlyMap<string, HostOwner>;
    /** The outcome it was made from (restamped entries make another). */
    base: RouteOutcome;
    outcome: RouteOutcome;
    entries: readonly PathEntry[];
  };
  /** Its DesiredStatus (translate.ts), for these parents and gateway_names. */
  status?: { gatewayNames: readonly string[] | null; parents: RouteOutcome['parents']; desired: object };
}

/** Each key read and what it gave (undefined: absent); each grant check and its answer. */
interface RouteReads {
  gateways: ReadonlyArray<readonly [string, ResolvedGateway | undefined]>;
  namespaces: ReadonlyArray<readonly [string, Readonly<Record<string, string>> | undefined]>;
  services: ReadonlyArray<readonly [string, V1Service | undefined]>;
  grants: Array<{ reference: Reference; answer: boolean }>;
}

interface GatewayEntry {
  grants: readonly ReferenceGrant[];
  secrets: Map<string, V1Secret | undefined>;
  configMaps: Map<string, V1ConfigMap | undefined>;
  resolved: ResolvedGateway;
}

interface PolicyEntry {
  grants: readonly ReferenceGrant[];
  oidcProviders: PolicyContext['oidcProviders'];
  reachesTollgate: PolicyContext['reachesTollgate'];
  secrets: Map<string, V1Secret | undefined>;
  built: BuiltPolicy;
}

interface OwnersEntry {
  fileHosts: readonly string[];
  ingressClaims: readonly AgedClaim[];
  routeClaims: readonly AgedClaim[];
  owners: ReadonlyMap<string, HostOwner>;
}

/** A lookup noting each key read and what it gave (a route reads a handful: a list, no map). */
class RecordingLookup<V> implements Lookup<V> {
  readonly seen: Array<readonly [string, V | undefined]> = [];
  readonly #source: Lookup<V>;

  constructor(source: Lookup<V>) {
    this.#source = source;
  }

  get(key: string): V | undefined {
    const value = this.#source.get(key);
    if (!this.seen.some(([known]) => known === key)) this.seen.push([key, value]);
    return value;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }
}

/** A route's context recording every read (prototype methods: no closures per route). */
class RecordingContext implements RouteContext {
  readonly gateways: RecordingLookup<ResolvedGateway>;
  readonly namespaces: RecordingLookup<Readonly<Record<string, string>>>;
  readonly services: RecordingLookup<V1Service>;
  readonly grants: Array<{ reference: Reference; answer: boolean }> = [];
  readonly #context: RouteContext;

  constructor(context: RouteContext) {
    this.#context = context;
    this.gateways = new RecordingLookup(context.gateways);
    this.namespaces = new RecordingLookup(context.namespaces);
    this.services = new RecordingLookup(context.services);
  }

  permits(reference: Reference): boolean {
    const answer = this.#context.permits(reference);
    this.grants.push({ reference, answer });
    return answer;
  }
}

/** True when every read gives the same answer now. Namespace labels are compared by value. */
function stillReads(reads: RouteReads, context: RouteContext, checked: Epochs, now: Epochs): boolean {
  if (checked.gateways !== now.gateways)
    for (const [key, value] of reads.gateways) if (context.gateways.get(key) !== value) return false;
  if (checked.services !== now.services)
    for (const [key, value] of reads.services) if (context.services.get(key) !== value) return false;
  if (checked.namespaces !== now.namespaces)
    for (const [name, labels] of reads.namespaces)
      if (!sameLabels(context.namespaces.get(name), labels)) return false;
  if (checked.grants !== now.grants)
    for (const { reference, answer } of reads.grants) if (context.permits(reference) !== answer) return false;
  return true;
}

/** Per lookup of RouteContext, how many times it changed. */
interface Epochs {
  gateways: number;
  namespaces: number;
  services: number;
  grants: number;
}

/**
 * True when a translation reads the same of both objects (routes.ts translateRoute: namespace, name,
 * generation and spec); status, resourceVersion, managedFields may differ.
 */
function sameTranslatable(a: HttpRoute | null, b: HttpRoute): boolean {
  return (
    a !== null &&
    a.metadata?.namespace === b.metadata?.namespace &&
    a.metadata?.name === b.metadata?.name &&
    a.metadata?.generation === b.metadata?.generation &&
    isDeepStrictEqual(a.spec, b.spec)
  );
}

function sameLabels(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>> | undefined,
): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && a[key] === b[key]);
}

/** The entry with its paths ranked at `age`: new entries, the same PathConfig objects. */
function restamped(entry: RouteEntry, age: number): RouteEntry {
  const outcome: RouteOutcome = {
    ...entry.outcome,
    entries: entry.outcome.entries.map((item) => ({ ...item, rank: { ...item.rank, age } })),
  };
  return { ...entry, age, outcome };
}

function keyOfGateway(gateway: ResolvedGateway): string {
  return `${gateway.namespace}/${gateway.name}`;
}
