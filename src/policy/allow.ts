import type { AllowRules, AuthMethod } from '../config/types.ts';
import type { PlainField as Field, PlainReader } from './plain-reader.ts';

/** The keys of an `authorization.allow` block (docs/authentication.md#who-may-pass). */
const ALLOW_KEYS = [
  'subjects',
  'emails',
  'email_domains',
  'groups',
  'claims',
  'uri_sans',
  'dns_sans',
] as const;
/** Rules on the connection's verified client certificate: any method can add them (auth/client-certificate). */
const CERTIFICATE_KEYS: ReadonlySet<string> = new Set(['uri_sans', 'dns_sans']);

/**
 * What each method can be matched on: basic users, API key names and forward-auth subjects are
 * only a name, so a rule on anything else could never pass and is refused rather than left to
 * lock everyone out at request time.
 */
const SUBJECT_ONLY: ReadonlySet<AuthMethod> = new Set([
  'basic',
  'apikey',
  'forward',
  'client_certificate',
  'ext_authz',
]);

/** `user@example.com`: exactly one `@`, something on both sides (multi-`@` addresses are refused). */
const EMAIL = /^[^@\s]+@[^@\s]+$/;
const DOMAIN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/;

/** Reads `allow` for a policy of `method`; null after reporting when it cannot be used. */
export function readAllowRules(r: PlainReader, field: Field, method: AuthMethod): AllowRules | null {
  const fields = r.fields(field.node, field.path, ALLOW_KEYS);
  if (fields === null) return null;
  if (fields.size === 0) {
    r.report(field.keyNode, field.path, 'is empty: list who may pass, or remove it');
    return null;
  }
  if (SUBJECT_ONLY.has(method)) {
    for (const [key, entry] of fields) {
      if (key !== 'subjects' && !CERTIFICATE_KEYS.has(key))
        r.report(
          entry.keyNode,
          entry.path,
          `${method} knows only the subject (a user or key name): use 'subjects', or a jwt/oidc method for '${key}'`,
        );
    }
  }
  const list = (key: string, check?: (value: string, item: Field) => string | undefined) => {
    const entry = fields.get(key);
    if (entry === undefined) return null;
    const values: string[] = [];
    for (const item of r.items(entry, 'a list of strings') ?? []) {
      const value = r.string(item);
      if (value === undefined) continue;
      const checked =
        check === undefined ? value : check(value, { ...entry, node: item.node, path: item.path });
      if (checked !== undefined) values.push(checked);
    }
    if (values.length === 0) r.report(entry.keyNode, entry.path, 'is empty: nobody could pass');
    return values;
  };
  const email = (value: string, item: Field) => {
    if (EMAIL.test(value)) return value.toLowerCase();
    r.report(item.node, item.path, `'${value}' is not an email address (one '@', nothing blank)`);
    return undefined;
  };
  const domain = (value: string, item: Field) => {
    const lower = value.toLowerCase().replace(/^@/, '');
    if (DOMAIN.test(lower)) return lower;
    r.report(item.node, item.path, `'${value}' is not a domain name (write example.com, no '@' or '*')`);
    return undefined;
  };
  return {
    subjects: list('subjects'),
    emails: list('emails', email),
    emailDomains: list('email_domains', domain),
    groups: list('groups'),
    claims: readClaims(r, fields.get('claims')),
    ...certificatePatterns(r, fields),
  };
}

/** `claims: {name: [values]}`: a claim's value (or one of its values, for an array) must be listed. */
function readClaims(r: PlainReader, field: Field | undefined): Record<string, string[]> | null {
  if (field === undefined) return null;
  const entries = r.entries(field.node, field.path);
  if (entries === null) return null;
  const claims: Record<string, string[]> = Object.create(null);
  for (const entry of entries) {
    const values: string[] = [];
    for (const item of r.items(entry, 'a list of values') ?? []) {
      const value = r.string(item);
      if (value !== undefined) values.push(value);
    }
    if (values.length === 0) r.report(entry.keyNode, entry.path, 'is empty: nobody could pass');
    claims[entry.key] = values;
  }
  if (entries.length === 0) r.report(field.keyNode, field.path, 'is empty: name a claim, or remove it');
  return claims;
}

/** `uri_sans` / `dns_sans`: patterns with `*` (auth/client-certificate sanPatternCheck). Only when set. */
function certificatePatterns(
  r: PlainReader,
  fields: Map<string, Field>,
): { uriSans?: string[]; dnsSans?: string[] } {
  const read = (key: string): string[] | undefined => {
    const entry = fields.get(key);
    if (entry === undefined) return undefined;
    const values: string[] = [];
    for (const item of r.items(entry, 'a list of patterns') ?? []) {
      const value = r.string(item);
      if (value === undefined) continue;
      if (/\s/.test(value)) r.report(item.node, item.path, `'${value}' holds a space: no SAN does`);
      else values.push(value);
    }
    if (values.length === 0) r.report(entry.keyNode, entry.path, 'is empty: nobody could pass');
    return values;
  };
  const uriSans = read('uri_sans');
  const dnsSans = read('dns_sans');
  return {
    ...(uriSans === undefined ? {} : { uriSans }),
    ...(dnsSans === undefined ? {} : { dnsSans: dnsSans.map((value) => value.toLowerCase()) }),
  };
}
