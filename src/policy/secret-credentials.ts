import type { BasicUser, NamedApiKey } from '../config/types.ts';
import type { PolicyContext } from './context.ts';
import { type ParsedCredentials, parseApiKeys, parseAuthMap, parseHtpasswd } from './credentials.ts';
import type { PlainField as Field, PlainReader } from './plain-reader.ts';

/** The forms a basic Secret may take: htpasswd lines under `auth` (default), or one key per user. */
const BASIC_FORMATS = ['auth-file', 'auth-map'] as const;

/**
 * The users (basic) or keys (apikey) of a Kubernetes object's policy, from the Secret its
 * `basic.secretRef` / `apikey.secretRef` names (docs/gateway-api.md#tollgatepolicy, docs/ingress.md):
 * htpasswd lines under `auth` (or, `format: auth-map`, one key per user) and `name:key` lines under
 * `keys`, parsed by credentials.ts. null after reporting; weak hashes are warnings.
 */
export function readSecretCredentials(
  r: PlainReader,
  parent: Field,
  fields: Map<string, Field>,
  type: 'basic' | 'apikey',
  context: PolicyContext,
): { users: BasicUser[]; keys: NamedApiKey[] } | null {
  const kubernetes = context.kubernetes;
  const holder = r.given(fields, type);
  if (kubernetes === undefined || holder === undefined) {
    r.report(
      parent.keyNode,
      parent.path,
      `${type} needs '${type}.secretRef': the Secret holding the ${type === 'basic' ? 'users' : 'keys'}`,
    );
    return null;
  }
  const held = r.fields(holder.node, holder.path, type === 'basic' ? ['secretRef', 'format'] : ['secretRef']);
  if (held === null) return null;
  const refField = r.given(held, 'secretRef');
  if (refField === undefined) {
    r.report(holder.keyNode, holder.path, "needs 'secretRef': the Secret to read");
    return null;
  }
  const ref = r.fields(refField.node, refField.path, ['name', 'namespace']);
  if (ref === null) return null;
  const nameField = r.given(ref, 'name');
  if (nameField === undefined) {
    r.report(refField.keyNode, refField.path, "needs 'name'");
    return null;
  }
  const name = r.string(nameField);
  const namespaceField = r.given(ref, 'namespace');
  const namespace = namespaceField === undefined ? undefined : r.string(namespaceField);
  const formatField = r.given(held, 'format');
  const format = formatField === undefined ? 'auth-file' : r.string(formatField);
  if (format !== undefined && !(BASIC_FORMATS as readonly string[]).includes(format) && formatField) {
    r.report(
      r.at(formatField),
      formatField.path,
      `unknown format '${format}' (expected auth-file or auth-map)`,
    );
    return null;
  }
  if (name === undefined || format === undefined || (namespaceField && namespace === undefined)) return null;
  const secret = kubernetes.secret(namespace === undefined ? { name } : { name, namespace });
  if ('problem' in secret) {
    r.report(r.at(refField), refField.path, secret.problem);
    return null;
  }
  const { data } = secret;
  let parsed: ParsedCredentials<BasicUser> | ParsedCredentials<NamedApiKey>;
  if (type === 'basic') {
    if (format === 'auth-map') parsed = parseAuthMap(data);
    else if (data.auth === undefined) parsed = missing("has no 'auth' key (htpasswd)");
    else parsed = parseHtpasswd(data.auth);
  } else
    parsed =
      data.keys === undefined ? missing("has no 'keys' key (name:key lines)") : parseApiKeys(data.keys);
  for (const problem of parsed.problems)
    r.report(r.at(refField), refField.path, `${secret.name}: ${problem}`);
  for (const warning of parsed.warnings) r.warn(r.at(refField), refField.path, `${secret.name}: ${warning}`);
  if (parsed.problems.length > 0) return null;
  return type === 'basic'
    ? { users: parsed.entries as BasicUser[], keys: [] }
    : { users: [], keys: parsed.entries as NamedApiKey[] };
}

function missing(problem: string): ParsedCredentials<never> {
  return { entries: [], problems: [problem], warnings: [] };
}
