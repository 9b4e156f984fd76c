import { pathConfig } from '../../config/path-config.ts';
import type { HostConfig, PathConfig, UpstreamsConfig } from '../../config/types.ts';
import { DEFAULT_HOST } from '../../routing/normalise.ts';
import { olderFirst } from './older-first.ts';
import { sameItems } from './same-items.ts';

/**
 * Who a host belongs to (docs/ingress.md#host-ownership). Paths alone are the wrong unit for
 * conflicts: a newer Ingress of another team adding `/api`, or `/` Exact beside an older `/` Prefix,
 * would receive that host's users' API keys and cookies. So a host has one owner:
 *
 * - upstreams.yaml, for every host it names (written by the operator): no Ingress adds a path there;
 * - else the namespace of the oldest Ingress naming the host in a rule (creationTimestamp, then
 *   namespace/name, the order Ingresses are translated in). Every Ingress of that namespace may serve
 *   paths there (per-path conflicts between them are decided as before); an Ingress of another
 *   namespace naming it is left out and reported, whatever its paths.
 *
 * A claim is made by naming the host, not by compiling: a team whose Ingress (or route) is broken
 * for a moment does not hand its host to the next namespace that names it, and the host is held
 * closed meanwhile (withClaimedHosts). Pure: the same input, the same owners.
 */

export type HostOwner =
  | { kind: 'file' }
  /** `ingress`: `namespace/name` of the Ingress that claimed the host first. */
  | { kind: 'namespace'; namespace: string; ingress: string };

/** One Ingress's claim: the host keys its rules (and defaultBackend, as `DEFAULT`) name. */
export interface HostClaim {
  namespace: string;
  /** `namespace/name` of an Ingress, or `<Kind> namespace/name` of a Gateway API route. */
  ingress: string;
  hosts: readonly string[];
}

/**
 * A claim with the time its object was created (ms; unknown: last), so the claims of Ingresses and
 * Gateway API routes are ordered together (docs/gateway-api.md#host-ownership).
 */
export interface AgedClaim extends HostClaim {
  created: number;
}

/**
 * Two claims that decide ownership alike: everything hostOwners and byCreation read (the same object
 * at once; an unknown age, NaN, equal to itself).
 */
export function sameClaim(a: AgedClaim, b: AgedClaim): boolean {
  return (
    a === b ||
    (a.namespace === b.namespace &&
      a.ingress === b.ingress &&
      Object.is(a.created, b.created) &&
      sameItems(a.hosts, b.hosts))
  );
}

/** The same claims in the same order, compared field by field rather than serialized on every change. */
export function sameClaims(a: readonly AgedClaim[], b: readonly AgedClaim[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let index = 0; index < a.length; index += 1)
    if (!sameClaim(a[index] as AgedClaim, b[index] as AgedClaim)) return false;
  return true;
}

/** Oldest first; a tie keeps the order given (Ingresses before routes, each in its own age order). */
export function byCreation(claims: readonly AgedClaim[]): AgedClaim[] {
  return [...claims].sort((a, b) => olderFirst(a.created, b.created));
}

/** The owner of every named host: upstreams.yaml's first, then claims in the order given (oldest first). */
export function hostOwners(fileHosts: Iterable<string>, claimsOldestFirst: readonly HostClaim[]) {
  const owners = new Map<string, HostOwner>();
  for (const host of fileHosts) owners.set(host, { kind: 'file' });
  for (const claim of claimsOldestFirst)
    for (const host of claim.hosts)
      if (!owners.has(host))
        owners.set(host, { kind: 'namespace', namespace: claim.namespace, ingress: claim.ingress });
  return owners;
}

/**
 * The hosts of one source's translation whose owner, by the claims of every source now, is the
 * namespace their paths came from (`ingress/<namespace>/<name>`, `httproute/<namespace>/<name>`). A
 * translation made before the other source's claims changed may still hold a host it lost; it is
 * not served for the moment until that source translates again.
 */
export function ownedHosts(
  hosts: readonly HostConfig[],
  owners: ReadonlyMap<string, HostOwner>,
): readonly HostConfig[] {
  const verdict = (host: HostConfig) => {
    // The same owners map as last time for this host: the same verdict, without looking it up.
    const known = ownership.get(host);
    if (known !== undefined && known.owners === owners) return known.owns;
    return ownsHost(host, owners.get(host.name), owners);
  };
  // A list like one found wholly owned under these owners (the same source's last translation,
  // mostly): a host that is the same object at the same position has the same verdict, so only the
  // others are looked at (docs/benchmark.md, "Control plane at scale").
  let kept = wholeLists.get(owners);
  const key = `${hosts.length} ${hosts[0]?.name} ${hosts[hosts.length - 1]?.name}`;
  const last = kept?.get(key);
  if (last !== undefined && last.length === hosts.length) {
    let all = true;
    for (let position = 0; position < hosts.length && all; position++) {
      const host = hosts[position] as HostConfig;
      if (host !== last[position] && !verdict(host)) all = false;
    }
    if (all) {
      kept?.set(key, hosts);
      return hosts;
    }
  }
  const owned = hosts.filter(verdict);
  if (owned.length !== hosts.length) return owned;
  if (kept === undefined) {
    kept = new Map();
    wholeLists.set(owners, kept);
  }
  // A few lists are what the sources give; more (lists of other lengths) are dropped, not kept.
  if (kept.size >= 8 && !kept.has(key)) kept.clear();
  kept.set(key, hosts);
  return hosts;
}

/**
 * Per owners map (never changed once made): host lists found wholly owned under it, by their length
 * and first and last host names (one per source, mostly).
 */
const wholeLists = new WeakMap<ReadonlyMap<string, HostOwner>, Map<string, readonly HostConfig[]>>();

/**
 * True when every path of the host may be served by its owner. Kept per host object with the owner's
 * kind and namespace (all mayServeHost reads): a change to one host checks that host's paths only.
 */
function ownsHost(
  host: HostConfig,
  owner: HostOwner | undefined,
  owners: ReadonlyMap<string, HostOwner>,
): boolean {
  const kind = owner?.kind;
  const namespace = owner?.kind === 'namespace' ? owner.namespace : undefined;
  const known = ownership.get(host);
  let owns: boolean;
  if (known !== undefined && known.kind === kind && known.namespace === namespace) owns = known.owns;
  else {
    const namespaceOf = (origin: string | null | undefined) => origin?.split('/')[1] ?? '';
    owns = host.paths.every((path) => mayServeHost(owner, namespaceOf(path.origin)));
  }
  ownership.set(host, { owners, kind, namespace, owns });
  return owns;
}

const ownership = new WeakMap<
  HostConfig,
  {
    /** The owners map the verdict was last given for. */
    owners: ReadonlyMap<string, HostOwner>;
    kind: HostOwner['kind'] | undefined;
    namespace: string | undefined;
    owns: boolean;
  }
>();

/**
 * The config with a closed host added for every host a claim names that nothing serves: its owner
 * (the oldest claim) is broken for now — a refused filter or annotation, a missing certificate,
 * every rule invalid. Without it the host's requests would fall through to a wildcard host or the
 * default host, which another namespace may own (docs/ingress.md#host-ownership). Its one path `/`
 * has no server, so it answers 503 until the owner serves again. Hosts upstreams.yaml or a
 * translation serves are left as they are; the default host is never added (nothing lies beyond
 * it: an unserved one answers 404).
 */
export function withClaimedHosts(
  config: UpstreamsConfig,
  claimsOldestFirst: readonly HostClaim[],
): UpstreamsConfig {
  const held = heldHosts(config.hosts, claimsOldestFirst);
  return held.length === 0 ? config : { ...config, hosts: [...config.hosts, ...held] };
}

/**
 * The closed hosts to add: kept while the claims are the same array and the hosts served have the
 * same names in the same order (the same objects, mostly), so a change to one host's paths does
 * not gather every host name again.
 */
function heldHosts(hosts: readonly HostConfig[], claims: readonly HostClaim[]): readonly HostConfig[] {
  const last = heldKept.get(claims);
  if (last !== undefined && sameNamesAt(last.hosts, hosts)) {
    heldKept.set(claims, { hosts, held: last.held });
    return last.held;
  }
  const present = new Set(hosts.map((host) => host.name));
  const held: HostConfig[] = [];
  for (const claim of claims)
    for (const host of claim.hosts) {
      if (host === DEFAULT_HOST || present.has(host)) continue;
      present.add(host);
      held.push(closedHost(claim, host));
    }
  heldKept.set(claims, { hosts, held });
  return held;
}

/** Per claims array (never changed once made): the hosts served last time and the closed hosts added. */
const heldKept = new WeakMap<
  readonly HostClaim[],
  { hosts: readonly HostConfig[]; held: readonly HostConfig[] }
>();

/** The same length, and the same name at every position whose object differs (merge.ts uses it too). */
export function sameNamesAt(a: readonly HostConfig[], b: readonly HostConfig[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let index = 0; index < a.length; index++) {
    const x = a[index] as HostConfig;
    const y = b[index] as HostConfig;
    if (x !== y && x.name !== y.name) return false;
  }
  return true;
}

/**
 * The closed host of a claim, the same object while the claim is (claims are never changed once
 * made): the compile keeps its route instead of compiling a new closed path on every change.
 */
function closedHost(claim: HostClaim, name: string): HostConfig {
  let hosts = closedHosts.get(claim);
  if (hosts === undefined) {
    hosts = new Map();
    closedHosts.set(claim, hosts);
  }
  let host = hosts.get(name);
  if (host === undefined) {
    host = { name, paths: [closedPath(claim.ingress)] };
    hosts.set(name, host);
  }
  return host;
}

const closedHosts = new WeakMap<HostClaim, Map<string, HostConfig>>();

/** `/` with no server (503 `no_ready_endpoints`), labelled with the object that owns the host. */
function closedPath(claimant: string): PathConfig {
  // `namespace/name` is an Ingress; `<Kind> namespace/name` a Gateway API route.
  const space = claimant.indexOf(' ');
  const origin =
    space < 0
      ? `ingress/${claimant}`
      : `${claimant.slice(0, space).toLowerCase()}/${claimant.slice(space + 1)}`;
  return pathConfig('/', { origin });
}

/**
 * True when an Ingress of `namespace` may serve paths on a host with this owner. The one rule to build
 * on: whatever shares a host (same-namespace Ingresses, canaries beside their main Ingress) passes here
 * and then meets the per-path conflict rules.
 */
export function mayServeHost(owner: HostOwner | undefined, namespace: string): boolean {
  return owner === undefined || (owner.kind === 'namespace' && owner.namespace === namespace);
}

/** Why an Ingress of `namespace` may not name `host`, or null when it may. */
export function hostOwnershipProblem(
  host: string,
  owner: HostOwner | undefined,
  namespace: string,
): string | null {
  if (mayServeHost(owner, namespace)) return null;
  const name = host === DEFAULT_HOST ? 'the default host (no host, defaultBackend)' : `host ${host}`;
  if (owner?.kind === 'file') return `${name} is served by upstreams.yaml; an Ingress adds no path to it`;
  const first = owner as Extract<HostOwner, { kind: 'namespace' }>;
  const claimant = first.ingress.includes(' ') ? `the ${first.ingress}` : `the Ingress ${first.ingress}`;
  return `${name} belongs to namespace ${first.namespace} (claimed first by ${claimant}); an Ingress of namespace ${namespace} may not serve it`;
}

/**
 * The names a TLS certificate is served for by SNI: only hosts its own Ingress serves paths on
 * (hosts it routes and owns), and of those only the ones `names` covers (a name, or a one-label
 * `*.` wildcard). Never a wildcard itself, never the default host: a Secret cannot claim SNI for
 * hosts beyond its Ingress's own.
 */
export function certificateHosts(names: readonly string[], served: ReadonlySet<string>): string[] {
  const covers = (name: string, host: string) =>
    name === host ||
    (name.startsWith('*.') && host.indexOf('.') > 0 && host.slice(host.indexOf('.') + 1) === name.slice(2));
  return [...served].filter(
    (host) => host !== DEFAULT_HOST && names.some((name) => covers(name.toLowerCase(), host)),
  );
}
