import type { AllowRules, AuthorizationConfig } from '../../../config/types.ts';

/**
 * The OpenID and allow-rule annotations (docs/ingress.md#annotations): `tollgate.io/auth-type: oidc`
 * with `tollgate.io/auth-oidc-provider`, and `tollgate.io/allow-subjects|allow-emails|
 * allow-email-domains|allow-groups` (comma lists) on any auth-type. Kept apart from annotations.ts
 * so the table there only gains the rows; what cannot be honoured closes the paths.
 */

const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const EMAIL = /^[^@\s,]+@[^@\s,]+$/;
const DOMAIN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/;

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

export const oidcProviderName = (value: string): Parsed<string> =>
  PROVIDER_NAME.test(value)
    ? { ok: true, value }
    : { ok: false, message: `'${value}' is not a provider name from main.yaml oidc_providers` };

/** A comma list, each entry checked by `valid` (lower-cased when `lower`). */
export const commaList =
  (valid: (entry: string) => boolean, what: string, lower = false) =>
  (value: string): Parsed<string[]> => {
    const entries = value
      .split(',')
      .map((entry) => (lower ? entry.trim().toLowerCase() : entry.trim()))
      .filter((entry) => entry !== '');
    if (entries.length === 0) return { ok: false, message: 'lists nobody: nobody could pass' };
    const wrong = entries.find((entry) => !valid(entry));
    if (wrong !== undefined) return { ok: false, message: `'${wrong}' is not ${what}` };
    return { ok: true, value: [...new Set(entries)] };
  };

export const subjectsList = commaList((entry) => entry.length <= 256, 'a subject');
export const emailsList = commaList((entry) => EMAIL.test(entry), 'an email address', true);
export const domainsList = commaList((entry) => DOMAIN.test(entry), 'a domain name', true);
export const groupsList = commaList((entry) => entry.length <= 256, 'a group');

/** What the annotations above fill in (a part of IngressSettings). */
export interface OidcIngressSettings {
  authOidcProvider?: string;
  allowSubjects?: string[];
  allowEmails?: string[];
  allowEmailDomains?: string[];
  allowGroups?: string[];
}

/**
 * The policy with the allow annotations applied, or the problem closing the paths: basic, apikey and
 * forward know only the subject, so emails, domains and groups on them could never pass.
 */
export function withAllowAnnotations(
  policy: AuthorizationConfig | null,
  settings: OidcIngressSettings,
): { policy: AuthorizationConfig | null; problem?: string } {
  const allow: AllowRules = {
    subjects: settings.allowSubjects ?? null,
    emails: settings.allowEmails ?? null,
    emailDomains: settings.allowEmailDomains ?? null,
    groups: settings.allowGroups ?? null,
    claims: null,
  };
  const any = allow.subjects ?? allow.emails ?? allow.emailDomains ?? allow.groups;
  if (any === null) return { policy };
  if (policy === null) return { policy, problem: 'allow-* annotations need an auth-type' };
  const subjectOnly = policy.type === 'basic' || policy.type === 'apikey' || policy.type === 'forward';
  if (subjectOnly && (allow.emails ?? allow.emailDomains ?? allow.groups) !== null)
    return { policy, problem: `auth-type ${policy.type} knows only the subject: use allow-subjects` };
  return { policy: { ...policy, allow } };
}
