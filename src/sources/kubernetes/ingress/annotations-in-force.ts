import type { V1Ingress } from '@kubernetes/client-node';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import { DEFAULT_HOST } from '../../../routing/normalise.ts';
import { readAnnotations } from './annotations.ts';

type Annotations = ReturnType<typeof readAnnotations>;

/** What one Ingress was told (translate.ts's IngressReport, the fields this check writes). */
interface Report {
  problems: string[];
}

/**
 * What an Ingress reports is what the table enforces (docs/ingress.md#when-something-is-wrong): after
 * each translation, every path of the table built is checked against its Ingress's annotations,
 * read again from the object: an auth-type means the path carries that method (and the allow-*
 * annotations their rules), a rate-limit that rate, an auth annotation that could not be honoured a
 * closed path. A path that does not is closed here (503 auth_misconfigured) and its Ingress reported
 * with the path named, so an Ingress is never reported fine while one of its paths is served
 * without its authentication. Mutates the table's paths (`unavailable`).
 */
export function ingressAnnotationsInForce(
  ingresses: readonly V1Ingress[],
  hosts: readonly HostConfig[],
  reports: ReadonlyMap<string, Report>,
): void {
  const byOrigin = new Map<string, { ingress: V1Ingress; annotations: Annotations }>();
  for (const ingress of ingresses)
    byOrigin.set(`ingress/${ingress.metadata?.namespace ?? 'default'}/${ingress.metadata?.name ?? ''}`, {
      ingress,
      annotations: readAnnotations(ingress.metadata?.annotations ?? {}),
    });
  for (const host of hosts) {
    for (const path of host.paths) {
      const found = byOrigin.get(path.origin ?? '');
      if (found === undefined) continue;
      const { ingress, annotations } = found;
      const problem = missingSetting(annotations, path);
      if (problem === null) continue;
      const where = `${host.name === DEFAULT_HOST ? '(no host)' : host.name} ${path.prefix}${path.exact ? ' (Exact)' : ''}`;
      path.unavailable = `the annotations of ${path.origin} are not in force on this path (${problem})`;
      reports
        .get(`${ingress.metadata?.namespace ?? 'default'}/${ingress.metadata?.name ?? ''}`)
        ?.problems.push(`${where}: ${problem}, so it answers 503`);
    }
  }
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
