import { isDeepStrictEqual } from 'node:util';
import type { V1ConfigMap, V1Secret, V1Service } from '@kubernetes/client-node';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import type { AgedClaim, HostOwner } from '../ownership.ts';
import type { Reference } from './grants.ts';
import { type ResolvedGateway, type RouteKind, resolveGateway } from './listeners.ts';
import type { Gateway, HttpRoute, ReferenceGrant } from './objects.ts';
import { type PolicyMemo, withPolicy } from './policy.ts';
import { type BuiltPolicy, buildPolicy, type PolicyContext, type TollgatePolicy } from './policy-keys.ts';
import { type Lookup, recording, sameItems, sameReads } from './reads.ts';
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
 * translation that throws commits nothing and the next one starts from the last committed state.
 */
export class GatewayTranslationCache {
  #routes = new Map<HttpRoute, RouteEntry>();
  #nextRoutes = new Map<HttpRoute, RouteEntry>();
  /** The same entries by `kind namespace/name`: an edited route's last translation. */
  #named = new Map<string, RouteEntry>();
  #nextNamed = new Map<string, RouteEntry>();
  #gateways = new Map<Gateway, GatewayEntry>();
  #nextGateways = new Map<Gateway, GatewayEntry>();
  #policies = new Map<TollgatePolicy, PolicyEntry>();
  #nextPolicies = new Map<TollgatePolicy, PolicyEntry>();
  /** The Gateways as routes read them (conflicts marked), by `namespace/name`: kept while equal. */
  #views: { resolved: readonly ResolvedGateway[]; views: ResolvedGateway[] } | null = null;
  #hosts = new Map<string, HostConfig>();
  #claims = new Map<string, AgedClaim>();
  #nextClaims = new Map<string, AgedClaim>();
  #owners: OwnersEntry | null = null;
  readonly #patched = new WeakMap<PathConfig, { built: BuiltPolicy; path: PathConfig }>();

  /** A translation starts: what it does not use is dropped at commit. */
  begin(): void {
    this.#nextRoutes = new Map();
    this.#nextNamed = new Map();
    this.#nextGateways = new Map();
    this.#nextPolicies = new Map();
    this.#nextClaims = new Map();
  }

  /** The translation ended without an error: keep what it used. */
  commit(): void {
    this.#routes = this.#nextRoutes;
    this.#named = this.#nextNamed;
    this.#gateways = this.#nextGateways;
    this.#policies = this.#nextPolicies;
    this.#claims = this.#nextClaims;
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
    const before = this.#routes.get(route);
    if (before !== undefined && before.kind === kind && stillReads(before.reads, context)) {
      const entry = before.age === age ? before : restamped(before, age);
      this.#nextRoutes.set(route, entry);
      this.#nextNamed.set(`${kind} ${entry.outcome.namespace}/${entry.outcome.name}`, entry);
      return entry;
    }
    const reads: RouteReads = { gateways: new Map(), namespaces: new Map(), services: new Map(), grants: [] };
    const recorded: RouteContext = {
      gateways: recording(context.gateways, reads.gateways),
      namespaces: recording(context.namespaces, reads.namespaces),
      services: recording(context.services, reads.services),
      permits: (reference) => {
        const answer = context.permits(reference);
        reads.grants.push({ reference, answer });
        return answer;
      },
    };
    const outcome = translate(route, kind, age, recorded);
    const named = `${kind} ${outcome.namespace}/${outcome.name}`;
    const entry: RouteEntry = { kind, age, reads, outcome: this.#samePaths(named, outcome) };
    this.#nextRoutes.set(route, entry);
    this.#nextNamed.set(named, entry);
    return entry;
  }

  /** A route's translation made without the cache (a malformed route): used once, kept nowhere. */
  uncached(kind: RouteKind, age: number, outcome: RouteOutcome): RouteEntry {
    return {
      kind,
      age,
      outcome,
      reads: { gateways: new Map(), namespaces: new Map(), services: new Map(), grants: [] },
    };
  }

  /**
   * A route's claim on its hosts (`claimant`: its kind and name), the object of the last translation
   * while it says the same: the owners are then reused (owners) when no claim changed.
   */
  claim(namespace: string, claimant: string, hosts: readonly string[], created: number): AgedClaim {
    const before = this.#claims.get(claimant);
    const claim =
      before !== undefined &&
      before.namespace === namespace &&
      before.created === created &&
      sameItems(before.hosts, hosts)
        ? before
        : { namespace, ingress: claimant, hosts, created };
    this.#nextClaims.set(claimant, claim);
    return claim;
  }

  /**
   * A route translated again (it changed, or something it read did) whose paths came out equal to
   * those its last translation gave: those paths, the very objects. A status written to the route,
   * or a Gateway change that leaves its listeners as they were, then costs the merge nothing.
   */
  #samePaths(named: string, outcome: RouteOutcome): RouteOutcome {
    const before = this.#named.get(named)?.outcome.entries;
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
      sameItems(last.ingressClaims, ingressClaims) &&
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
   * A host of the table: the HostConfig of the last translation while its paths are the same objects
   * in the same order. Hosts gone are dropped.
   */
  hosts(built: ReadonlyArray<{ name: string; paths: PathConfig[] }>): HostConfig[] {
    const next = new Map<string, HostConfig>();
    const hosts = built.map((host) => {
      const before = this.#hosts.get(host.name);
      const kept = before !== undefined && sameItems(before.paths, host.paths) ? before : host;
      next.set(host.name, kept);
      return kept;
    });
    this.#hosts = next;
    return hosts;
  }
}

/** One route's translation and what it read. */
export interface RouteEntry {
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

interface RouteReads {
  gateways: Map<string, ResolvedGateway | undefined>;
  namespaces: Map<string, Readonly<Record<string, string>> | undefined>;
  services: Map<string, V1Service | undefined>;
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

/** True when every read gives the same answer now. Namespace labels are compared by value. */
function stillReads(reads: RouteReads, context: RouteContext): boolean {
  if (!sameReads(context.gateways, reads.gateways) || !sameReads(context.services, reads.services))
    return false;
  for (const [name, labels] of reads.namespaces)
    if (!sameLabels(context.namespaces.get(name), labels)) return false;
  for (const { reference, answer } of reads.grants) if (context.permits(reference) !== answer) return false;
  return true;
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
