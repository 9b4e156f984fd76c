import { unconfigurableHeaderReason } from '../header-names.ts';
import type { ForwardAuthSettings } from './types.ts';
import { readSigninUrl } from './validate-backend.ts';
import type { Field, Item, YamlReader } from './yaml-reader.ts';

/** Keys that only make sense with `type: forward` (docs/authentication.md#forward-auth). */
export const FORWARD_KEYS = [
  'url',
  'auth_request_headers',
  'auth_response_headers',
  'subject_header',
  'timeout_seconds',
  'signin_url',
] as const;

/** What the auth service sees of the client by default: its session cookie and credentials. */
export const DEFAULT_AUTH_REQUEST_HEADERS: readonly string[] = Object.freeze(['cookie', 'authorization']);
const DEFAULT_TIMEOUT_SECONDS = 5;
const MAX_TIMEOUT_SECONDS = 60;

/**
 * The `type: forward` settings. `creds`/`data` (Aralez spelling) is read as `url`. The header lists
 * may not name hop-by-hop headers or the ones Tollgate writes itself (X-Forwarded-*, X-Tollgate-*):
 * the check's own X-Forwarded-* values must be the ones the auth service sees, and a header copied
 * from its answer must never stand in for one Tollgate vouches for.
 */
export function readForwardSettings(
  r: YamlReader,
  parent: Field,
  fields: Map<string, Field>,
  creds: Field | undefined,
): ForwardAuthSettings | null {
  const get = (key: string): Field | undefined => r.given(fields, key);
  const urlField = get('url');
  if (urlField && creds) {
    r.report(creds.keyNode, creds.path, `'url' and '${creds.key}' are both set; keep 'url'`);
  }
  const chosen = urlField ?? creds;
  if (chosen === undefined) {
    r.report(parent.keyNode, parent.path, "forward needs 'url': the auth service to ask");
    return null;
  }
  const url = readHttpUrl(r, chosen);
  const signinField = get('signin_url');
  const signinUrl = signinField ? readSigninUrl(r, signinField) : null;
  const requestHeaders = get('auth_request_headers');
  const responseHeaders = get('auth_response_headers');
  const subjectField = get('subject_header');
  const timeoutField = get('timeout_seconds');
  const subjectHeader = subjectField ? readHeaderName(r, subjectField) : null;
  const settings: ForwardAuthSettings = {
    url: url ?? '',
    authRequestHeaders: requestHeaders
      ? readHeaderNames(r, requestHeaders)
      : [...DEFAULT_AUTH_REQUEST_HEADERS],
    authResponseHeaders: responseHeaders ? readHeaderNames(r, responseHeaders) : [],
    subjectHeader: subjectHeader ?? null,
    timeoutMs:
      1000 *
      (timeoutField
        ? (r.number(timeoutField, { min: 0, minExclusive: true, max: MAX_TIMEOUT_SECONDS }) ??
          DEFAULT_TIMEOUT_SECONDS)
        : DEFAULT_TIMEOUT_SECONDS),
    signinUrl: signinUrl ?? null,
  };
  if (url === undefined || (signinField && signinUrl === undefined)) return null;
  return settings;
}

/** An absolute http(s) URL without a fragment. */
export function readHttpUrl(r: YamlReader, field: Field): string | undefined {
  const text = r.string(field);
  if (text === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    r.report(r.at(field), field.path, 'must be an absolute http:// or https:// URL');
    return undefined;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    r.report(r.at(field), field.path, `must be an http:// or https:// URL, not ${parsed.protocol}`);
    return undefined;
  }
  if (parsed.hash !== '' || text.includes('#')) {
    r.report(r.at(field), field.path, 'must not have a #fragment');
    return undefined;
  }
  return text;
}

function readHeaderName(r: YamlReader, field: Field | Item): string | undefined {
  const text = r.string(field);
  return text === undefined ? undefined : checkHeaderName(r, text, field.node, field.path);
}

/** `name` in lower case when a config may name it, else undefined (reported at `node`). */
export function checkHeaderName(
  r: YamlReader,
  name: string,
  node: Field['node'],
  path: string,
): string | undefined {
  const problem = unconfigurableHeaderReason(name);
  if (problem !== null) {
    r.report(node, path, problem);
    return undefined;
  }
  return name.toLowerCase();
}

function readHeaderNames(r: YamlReader, field: Field): string[] {
  const names: string[] = [];
  for (const item of r.items(field, 'a list of header names') ?? []) {
    const name = readHeaderName(r, item);
    if (name === undefined) continue;
    if (names.includes(name)) r.report(item.node, item.path, `'${name}' is listed twice`);
    else names.push(name);
  }
  return names;
}
