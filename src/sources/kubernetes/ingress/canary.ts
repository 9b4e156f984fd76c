import type { V1Ingress } from '@kubernetes/client-node';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import { DEFAULT_HOST } from '../../../routing/normalise.ts';
import { type IngressSettings, NGINX_PREFIX, readAnnotations } from './annotations.ts';

/**
 * Canary Ingresses (docs/ingress.md#canary-ingresses): an Ingress annotated
 * `nginx.ingress.kubernetes.io/canary: "true"` owns no path. It splits the paths a main Ingress of
 * the same namespace already serves (same host, same path), sending a share of their requests (or
 * those a header or cookie picks) to its own Service. This is a separate step after the main
 * Ingresses claimed their paths, so the per-path conflict rule never sees a canary, and a host
 * ownership rule applies to it through the main Ingress it joins.
 */

export function isCanary(ingress: V1Ingress): boolean {
  return readAnnotations(ingress.metadata?.annotations).settings.canary === true;
}

/**
 * The canary Ingress as the common translation should build it (its host, paths and Service): its
 * other ingress-nginx annotations are the main Ingress's business and are left out (a warning says so).
 */
export function canaryBackendOnly(ingress: V1Ingress): V1Ingress {
  const annotations = Object.fromEntries(
    Object.entries(ingress.metadata?.annotations ?? {}).filter(
      ([name]) => !name.startsWith(NGINX_PREFIX) && !name.startsWith('tollgate.io/'),
    ),
  );
  return { ...ingress, metadata: { ...ingress.metadata, annotations } };
}

/** The annotations a canary Ingress honours; the main Ingress's settings apply for the rest. */
const CANARY_ANNOTATIONS = new Set(
  [
    'canary',
    'canary-weight',
    'canary-weight-total',
    'canary-by-header',
    'canary-by-header-value',
    'canary-by-cookie',
  ].map((name) => `${NGINX_PREFIX}${name}`),
);

export interface CanaryReport {
  problems: string[];
  warnings: string[];
  served: boolean;
}

/**
 * The main paths a canary split, as split last time: one canary's split of one main path is built
 * once, so an unchanged canary over an unchanged main path gives the same PathConfig object on every
 * translation (translation-cache.ts). Keyed by the main path; the entry says what the split was
 * made from.
 */
export type CanarySplits = WeakMap<
  PathConfig,
  { canaryPath: PathConfig; settings: IngressSettings; origin: string; split: PathConfig }
>;

/**
 * Adds one canary Ingress's split to the main paths it names. `paths` are the canary's own
 * (host, path) pairs as the common translation built them; `owners` maps a claimed host+path to the
 * Ingress (`namespace/name`) that serves it; `claimKey` is the conflict rule's key. A main path is
 * never changed: its copy with the split takes its place in its host's list (`splits`: the copies
 * made before, reused when made from the same paths and settings).
 */
export function applyCanary(
  ingress: V1Ingress,
  paths: ReadonlyArray<[host: string, path: PathConfig]>,
  hosts: ReadonlyMap<string, HostConfig>,
  owners: ReadonlyMap<string, string>,
  claimKey: (host: string, path: PathConfig) => string,
  report: CanaryReport,
  splits: CanarySplits = new WeakMap(),
): void {
  const namespace = ingress.metadata?.namespace ?? 'default';
  const origin = `ingress/${namespace}/${ingress.metadata?.name ?? ''}`;
  const annotations = ingress.metadata?.annotations ?? {};
  const settings: IngressSettings = readAnnotations(ingress.metadata?.annotations).settings;
  const ignored = Object.keys(annotations)
    .filter(
      (name) =>
        (name.startsWith(NGINX_PREFIX) || name.startsWith('tollgate.io/')) && !CANARY_ANNOTATIONS.has(name),
    )
    .sort();
  // A canary-* annotation not honoured is a canary setting Tollgate lacks, not the main Ingress's.
  const unsupported = ignored.filter((name) => name.startsWith(`${NGINX_PREFIX}canary`));
  const mains = ignored.filter((name) => !unsupported.includes(name));
  if (mains.length > 0)
    report.warnings.push(
      `on a canary Ingress ${mains.join(', ')} ignored: the main Ingress's settings apply`,
    );
  if (unsupported.length > 0)
    report.warnings.push(
      `on a canary Ingress ${unsupported.join(', ')} ignored: a canary setting Tollgate does not support; requests are split by the canary's other settings`,
    );
  const weightTotal = settings.canaryWeightTotal ?? 100;
  const weight = settings.canaryWeight ?? 0;
  if (weight > weightTotal) {
    report.problems.push(
      `${NGINX_PREFIX}canary-weight ${weight} is more than canary-weight-total ${weightTotal}`,
    );
    return;
  }
  if (settings.canaryByHeaderValue !== undefined && settings.canaryByHeader === undefined) {
    report.problems.push(`${NGINX_PREFIX}canary-by-header-value is set without canary-by-header`);
    return;
  }
  for (const [host, path] of paths) {
    const where = `${host === DEFAULT_HOST ? '(no host)' : host} ${path.prefix}${path.exact ? ' (Exact)' : ''}`;
    const key = claimKey(host, path);
    const owner = owners.get(key);
    const hostPaths = hosts.get(host)?.paths;
    const index = hostPaths?.findIndex((candidate) => claimKey(host, candidate) === key) ?? -1;
    const main = hostPaths?.[index];
    if (owner === undefined || hostPaths === undefined || main === undefined) {
      report.problems.push(`canary: no main Ingress serves ${where}`);
      continue;
    }
    if (!owner.startsWith(`${namespace}/`)) {
      report.problems.push(
        `canary: ${where} is served by ${owner}, of another namespace (a canary splits its own namespace's)`,
      );
      continue;
    }
    if (main.canary) {
      report.problems.push(
        `canary: ${where} is already split by ${main.canary.origin} (one canary per path)`,
      );
      continue;
    }
    const before = splits.get(main);
    const split =
      before !== undefined &&
      before.canaryPath === path &&
      before.settings === settings &&
      before.origin === origin
        ? before.split
        : {
            ...main,
            canary: {
              service: path.service,
              origin,
              weight,
              weightTotal,
              header: settings.canaryByHeader ?? null,
              headerValue: settings.canaryByHeaderValue ?? null,
              cookie: settings.canaryByCookie ?? null,
            },
          };
    splits.set(main, { canaryPath: path, settings, origin, split });
    hostPaths[index] = split;
    report.served = true;
  }
}
