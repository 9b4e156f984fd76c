import type { V1Ingress, V1IngressClass, V1Secret, V1Service } from '@kubernetes/client-node';
import type { HostConfig, UpstreamsConfig } from '../../../config/types.ts';
import type { ReachesTollgate } from '../../../policy/auth-url-guard.ts';
import type { AgedClaim } from '../ownership.ts';
import { readAnnotations } from './annotations.ts';
import { proxySslSecretKey } from './backend.ts';
import type { IngressCertificate } from './build.ts';
import { IngressTranslationCache } from './cache.ts';
import { ourClasses } from './classes.ts';
import { clientCaSecretKey } from './client-certificate-annotations.ts';
import type { IngressReport } from './reports.ts';
import { retranslate, type Table, tableAnew } from './table.ts';
import { sameDesired } from './translation-cache.ts';

/**
 * The Ingress translation (docs/ingress.md): Ingress objects into upstreams.yaml's terms. Its steps,
 * in the order translateIngresses runs them:
 * - classes.ts: which Ingresses are ours (docs/ingress.md#which-ingresses);
 * - claims.ts: their age and the hosts each names, what conflicts are decided by (cache.ts keeps
 *   the order they give from one translation to the next);
 * - build.ts: one Ingress alone into its paths, certificates (IngressCertificate) and messages (its
 *   annotations read by annotations.ts, auth-annotations.ts and the other *-annotations.ts, backend.ts);
 * - table.ts: the builds assembled, host by host, oldest Ingress first
 *   (docs/ingress.md#host-ownership), then the canaries (canary.ts) and the check that every path
 *   enforces what its Ingress is told (annotations-in-force.ts); after an edit, redone only for the
 *   hosts it touched;
 * - cache.ts and translation-cache.ts: what is kept between translations, so that an edit costs the
 *   Ingresses it touched (docs/benchmark.md#control-plane-at-scale).
 * Here: the input and output shapes, the Secrets an Ingress reads (what the watches list) and
 * translateIngresses, which runs the steps.
 */

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

export interface IngressTranslation {
  /** Host configs to merge into upstreams.yaml's (kubernetes/merge.ts). */
  hosts: HostConfig[];
  certificates: IngressCertificate[];
  /** Every Ingress of ours, by `namespace/name`; a report (and this map) is never changed once returned. */
  reports: ReadonlyMap<string, IngressReport>;
  /** The hosts each Ingress of ours names, with its age: what Gateway API routes must respect. */
  claims?: AgedClaim[];
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
  const table = tableAnew(input, cache, { mains, canaries, claims }, owners);
  // Two objects of one name (a namespace watched twice) share a report: nothing to build on then.
  if (table.reports.size === mains.length + canaries.length) cache.table = table;
  return translationOf(table);
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
