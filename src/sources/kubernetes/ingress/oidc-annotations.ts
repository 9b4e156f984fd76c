import type { AuthorizationConfig } from '../../../config/types.ts';
import { readAllowRules } from '../../../policy/allow.ts';
import { PlainReader, type PolicyIssue } from '../../../policy/plain-reader.ts';

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
 * The policy with the allow annotations applied, or the problem closing the paths. The rules are
 * read by upstreams.yaml's own reader (policy/allow) for the policy's method: basic, apikey, forward
 * and client certificates know only the subject, so emails, domains and groups on them could never
 * pass.
 */
export function withAllowAnnotations(
  policy: AuthorizationConfig | null,
  settings: OidcIngressSettings,
): { policy: AuthorizationConfig | null; problem?: string } {
  const written: Array<[string, string[] | undefined]> = [
    ['subjects', settings.allowSubjects],
    ['emails', settings.allowEmails],
    ['email_domains', settings.allowEmailDomains],
    ['groups', settings.allowGroups],
  ];
  const shape = Object.fromEntries(written.filter(([, value]) => value !== undefined));
  if (Object.keys(shape).length === 0) return { policy };
  if (policy === null) return { policy, problem: 'allow-* annotations need an auth-type' };
  const r = new PlainReader();
  const allow = readAllowRules(r, r.root('allow', shape), policy.type);
  if (r.issues.length > 0 || allow === null) {
    const say = (issue: PolicyIssue) => {
      const key = issue.place.segments[0];
      return typeof key === 'string'
        ? `tollgate.io/allow-${key.replace('_', '-')}: ${issue.message}`
        : `allow-* annotations: ${issue.message}`;
    };
    return { policy, problem: r.issues.map(say).join('; ') };
  }
  return { policy: { ...policy, allow } };
}
