import { X509Certificate } from 'node:crypto';
import type {
  V1Ingress,
  V1IngressBackend,
  V1IngressClass,
  V1Secret,
  V1Service,
} from '@kubernetes/client-node';
import { pathConfig } from '../../../config/path-config.ts';
import type { ServiceRef } from '../../../config/service-ref.ts';
import type {
  AuthorizationConfig,
  HostConfig,
  PathConfig,
  StickySessions,
  UpstreamsConfig,
} from '../../../config/types.ts';
import type { ReachesTollgate } from '../../../policy/auth-url-guard.ts';
import { readAuthorization } from '../../../policy/authorization.ts';
import { PlainReader, type PolicyIssue } from '../../../policy/plain-reader.ts';
import { DEFAULT_HOST, normaliseHostKey, normalisePrefix } from '../../../routing/normalise.ts';
import { certificateNames } from '../../certificate-store.ts';
import { olderFirst } from '../older-first.ts';
import { type AgedClaim, certificateHosts, type HostOwner, hostOwnershipProblem } from '../ownership.ts';
import { decodeSecret, tlsPair } from '../secret-data.ts';
import { type IngressSettings, readAnnotations } from './annotations.ts';
import { type InForceChecks, ingressAnnotationsInForce } from './annotations-in-force.ts';
import { backendPoliciesOf, proxySslSecretKey } from './backend.ts';
import { applyCanary, type CanarySplits, canaryBackendOnly, isCanary } from './canary.ts';
import type { ClientCheckPem } from './certificates.ts';
import { clientCaSecretKey, clientCertificatesOf } from './client-certificate-annotations.ts';
import { withAllowAnnotations } from './oidc-annotations.ts';
import { closingPolicyProblems, policiesOf } from './policy-annotations.ts';
import type { IngressNotice, IngressReport } from './reports.ts';
import {
  type BuildInput,
  IngressBuilds,
  OwnersMemo,
  sameClaim,
  sameDesired,
  sameNames,
} from './translation-cache.ts';

/** `spec.controller` of the IngressClasses Tollgate serves (docs/ingress.md). */
export const INGRESS_CONTROLLER = 'tollgate.io/ingress-controller';
export const DEFAULT_CLASS_ANNOTATION = 'ingressclass.kubernetes.io/is-default-class';
/** The pre-IngressClass way of naming a class, still honoured by every controller. */
export const LEGACY_CLASS_ANNOTATION = 'kubernetes.io/ingress.class';

/**
 * Everything a translation reads: objects as the API gave them, nothing fetched here. Objects and
 * maps are never changed once given: a change is a new object (as the watches do), and a map with
 * other content is a new map (the translation cache takes the same map for the same answers).
 */
export interface IngressInput {
  /** main.yaml `kubernetes.ingress_class`. */
  className: string;
  classes: readonly V1IngressClass[];
  ingresses: readonly V1Ingress[];
  /** By `namespace/name`. */
  services: ReadonlyMap<string, V1Service>;
  /** By `namespace/name`; a Secret the watches listed and found absent is simply not in the map. */
  secrets: ReadonlyMap<string, V1Secret>;
  /** The routes of upstreams.yaml: every host they name is theirs alone (docs/ingress.md#host-ownership). */
  base: Pick<UpstreamsConfig, 'hosts'>;
  /** Hosts Gateway API routes claim, with their age: the oldest claim owns a host (docs/gateway-api.md#host-ownership). */
  otherClaims?: readonly AgedClaim[];
  /** Tollgate's own listeners, which an Ingress's auth-url may not target (none given: not checked). */
  reachesTollgate?: ReachesTollgate | undefined;
  /** main.yaml's `oidc_providers` names: an `auth-oidc-provider` must be one (none given: not checked). */
  oidcProviders?: readonly string[] | undefined;
}

/** A TLS certificate an Ingress asks to serve for its hosts by SNI. */
export interface IngressCertificate {
  /** `namespace/name` of the Secret. */
  secret: string;
  /**
   * The names it is served for: of the hosts of its `spec.tls` entry (else the certificate's own
   * names), those its Ingress serves paths on (docs/ingress.md#tls).
   */
  hosts: string[];
  /** `hosts` came from `spec.tls[].hosts` (else from the certificate). */
  listed: boolean;
  /** PEM, checked: the certificate parses and the key is its key. */
  certificate: string;
  key: string;
  /** The Ingress's auth-tls-* check for these hosts (docs/ingress.md#client-certificates). */
  clientCertificates?: ClientCheckPem;
}

export interface IngressTranslation {
  /** Host configs to merge into upstreams.yaml's (kubernetes/merge.ts). */
  hosts: HostConfig[];
  certificates: IngressCertificate[];
  /** Every Ingress of ours, by `namespace/name`; a report (and this map) is never changed once returned. */
  reports: ReadonlyMap<string, IngressReport>;
  /** The hosts each Ingress of ours names, with its age: what Gateway API routes must respect. */
  claims?: AgedClaim[];
}

/** The IngressClass names Tollgate serves, and whether it also takes Ingresses naming no class. */
export function ourClasses(input: Pick<IngressInput, 'className' | 'classes'>): {
  names: Set<string>;
  takesUnclassed: boolean;
} {
  const names = new Set<string>();
  let takesUnclassed = false;
  const configured = input.classes.find((item) => item.metadata?.name === input.className);
  // The configured name is ours unless an IngressClass of that name belongs to another controller.
  if (configured === undefined || configured.spec?.controller === INGRESS_CONTROLLER)
    names.add(input.className);
  for (const item of input.classes) {
    if (item.spec?.controller !== INGRESS_CONTROLLER || !item.metadata?.name) continue;
    names.add(item.metadata.name);
    if (item.metadata.annotations?.[DEFAULT_CLASS_ANNOTATION] === 'true') takesUnclassed = true;
  }
  return { names, takesUnclassed };
}

/** True when this Ingress is Tollgate's to serve. */
export function isOurs(ingress: V1Ingress, classes: ReturnType<typeof ourClasses>): boolean {
  const named = ingress.spec?.ingressClassName ?? ingress.metadata?.annotations?.[LEGACY_CLASS_ANNOTATION];
  return named === undefined ? classes.takesUnclassed : classes.names.has(named);
}

/** The Secrets an Ingress reads (auth and TLS), as `namespace/name`: what the watches must list. */
export function secretsOf(ingress: V1Ingress): string[] {
  const namespace = ingress.metadata?.namespace ?? 'default';
  const names = new Set<string>();
  for (const tls of ingress.spec?.tls ?? []) if (tls.secretName) names.add(`${namespace}/${tls.secretName}`);
  const { settings } = readAnnotations(ingress.metadata?.annotations);
  if (settings.authSecret !== undefined && ['basic', 'apikey'].includes(settings.authType ?? '')) {
    const [first, second] = settings.authSecret.split('/');
    // Another namespace's Secret is refused by the translation; it is never read.
    if (second === undefined || first === namespace) names.add(`${namespace}/${second ?? first}`);
  }
  // backend-protocol HTTPS/GRPCS's CA and client certificate (docs/ingress.md#backend-annotations).
  const sslSecret = settings.proxySslSecret && proxySslSecretKey(settings.proxySslSecret, namespace);
  if (sslSecret) names.add(sslSecret);
  // auth-tls-secret's CA bundle (docs/ingress.md#client-certificates); another namespace's is refused.
  const caSecret = settings.authTlsSecret && clientCaSecretKey(settings.authTlsSecret, namespace);
  if (caSecret) names.add(caSecret);
  return [...names];
}

/** The key of a path in the conflict rules: host + path + whether it is exact. */
const claimKey = (host: string, path: PathConfig) => `${host} ${path.exact ? '=' : ''}${path.prefix}`;

/**
 * What every translation reads of an Ingress's metadata, read once per object: a sort compares each
 * object many times, and strings made once keep their hash for the maps keyed by them.
 */
interface Age {
  /** Creation time (ms; unknown: +Infinity). */
  time: number;
  /** `namespace/name` as written (the tie-break). */
  key: string;
  namespace: string;
  name: string;
  /** `namespace/name`, `default` for a missing namespace: the key of its report. */
  id: string;
}

const ages = new WeakMap<V1Ingress, Age>();

function ageOf(ingress: V1Ingress): Age {
  let age = ages.get(ingress);
  if (age === undefined) {
    const value = ingress.metadata?.creationTimestamp as unknown;
    const ms = value instanceof Date ? value.getTime() : Date.parse(String(value ?? ''));
    const namespace = ingress.metadata?.namespace ?? 'default';
    const name = ingress.metadata?.name ?? '';
    age = {
      time: Number.isNaN(ms) ? Number.POSITIVE_INFINITY : ms,
      key: `${ingress.metadata?.namespace}/${ingress.metadata?.name}`,
      namespace,
      name,
      id: `${namespace}/${name}`,
    };
    ages.set(ingress, age);
  }
  return age;
}

function byAges(a: Age, b: Age): number {
  const difference = olderFirst(a.time, b.time);
  if (difference !== 0) return difference;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/** Oldest first (creationTimestamp, then namespace/name): the order conflicts are decided in. */
export function byAge(a: V1Ingress, b: V1Ingress): number {
  return byAges(ageOf(a), ageOf(b));
}

/** `ingresses` sorted byAge, each age read once. */
function oldestFirst(ingresses: readonly V1Ingress[]): V1Ingress[] {
  return ingresses
    .map((ingress) => ({ ingress, age: ageOf(ingress) }))
    .sort((a, b) => byAges(a.age, b.age))
    .map((item) => item.ingress);
}

/**
 * What translateIngresses keeps from one translation to the next (translation-cache.ts): each
 * Ingress's build with what it read, the order of the Ingresses and their claims, the host owners,
 * and the canary splits and checks made on paths. A source holds one; without one, a translation
 * starts from nothing. Either way the result is the same (test/unit/ingress-translation-cache.test.ts).
 */
export class IngressTranslationCache {
  readonly mains = new IngressBuilds<BuildOutcome>();
  readonly canaries = new IngressBuilds<BuildOutcome>();
  readonly owners = new OwnersMemo();
  readonly splits: CanarySplits = new WeakMap();
  readonly inForce: InForceChecks = new WeakMap();
  /** The last translation with what tells its parts apart (null: none, or the last one failed). */
  table: Table | null = null;
  #last: {
    input: readonly V1Ingress[];
    classes: ReturnType<typeof ourClasses>;
    mains: V1Ingress[];
    canaries: V1Ingress[];
    claims: AgedClaim[];
  } | null = null;

  /**
   * Our Ingresses oldest first, split into main Ingresses (with their claims) and canaries. When the
   * input differs from the last one only by objects replaced in place, each by a newer version of the
   * same Ingress (same age and name, still ours, still a canary or not), the last order is kept with
   * the new objects in it: nothing is sorted, and an unchanged claim stays the same object.
   */
  order(
    ingresses: readonly V1Ingress[],
    classes: ReturnType<typeof ourClasses>,
  ): {
    mains: V1Ingress[];
    canaries: V1Ingress[];
    claims: AgedClaim[];
    /** The objects replaced in place (old → new), or null when the order was made anew. */
    swaps: ReadonlyMap<V1Ingress, V1Ingress> | null;
  } {
    const last = this.#last;
    const kept = last === null ? null : swapped(last, ingresses, classes);
    let mains: V1Ingress[];
    let canaries: V1Ingress[];
    let claims: AgedClaim[];
    if (last !== null && kept !== null) {
      if (kept.size === 0) ({ mains, canaries, claims } = last);
      else {
        mains = last.mains.map((ingress) => kept.get(ingress) ?? ingress);
        canaries = last.canaries.map((ingress) => kept.get(ingress) ?? ingress);
        claims = mains.map((ingress, index) => {
          const before = last.claims[index] as AgedClaim;
          if (ingress === last.mains[index]) return before;
          const fresh = hostClaim(ingress);
          return sameClaim(before, fresh) ? before : fresh;
        });
      }
    } else {
      const ours = oldestFirst(ingresses.filter((ingress) => isOurs(ingress, classes)));
      // Canaries own no host and no path: they join the main Ingresses' paths afterwards (canary.ts).
      canaries = ours.filter(isCanary);
      mains = canaries.length === 0 ? ours : ours.filter((ingress) => !isCanary(ingress));
      const before = new Map((last?.claims ?? []).map((claim) => [claim.ingress, claim]));
      claims = mains.map((ingress) => {
        const fresh = hostClaim(ingress);
        const known = before.get(fresh.ingress);
        return known !== undefined && sameClaim(known, fresh) ? known : fresh;
      });
    }
    // A copy: the caller may change its list.
    this.#last = { input: [...ingresses], classes, mains, canaries, claims };
    return { mains, canaries, claims, swaps: kept };
  }
}

/**
 * The objects of `ingresses` that replace, at the same place, an object of the last input as a newer
 * version of the same Ingress that keeps its place in the order (same age and name, still ours or
 * not, still a canary or not): old → new. null when anything else changed.
 */
function swapped(
  last: { input: readonly V1Ingress[]; classes: ReturnType<typeof ourClasses> },
  ingresses: readonly V1Ingress[],
  classes: ReturnType<typeof ourClasses>,
): Map<V1Ingress, V1Ingress> | null {
  if (ingresses.length !== last.input.length || !sameClasses(classes, last.classes)) return null;
  const swaps = new Map<V1Ingress, V1Ingress>();
  for (let index = 0; index < ingresses.length; index++) {
    const now = ingresses[index] as V1Ingress;
    const before = last.input[index] as V1Ingress;
    if (now === before) continue;
    const [a, b] = [ageOf(now), ageOf(before)];
    if (a.time !== b.time || a.key !== b.key || a.id !== b.id) return null;
    const ours = isOurs(now, classes);
    if (ours !== isOurs(before, classes)) return null;
    if (ours && isCanary(now) !== isCanary(before)) return null;
    swaps.set(before, now);
  }
  return swaps;
}

function sameClasses(a: ReturnType<typeof ourClasses>, b: ReturnType<typeof ourClasses>): boolean {
  return (
    a.takesUnclassed === b.takesUnclassed &&
    a.names.size === b.names.size &&
    [...a.names].every((name) => b.names.has(name))
  );
}

/**
 * Turns the Ingress objects Tollgate serves into routes in upstreams.yaml's own terms
 * (docs/ingress.md). Pure: the same objects give the same routes, in every replica. One Ingress that
 * cannot be served is left out and reported; every other one keeps its routes. One whose
 * authentication cannot be honoured keeps its paths, closed (503), never open.
 */
export function translateIngresses(
  input: IngressInput,
  cache: IngressTranslationCache = new IngressTranslationCache(),
): IngressTranslation {
  const classes = ourClasses(input);
  cache.mains.begin();
  cache.canaries.begin();
  // Oldest first: the order conflicts are decided in; canaries apart (canary.ts).
  const { mains, canaries, claims, swaps } = cache.order(input.ingresses, classes);
  const owners = cache.owners.owners(
    input.base.hosts.map((host) => host.name),
    claims,
    input.otherClaims ?? [],
  );
  // A newer object of an Ingress with only its status (or labels) changed keeps its build.
  const carried = new Set<V1Ingress>();
  for (const [replaced, next] of swaps ?? [])
    if (
      sameDesired(replaced, next) &&
      (cache.mains.carry(replaced, next) || cache.canaries.carry(replaced, next))
    )
      carried.add(next);
  const last = cache.table;
  // Until this translation is done: one that throws leaves no table to build on.
  cache.table = null;
  const kept =
    last !== null && swaps !== null
      ? retranslate(last, input, cache, { mains, canaries, claims }, owners, carried)
      : null;
  if (kept !== null) {
    for (const replaced of swaps?.keys() ?? []) cache.mains.forget(replaced);
    cache.table = kept;
    return translationOf(kept);
  }

  const parts = newParts();
  const reports = new Map<string, IngressReport>();
  const claimers = new Map<string, number[]>();
  for (let index = 0; index < mains.length; index++) {
    for (const host of (claims[index] as AgedClaim).hosts) {
      const list = claimers.get(host) ?? [];
      claimers.set(host, list);
      list.push(index);
    }
    const report = translateMain(
      index,
      mains[index] as V1Ingress,
      claims[index] as AgedClaim,
      owners,
      input,
      cache,
      parts,
    );
    reports.set(`${report.namespace}/${report.name}`, report);
  }
  // Then the canaries: each splits main paths claimed above, never claims one (canary.ts).
  const canaryOutcomes: BuildOutcome[] = [];
  const canaryHosts = new Set<string>();
  for (const ingress of canaries) {
    const { namespace, name, id } = ageOf(ingress);
    const report: IngressReport = { namespace, name, problems: [], warnings: [], notices: [], served: false };
    reports.set(id, report);
    for (const host of hostClaim(ingress).hosts) canaryHosts.add(host);
    const outcome = cache.canaries.get(ingress, input, (read) => builtOf(canaryBackendOnly(ingress), read));
    canaryOutcomes.push(outcome);
    tell(report, outcome.told);
    if (outcome.built !== null)
      applyCanary(ingress, outcome.built.paths, parts.hosts, parts.claimed, claimKey, report, cache.splits);
  }
  // What each Ingress is told must be what its paths enforce: checked on the table just built.
  const hosts = [...parts.hosts.values()];
  ingressAnnotationsInForce(mains, hosts, reports, cache.inForce);
  cache.mains.end();
  cache.canaries.end();
  const table: Table = {
    services: input.services,
    secrets: input.secrets,
    oidcProviders: input.oidcProviders === undefined ? undefined : [...input.oidcProviders],
    owners,
    mains,
    claims,
    claimers,
    canaries,
    canaryOutcomes,
    canaryHosts,
    hosts,
    hostFirst: hosts.map((host) => parts.first.get(host.name) as Place),
    certificates: parts.certificates,
    certificateOwners: parts.certificateOwners,
    reports,
  };
  // Two objects of one name (a namespace watched twice) share a report: nothing to build on then.
  if (reports.size === mains.length + canaries.length) cache.table = table;
  return translationOf(table);
}

/** Where a host (or a certificate) entered the table: its Ingress's index, then its path's. */
type Place = readonly [index: number, at: number];
const before = (a: Place, b: Place) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

/**
 * A translation with what lets the next one redo only the Ingresses an edit touched (retranslate):
 * the inputs it was made from, the main Ingresses naming each host, where each host and certificate
 * came from, and the reports.
 */
interface Table {
  services: ReadonlyMap<string, V1Service>;
  secrets: ReadonlyMap<string, V1Secret>;
  oidcProviders: readonly string[] | undefined;
  owners: ReadonlyMap<string, HostOwner>;
  mains: readonly V1Ingress[];
  claims: readonly AgedClaim[];
  /** By host: the indices (in `mains`) of the main Ingresses naming it, ascending. */
  claimers: ReadonlyMap<string, readonly number[]>;
  canaries: readonly V1Ingress[];
  canaryOutcomes: readonly BuildOutcome[];
  /** Every host a canary names: a change there is translated in full. */
  canaryHosts: ReadonlySet<string>;
  /** In table order, which is the order of their first path (`hostFirst`). */
  hosts: readonly HostConfig[];
  hostFirst: readonly Place[];
  certificates: readonly IngressCertificate[];
  /** The index (in `mains`) of each certificate's Ingress: certificates are in that order. */
  certificateOwners: readonly number[];
  reports: ReadonlyMap<string, IngressReport>;
}

/** The translation a table holds (lists copied: the table is built on again). */
function translationOf(table: Table): IngressTranslation {
  return {
    hosts: [...table.hosts],
    certificates: [...table.certificates],
    reports: table.reports,
    claims: [...table.claims],
  };
}

/** What the main Ingresses' step builds: the path claims, the hosts and certificates, and where each came from. */
interface Parts {
  claimed: Map<string, string>;
  hosts: Map<string, HostConfig>;
  first: Map<string, Place>;
  certificates: IngressCertificate[];
  certificateOwners: number[];
}

function newParts(): Parts {
  return { claimed: new Map(), hosts: new Map(), first: new Map(), certificates: [], certificateOwners: [] };
}

/** One main Ingress (the `index`th oldest) into `parts`: its report. */
function translateMain(
  index: number,
  ingress: V1Ingress,
  claim: AgedClaim,
  owners: ReadonlyMap<string, HostOwner>,
  input: IngressInput,
  cache: IngressTranslationCache,
  parts: Parts,
): IngressReport {
  const { namespace, name, id } = ageOf(ingress);
  const report: IngressReport = { namespace, name, problems: [], warnings: [], notices: [], served: false };
  // A host it does not own leaves the whole Ingress out (docs/ingress.md#host-ownership).
  let foreign = false;
  for (const host of claim.hosts) {
    const problem = hostOwnershipProblem(host, owners.get(host), namespace);
    if (problem === null) continue;
    report.problems.push(problem);
    foreign = true;
  }
  if (foreign) return report;
  const { built, told } = cache.mains.get(ingress, input, (read) => builtOf(ingress, read));
  tell(report, told);
  if (built === null) return report;
  const servedHosts = new Set<string>();
  for (let at = 0; at < built.paths.length; at++) {
    const [host, path] = built.paths[at] as [string, PathConfig];
    const key = built.keys[at] as string;
    const owner = parts.claimed.get(key);
    if (owner !== undefined) {
      const where = `${host === DEFAULT_HOST ? '(no host)' : host} ${path.prefix}${path.exact ? ' (Exact)' : ''}`;
      report.problems.push(
        owner === id
          ? `${where} collides with another path of this Ingress (the same route once normalised): the first is served`
          : `${where} is already served by the older Ingress ${owner}`,
      );
      continue;
    }
    parts.claimed.set(key, id);
    let hostConfig = parts.hosts.get(host);
    if (hostConfig === undefined) {
      hostConfig = { name: host, paths: [] };
      parts.hosts.set(host, hostConfig);
      parts.first.set(host, [index, at]);
    }
    hostConfig.paths.push(path);
    report.served = true;
    servedHosts.add(host);
  }
  if (built.certificates.length > 0)
    for (const certificate of ownCertificates(built.certificates, servedHosts, report)) {
      parts.certificates.push(certificate);
      parts.certificateOwners.push(index);
    }
  return report;
}

/**
 * The translation redone for what changed since `table`, or null when it must be made in full. It
 * applies when the owners of every host, the Service and Secret maps (the same objects) and the OpenID
 * providers are unchanged, and no canary changed: then only main Ingresses replaced by a newer object
 * or whose build asked Tollgate's listeners and answers otherwise now can change, and with them the
 * hosts they name. Those hosts, with every main Ingress naming one (and the hosts those name, until
 * none is added), are translated again as in a full translation; every other host, certificate and
 * report is the last one. A host a canary names takes the full translation.
 */
function retranslate(
  table: Table,
  input: IngressInput,
  cache: IngressTranslationCache,
  {
    mains,
    canaries,
    claims,
  }: { mains: readonly V1Ingress[]; canaries: readonly V1Ingress[]; claims: readonly AgedClaim[] },
  owners: ReadonlyMap<string, HostOwner>,
  carried: ReadonlySet<V1Ingress>,
): Table | null {
  if (
    owners !== table.owners ||
    input.services !== table.services ||
    input.secrets !== table.secrets ||
    !sameNames(input.oidcProviders, table.oidcProviders) ||
    mains.length !== table.mains.length ||
    canaries.length !== table.canaries.length
  )
    return null;
  for (let index = 0; index < canaries.length; index++) {
    const ingress = canaries[index] as V1Ingress;
    if (ingress !== table.canaries[index] && !carried.has(ingress)) return null;
    const outcome = cache.canaries.get(ingress, input, (read) => builtOf(canaryBackendOnly(ingress), read));
    if (outcome !== table.canaryOutcomes[index]) return null;
  }
  const changed: number[] = [];
  for (let index = 0; index < mains.length; index++)
    if (mains[index] !== table.mains[index] && !carried.has(mains[index] as V1Ingress)) changed.push(index);
  for (const ingress of cache.mains.askingListeners()) {
    const index = mains.indexOf(ingress);
    if (index < 0 || changed.includes(index)) continue;
    const kept = cache.mains.peek(ingress);
    if (cache.mains.get(ingress, input, (read) => builtOf(ingress, read)) !== kept) changed.push(index);
  }
  if (changed.length === 0) return { ...table, mains, claims };

  // The Ingresses to translate again: the changed ones and every one sharing a host with them.
  const members = new Set<number>();
  const touched = new Set<string>();
  while (changed.length > 0) {
    const index = changed.pop() as number;
    if (members.has(index)) continue;
    members.add(index);
    for (const host of (claims[index] as AgedClaim).hosts) {
      if (touched.has(host)) continue;
      if (table.canaryHosts.has(host)) return null;
      touched.add(host);
      for (const other of table.claimers.get(host) ?? []) if (!members.has(other)) changed.push(other);
    }
  }
  const order = [...members].sort((a, b) => a - b);
  const parts = newParts();
  const reports = new Map(table.reports);
  for (const index of order) {
    const report = translateMain(
      index,
      mains[index] as V1Ingress,
      claims[index] as AgedClaim,
      owners,
      input,
      cache,
      parts,
    );
    reports.set(`${report.namespace}/${report.name}`, report);
  }
  const fresh = [...parts.hosts.values()];
  ingressAnnotationsInForce(
    order.map((index) => mains[index] as V1Ingress),
    fresh,
    reports,
    cache.inForce,
  );

  // Merged in table order: the hosts the redone Ingresses serve where their first path places them.
  const hosts: HostConfig[] = [];
  const hostFirst: Place[] = [];
  const freshFirst = fresh.map((host) => parts.first.get(host.name) as Place);
  let next = 0;
  for (let index = 0; index < table.hosts.length; index++) {
    const host = table.hosts[index] as HostConfig;
    if (touched.has(host.name)) continue;
    const place = table.hostFirst[index] as Place;
    while (next < fresh.length && before(freshFirst[next] as Place, place)) {
      hosts.push(fresh[next] as HostConfig);
      hostFirst.push(freshFirst[next] as Place);
      next++;
    }
    hosts.push(host);
    hostFirst.push(place);
  }
  for (; next < fresh.length; next++) {
    hosts.push(fresh[next] as HostConfig);
    hostFirst.push(freshFirst[next] as Place);
  }
  // Certificates in the order of their Ingresses, the redone ones' in their place.
  const certificates: IngressCertificate[] = [];
  const certificateOwners: number[] = [];
  let fresher = 0;
  for (let index = 0; index < table.certificates.length; index++) {
    const owner = table.certificateOwners[index] as number;
    if (members.has(owner)) continue;
    while (fresher < parts.certificates.length && (parts.certificateOwners[fresher] as number) < owner) {
      certificates.push(parts.certificates[fresher] as IngressCertificate);
      certificateOwners.push(parts.certificateOwners[fresher] as number);
      fresher++;
    }
    certificates.push(table.certificates[index] as IngressCertificate);
    certificateOwners.push(owner);
  }
  for (; fresher < parts.certificates.length; fresher++) {
    certificates.push(parts.certificates[fresher] as IngressCertificate);
    certificateOwners.push(parts.certificateOwners[fresher] as number);
  }
  return { ...table, mains, claims, hosts, hostFirst, certificates, certificateOwners, reports };
}

/** What one Ingress's build says of it, apart from its report so that a build can be reused. */
interface Told {
  namespace: string;
  name: string;
  problems: string[];
  warnings: string[];
  notices: IngressNotice[];
}

/** One Ingress's build and what it told: what the cache keeps per Ingress. */
interface BuildOutcome {
  built: BuiltIngress | null;
  told: Told;
}

function builtOf(ingress: V1Ingress, input: BuildInput): BuildOutcome {
  const told: Told = {
    namespace: ingress.metadata?.namespace ?? 'default',
    name: ingress.metadata?.name ?? '',
    problems: [],
    warnings: [],
    notices: [],
  };
  return { built: buildIngress(ingress, input, told), told };
}

/** Copies what a build told into this translation's report (later steps add to the report). */
function tell(report: IngressReport, told: Told): void {
  if (told.problems.length > 0) report.problems.push(...told.problems);
  if (told.warnings.length > 0) report.warnings.push(...told.warnings);
  if (told.notices.length > 0) report.notices.push(...told.notices);
}

/**
 * An Ingress's certificates narrowed to the hosts it serves paths on (and so owns): a Secret never
 * claims SNI for another's host (docs/ingress.md#tls). A listed host left out is reported.
 */
function ownCertificates(
  certificates: readonly IngressCertificate[],
  servedHosts: ReadonlySet<string>,
  report: IngressReport,
): IngressCertificate[] {
  const kept: IngressCertificate[] = [];
  for (const certificate of certificates) {
    const served = certificateHosts(certificate.hosts, servedHosts);
    if (certificate.listed)
      for (const host of certificate.hosts.filter((listed) => !served.includes(listed)))
        report.notices.push({
          reason: 'TLSHostNotServed',
          message: `spec.tls: ${certificate.secret} is not served for ${host}: this Ingress serves no path there`,
        });
    if (served.length > 0) kept.push({ ...certificate, hosts: served });
  }
  return kept;
}

/** Claims read once per Ingress object. */
const claimOf = new WeakMap<V1Ingress, AgedClaim>();

/** The hosts an Ingress names: its rules' (a rule without host and defaultBackend name `DEFAULT`). */
function hostClaim(ingress: V1Ingress): AgedClaim {
  let claim = claimOf.get(ingress);
  if (claim === undefined) {
    claim = hostClaimAnew(ingress);
    claimOf.set(ingress, claim);
  }
  return claim;
}

function hostClaimAnew(ingress: V1Ingress): AgedClaim {
  const namespace = ingress.metadata?.namespace ?? 'default';
  const hosts = new Set<string>();
  for (const rule of ingress.spec?.rules ?? []) {
    if (rule.host === undefined || rule.host === '') hosts.add(DEFAULT_HOST);
    else {
      const key = hostKey(rule.host);
      if (key.ok) hosts.add(key.value);
    }
  }
  if (ingress.spec?.defaultBackend) hosts.add(DEFAULT_HOST);
  return {
    namespace,
    ingress: `${namespace}/${ingress.metadata?.name ?? ''}`,
    hosts: [...hosts],
    created: ageOf(ingress).time,
  };
}

interface BuiltIngress {
  paths: Array<[host: string, path: PathConfig]>;
  /** Each path's key in the conflict rules (claimKey), by index. */
  keys: string[];
  certificates: IngressCertificate[];
}

/**
 * One Ingress's paths, or null (after reporting why) when it cannot be served at all. It reads the
 * translation's input only through `input` (BuildInput: what the cache records), and writes nothing
 * but what it returns and `report`.
 */
function buildIngress(ingress: V1Ingress, input: BuildInput, report: Told): BuiltIngress | null {
  const namespace = report.namespace;
  const origin = `ingress/${namespace}/${report.name}`;
  const annotations = readAnnotations(ingress.metadata?.annotations);
  report.warnings.push(...annotations.warnings);
  const problems = [...annotations.problems];
  const settings = annotations.settings;

  // TLS: the Secrets must exist and be usable; their hosts redirect plain HTTP unless told not to.
  const certificates: IngressCertificate[] = [];
  const tlsHosts = new Set<string>();
  for (const [index, tls] of (ingress.spec?.tls ?? []).entries()) {
    const hostsOfEntry: string[] = [];
    for (const host of tls.hosts ?? []) {
      const key = hostKey(host);
      if (key.ok) hostsOfEntry.push(key.value);
      else problems.push(`spec.tls[${index}].hosts: '${host}' ${key.reason}`);
    }
    for (const host of hostsOfEntry) tlsHosts.add(host);
    if (!tls.secretName) {
      problems.push(`spec.tls[${index}] names no secretName (a default certificate is not offered)`);
      continue;
    }
    const secret = input.secrets.get(`${namespace}/${tls.secretName}`);
    const pair = secret === undefined ? null : tlsPair(secret);
    if (secret === undefined) problems.push(`TLS Secret ${namespace}/${tls.secretName} does not exist`);
    else if (typeof pair === 'string') problems.push(`TLS Secret ${namespace}/${tls.secretName}: ${pair}`);
    else if (pair !== null) {
      const listed = hostsOfEntry.length > 0;
      const hosts = listed ? hostsOfEntry : certificateNames(new X509Certificate(pair.certificate));
      certificates.push({ secret: `${namespace}/${tls.secretName}`, hosts, listed, ...pair });
    }
  }

  const auth = authorizationOf(settings, namespace, input);
  report.notices.push(...auth.warnings.map((message) => ({ reason: 'WeakPasswordHash' as const, message })));
  // Upstream protocol and TLS, timeouts, Host, redirects (backend.ts).
  const backendPolicies = backendPoliciesOf(settings, namespace, input.secrets);
  report.warnings.push(...backendPolicies.warnings);
  report.notices.push(...backendPolicies.notices);
  problems.push(...backendPolicies.problems);
  // auth-tls-*: a check on the Ingress's TLS hosts, and what its paths carry of it.
  const clients = clientCertificatesOf(
    settings,
    namespace,
    `${namespace}/${report.name}`,
    input.secrets,
    settings.authType !== undefined,
  );
  report.warnings.push(...clients.warnings);
  const closed = [
    ...annotations.authProblems,
    ...auth.problems,
    ...clients.problems,
    ...closingPolicyProblems(settings),
  ];
  if (clients.check !== null)
    for (const certificate of certificates) certificate.clientCertificates = clients.check;

  // The allow-* annotations narrow the policy (sources/kubernetes/ingress/oidc-annotations.ts).
  const allowed = withAllowAnnotations(clients.policy ?? auth.policy, settings);
  if (allowed.problem !== undefined) closed.push(allowed.problem);
  // auth-tls-match-cn's rule joins them (withAllowAnnotations writes the allow-* rules alone).
  const commonNames = clients.policy?.allow?.commonNames ?? null;
  if (commonNames !== null && allowed.policy !== null)
    allowed.policy = {
      ...allowed.policy,
      allow: {
        ...(allowed.policy.allow ?? {
          subjects: null,
          emails: null,
          emailDomains: null,
          groups: null,
          claims: null,
        }),
        commonNames,
      },
    };

  const paths: Array<[string, PathConfig]> = [];
  const missingBackends: string[] = [];
  const pathOf = (host: string, path: string, exact: boolean, backend: V1IngressBackend, where: string) => {
    // Request policies (docs/ingress.md#request-policies); a regex path is routed by its literal start.
    const policy = policiesOf(settings, path);
    if (!policy.ok) {
      for (const problem of policy.problems) if (!problems.includes(problem)) problems.push(problem);
      return;
    }
    const prefix = exact ? exactPath(policy.routeKey) : normalisePrefix(policy.routeKey);
    if (!prefix.ok) {
      problems.push(`${where}.path '${path}' ${prefix.reason}`);
      return;
    }
    const servers = backendOf(backend, namespace, input.services, where, problems, missingBackends);
    if (servers === undefined) return;
    const toHttps =
      settings.forceToHttps === true ||
      (tlsHosts.has(host) && settings.toHttps !== false) ||
      settings.toHttps === true;
    paths.push([
      host,
      pathConfig(prefix.value, {
        service: servers,
        toHttps,
        authorization: allowed.policy,
        rateLimit: settings.rateLimit ?? null,
        exact,
        unavailable: closed.length > 0 ? closed.join('; ') : null,
        stickySessions: stickyOf(settings.sticky),
        origin,
        requestHeaders: settings.requestHeaders ?? null,
        responseHeaders: settings.responseHeaders ?? null,
        // A closed path answers 503 whatever else it says; its policies may not even compile.
        ...(policy.policies && closed.length === 0 ? { policies: policy.policies } : {}),
        ...backendPolicies.path,
      }),
    ]);
  };

  for (const [ruleIndex, rule] of (ingress.spec?.rules ?? []).entries()) {
    const where = `spec.rules[${ruleIndex}]`;
    const key =
      rule.host === undefined || rule.host === ''
        ? ({ ok: true, value: DEFAULT_HOST } as const)
        : hostKey(rule.host);
    if (!key.ok) {
      problems.push(`${where}.host '${rule.host}' ${key.reason}`);
      continue;
    }
    const rulePaths = rule.http?.paths ?? [];
    for (const [pathIndex, item] of rulePaths.entries()) {
      const at = `${where}.http.paths[${pathIndex}]`;
      const type = item.pathType;
      if (type !== 'Prefix' && type !== 'Exact' && type !== 'ImplementationSpecific') {
        problems.push(`${at}.pathType '${type}' is not Prefix, Exact or ImplementationSpecific`);
        continue;
      }
      // ImplementationSpecific is read as Prefix; it alone may leave the path out (= '/').
      const path = item.path ?? (type === 'ImplementationSpecific' ? '/' : undefined);
      if (path === undefined) {
        problems.push(`${at}.path is required for pathType ${type}`);
        continue;
      }
      pathOf(key.value, path, type === 'Exact', item.backend, at);
    }
  }
  const fallback = ingress.spec?.defaultBackend;
  if (fallback) pathOf(DEFAULT_HOST, '/', false, fallback, 'spec.defaultBackend');
  if (paths.length === 0 && problems.length === 0) problems.push('it has no rule and no defaultBackend');

  if (problems.length > 0) {
    report.problems.push(...problems, ...closed);
    return null;
  }
  report.problems.push(...closed);
  report.notices.push(...missingBackends.map((message) => ({ reason: 'BackendNotFound' as const, message })));
  return { paths, keys: paths.map(([host, path]) => claimKey(host, path)), certificates };
}

/** Host key of an Ingress host: a wildcard is refused (routing matches whole host names). */
function hostKey(host: string): { ok: true; value: string } | { ok: false; reason: string } {
  if (host.startsWith('*.'))
    return { ok: false, reason: 'is a wildcard host, which Tollgate does not route' };
  return normaliseHostKey(host);
}

/** An Exact path: the prefix form, keeping a trailing slash (`/a/` is not `/a`). */
function exactPath(path: string): { ok: true; value: string } | { ok: false; reason: string } {
  const prefix = normalisePrefix(path);
  if (!prefix.ok || prefix.value === '/' || !path.endsWith('/')) return prefix;
  return { ok: true, value: `${prefix.value}/` };
}

/**
 * The Service reference of a backend, mapping the Service's port (as Kubernetes means it) to the
 * name the EndpointSlice controller gives that port on every slice ('' for a Service's only,
 * unnamed port). null: the Service or its port does not exist (yet): the path answers 503
 * `no_ready_endpoints` until it does. undefined: the backend cannot be served (reported).
 */
function backendOf(
  backend: V1IngressBackend,
  namespace: string,
  services: ReadonlyMap<string, V1Service>,
  where: string,
  problems: string[],
  warnings: string[],
): ServiceRef | null | undefined {
  // The field of the backend itself: a path's `backend`, or `spec.defaultBackend`, which is one.
  const field = where === 'spec.defaultBackend' ? where : `${where}.backend`;
  if (backend.resource !== undefined) {
    problems.push(`${field}: resource backends are not supported (name a Service)`);
    return undefined;
  }
  const service = backend.service;
  if (service === undefined || !service.name) {
    problems.push(`${field} names no Service`);
    return undefined;
  }
  const wanted = service.port?.number ?? service.port?.name;
  if (wanted === undefined) {
    problems.push(`${field}.service.port needs a number or a name`);
    return undefined;
  }
  const object = services.get(`${namespace}/${service.name}`);
  if (object === undefined) {
    warnings.push(`Service ${namespace}/${service.name} does not exist: ${where} answers 503`);
    return null;
  }
  if (object.spec?.type === 'ExternalName') {
    problems.push(`${where}: Service ${service.name} is an ExternalName Service, which is not supported`);
    return undefined;
  }
  const port = (object.spec?.ports ?? []).find((candidate) =>
    typeof wanted === 'number' ? candidate.port === wanted : candidate.name === wanted,
  );
  if (port === undefined) {
    warnings.push(`Service ${namespace}/${service.name} has no port ${wanted}: ${where} answers 503`);
    return null;
  }
  return { name: service.name, namespace, port: port.name ?? '' };
}

interface AuthOutcome {
  policy: AuthorizationConfig | null;
  problems: string[];
  warnings: string[];
}

/** The annotation a key of the policy shape comes from, for the Ingress's messages. */
const ANNOTATION_OF: Readonly<Record<string, string>> = {
  type: 'auth-type',
  realm: 'auth-realm',
  url: 'auth-url',
  auth_response_headers: 'auth-response-headers',
  signin_url: 'auth-signin',
  provider: 'tollgate.io/auth-oidc-provider',
};

/**
 * The policy the auth annotations ask for: the annotations in the policy shape (as a TollgatePolicy
 * writes it, the Secret by reference), read by the one policy reader (policy/authorization) with the
 * Ingress's own Secrets, Tollgate's ports and main.yaml's OpenID providers.
 */
function authorizationOf(
  settings: IngressSettings,
  namespace: string,
  input: Pick<BuildInput, 'secrets' | 'reachesTollgate' | 'oidcProviders'>,
): AuthOutcome {
  const outcome: AuthOutcome = { policy: null, problems: [], warnings: [] };
  const type = settings.authType;
  if (type === undefined) return outcome;
  const shape: Record<string, unknown> = { type };
  if (settings.authRealm !== undefined) shape.realm = settings.authRealm;
  if (type === 'forward') {
    if (settings.authUrl === undefined)
      return { ...outcome, problems: ['auth-type forward needs an auth-url'] };
    shape.url = settings.authUrl;
    if (settings.authResponseHeaders !== undefined)
      shape.auth_response_headers = settings.authResponseHeaders;
    if (settings.authSignin !== undefined) shape.signin_url = settings.authSignin;
  } else if (type === 'oidc') {
    if (settings.authOidcProvider === undefined)
      return { ...outcome, problems: ['auth-type oidc needs tollgate.io/auth-oidc-provider'] };
    shape.provider = settings.authOidcProvider;
  } else if (type === 'basic' || type === 'apikey') {
    if (settings.authSecret === undefined)
      return { ...outcome, problems: [`auth-type ${type} needs an auth-secret`] };
    const [first, second] = settings.authSecret.split('/');
    const secretRef = second === undefined ? { name: first } : { name: second, namespace: first };
    shape[type] =
      type === 'basic' && settings.authSecretType !== undefined
        ? { secretRef, format: settings.authSecretType }
        : { secretRef };
  }
  const r = new PlainReader();
  outcome.policy = readAuthorization(r, r.root('authorization', shape), {
    oidcProviders: input.oidcProviders,
    kubernetes: {
      reachesTollgate: input.reachesTollgate,
      secret: (ref) => {
        // Another namespace's Secret is never read (secretsOf does not even watch it).
        if (ref.namespace !== undefined && ref.namespace !== namespace)
          return {
            problem: `auth-secret ${settings.authSecret} is in another namespace (only the Ingress's own is read)`,
          };
        const key = `${namespace}/${ref.name}`;
        const secret = input.secrets.get(key);
        if (secret === undefined) return { problem: `auth Secret ${key} does not exist` };
        return { data: decodeSecret(secret), name: `auth Secret ${key}` };
      },
    },
  });
  const say = (issue: PolicyIssue) => {
    const key = issue.place.segments[0];
    const annotation = typeof key === 'string' ? ANNOTATION_OF[key] : undefined;
    // Messages about the Secret name it already.
    return annotation === undefined ? issue.message : `${annotation} ${issue.message}`;
  };
  outcome.problems.push(...r.issues.map(say));
  outcome.warnings.push(...r.warnings.map(say));
  if (outcome.problems.length > 0) outcome.policy = null;
  return outcome;
}

function stickyOf(sticky: IngressSettings['sticky']): StickySessions | null {
  if (sticky === undefined || sticky === false) return null;
  return { maxAgeSeconds: sticky };
}
