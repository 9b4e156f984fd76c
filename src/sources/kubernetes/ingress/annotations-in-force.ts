import type { V1Ingress } from '@kubernetes/client-node';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import { DEFAULT_HOST } from '../../../routing/normalise.ts';
import { readAnnotations } from './annotations.ts';

type Annotations = ReturnType<typeof readAnnotations>;

/** What one Ingress was told (reports.ts's IngressReport, the fields this check writes). */
interface Report {
  problems: string[];
}

/**
 * The paths checked before (translation-cache.ts): a path object checked against the same reading
 * of its Ingress's annotations, on the same host, has the same outcome (the contract: a PathConfig
 * returned is never changed), so it is not checked again. `path`: what the table serves (the path
 * itself, or its closed copy); `problem`: what its Ingress is told, or null.
 */
export type InForceChecks = WeakMap<
  PathConfig,
  { annotations: Annotations; host: string; path: PathConfig; problem: string | null }
>;

/**
 * What an Ingress reports is what the table enforces (docs/ingress.md#when-something-is-wrong): after
 * each translation, every path of the table built is checked against its Ingress's annotations,
 * read again from the object: an auth-type means the path carries that method (and the allow-*
 * annotations their rules), a rate-limit that rate, an auth annotation that could not be honoured a
 * closed path. A path that does not is closed here (503 auth_misconfigured) and its Ingress reported
 * with the path named, so an Ingress is never reported fine while one of its paths is served
 * without its authentication. A path is never changed: its closed copy takes its place in the
 * host's list.
 */
export function ingressAnnotationsInForce(
  ingresses: readonly V1Ingress[],
  hosts: readonly HostConfig[],
  reports: ReadonlyMap<string, Report>,
  checked: InForceChecks = new WeakMap(),
): void {
  const byOrigin = new Map<string, { report: Report | undefined; annotations: Annotations }>();
  for (const ingress of ingresses) {
    const { id, origin } = namesOf(ingress);
    byOrigin.set(origin, {
      report: reports.get(id),
      annotations: readAnnotations(ingress.metadata?.annotations),
    });
  }
  for (const host of hosts) {
    for (let index = 0; index < host.paths.length; index++) {
      const path = host.paths[index] as PathConfig;
      const found = byOrigin.get(path.origin ?? '');
      if (found === undefined) continue;
      const { report, annotations } = found;
      const before = checked.get(path);
      const outcome =
        before !== undefined && before.annotations === annotations && before.host === host.name
          ? before
          : { annotations, host: host.name, ...closedIfMissing(annotations, host.name, path) };
      checked.set(path, outcome);
      if (outcome.problem === null) continue;
      host.paths[index] = outcome.path;
      report?.problems.push(outcome.problem);
    }
  }
}

/** An Ingress's `namespace/name` and the origin its paths carry, made once per object. */
const names = new WeakMap<V1Ingress, { id: string; origin: string }>();

function namesOf(ingress: V1Ingress): { id: string; origin: string } {
  let found = names.get(ingress);
  if (found === undefined) {
    const id = `${ingress.metadata?.namespace ?? 'default'}/${ingress.metadata?.name ?? ''}`;
    found = { id, origin: `ingress/${id}` };
    names.set(ingress, found);
  }
  return found;
}

/** The path as served (closed when it lacks its annotations), and what its Ingress is told. */
function closedIfMissing(
  annotations: Annotations,
  host: string,
  path: PathConfig,
): { path: PathConfig; problem: string | null } {
  const problem = missingSetting(annotations, path);
  if (problem === null) return { path, problem: null };
  const where = `${host === DEFAULT_HOST ? '(no host)' : host} ${path.prefix}${path.exact ? ' (Exact)' : ''}`;
  return {
    path: {
      ...path,
      unavailable: `the annotations of ${path.origin} are not in force on this path (${problem})`,
    },
    problem: `${where}: ${problem}, so it answers 503`,
  };
}

/** What the path lacks of its Ingress's annotations, or null when it carries them (or is closed). */
function missingSetting(annotations: Annotations, path: PathConfig): string | null {
  // A closed path answers 503 whatever it carries: nothing passes it unauthenticated.
  if (path.unavailable !== null && path.unavailable !== undefined) return null;
  const { settings, authProblems } = annotations;
  if (authProblems.length > 0)
    return `auth annotations that cannot be honoured (${authProblems[0]}) left it open`;
  if (settings.authType !== undefined && path.authorization?.type !== settings.authType)
    return `auth-type ${settings.authType} is not on it`;
  const allow =
    settings.allowSubjects ?? settings.allowEmails ?? settings.allowEmailDomains ?? settings.allowGroups;
  if (allow !== undefined && (path.authorization?.allow ?? null) === null)
    return 'its allow-* rules are not on it';
  // auth-tls-*: `on`, match-cn and pass-certificate live in the path's client_certificate policy.
  const tlsCheck =
    settings.authTlsSecret !== undefined &&
    settings.authTlsVerifyClient !== 'off' &&
    ((settings.authTlsVerifyClient ?? 'on') === 'on' ||
      settings.authTlsMatchCn !== undefined ||
      settings.authTlsPassCertificate === true);
  if (tlsCheck && path.authorization?.type !== 'client_certificate')
    return 'its auth-tls-* client-certificate check is not on it';
  if (settings.rateLimit !== undefined && path.rateLimit !== settings.rateLimit)
    return `rate-limit ${settings.rateLimit} is not on it`;
  return null;
}
