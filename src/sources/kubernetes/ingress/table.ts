import type { V1Ingress, V1Secret, V1Service } from '@kubernetes/client-node';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import { DEFAULT_HOST } from '../../../routing/normalise.ts';
import { type AgedClaim, type HostOwner, hostOwnershipProblem } from '../ownership.ts';
import { type InForceChecks, ingressAnnotationsInForce } from './annotations-in-force.ts';
import { type BuildOutcome, builtOf, type IngressCertificate, ownCertificates, tell } from './build.ts';
import { applyCanary, type CanarySplits, canaryBackendOnly } from './canary.ts';
import { ageOf, claimKey, hostClaim } from './claims.ts';
import type { IngressReport } from './reports.ts';
import { type BuildInput, type IngressBuilds, sameNames } from './translation-cache.ts';

/**
 * The routes assembled from the builds of every Ingress of ours (docs/ingress.md#host-ownership):
 * main Ingresses oldest first, each host to its owner and each path to the oldest Ingress serving
 * it, then the canaries (canary.ts), then the check that each path enforces what its Ingress is
 * told (annotations-in-force.ts). Made in full (tableAnew) or, after an edit, redone only for the
 * hosts it touched (retranslate).
 */

/** What the table's steps keep across translations (IngressTranslationCache, cache.ts). */
export interface TableCaches {
  readonly mains: IngressBuilds<BuildOutcome>;
  readonly canaries: IngressBuilds<BuildOutcome>;
  readonly splits: CanarySplits;
  readonly inForce: InForceChecks;
}

/** Our Ingresses oldest first, as IngressTranslationCache.order gives them. */
export interface Ordered {
  mains: readonly V1Ingress[];
  canaries: readonly V1Ingress[];
  claims: readonly AgedClaim[];
}

/** Where a host (or a certificate) entered the table: its Ingress's index, then its path's. */
export type Place = readonly [index: number, at: number];
const before = (a: Place, b: Place) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

/**
 * A translation with what lets the next one redo only the Ingresses an edit touched (retranslate):
 * the inputs it was made from, the main Ingresses naming each host, where each host and certificate
 * came from, and the reports.
 */
export interface Table {
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
  input: BuildInput,
  cache: TableCaches,
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
 * The translation made in full from the Ingresses in order: every main Ingress, then every canary.
 * Ends the cache's translation (only the builds asked for are kept).
 */
export function tableAnew(
  input: BuildInput,
  cache: TableCaches,
  { mains, canaries, claims }: Ordered,
  owners: ReadonlyMap<string, HostOwner>,
): Table {
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
  return table;
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
export function retranslate(
  table: Table,
  input: BuildInput,
  cache: TableCaches,
  { mains, canaries, claims }: Ordered,
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
