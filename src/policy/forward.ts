import type { ForwardAuthSettings } from '../config/types.ts';
import { unconfigurableHeaderReason } from '../header-names.ts';
import { authUrlTargetProblem } from './auth-url-guard.ts';
import type { PolicyContext } from './context.ts';
import type { PlainField, PlainItem, PlainNode, PlainReader } from './plain-reader.ts';
import { signinUrlProblem } from './signin-url.ts';

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
/** The one forward-auth timeout default, whichever source wrote the policy (an Ingress has no key for it). */
export const DEFAULT_FORWARD_TIMEOUT_SECONDS = 5;
const MAX_TIMEOUT_SECONDS = 60;

/**
 * The `type: forward` settings. `creds`/`data` (Aralez spelling) is read as `url`. The header lists
 * may not name hop-by-hop headers or the ones Tollgate writes itself (X-Forwarded-*, X-Tollgate-*):
 * the check's own X-Forwarded-* values must be the ones the auth service sees, and a header copied
 * from its answer must never stand in for one Tollgate vouches for. From a Kubernetes object the URL
 * may not target Tollgate's pod itself (auth-url-guard.ts), checked once it is a valid URL.
 */
export function readForwardSettings(
  r: PlainReader,
  parent: PlainField,
  fields: Map<string, PlainField>,
  creds: PlainField | undefined,
  context: PolicyContext,
): ForwardAuthSettings | null {
  const get = (key: string): PlainField | undefined => r.given(fields, key);
  const urlField = get('url');
  if (urlField && creds) {
    r.report(creds.keyNode, creds.path, `'url' and '${creds.key}' are both set; keep 'url'`);
  }
  const chosen = urlField ?? creds;
  if (chosen === undefined) {
    r.report(parent.keyNode, parent.path, "forward needs 'url': the auth service to ask");
    return null;
  }
  let url = readHttpUrl(r, chosen);
  if (url !== undefined && context.kubernetes !== undefined) {
    const target = authUrlTargetProblem(url, context.kubernetes.reachesTollgate);
    if (target !== null) {
      r.report(r.at(chosen), chosen.path, `${target}: auth requests may not be sent there`);
      url = undefined;
    }
  }
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
          DEFAULT_FORWARD_TIMEOUT_SECONDS)
        : DEFAULT_FORWARD_TIMEOUT_SECONDS),
    signinUrl: signinUrl ?? null,
  };
  if (url === undefined || (signinField && signinUrl === undefined)) return null;
  if (subjectField && subjectHeader === undefined) return null;
  return settings;
}

/** An absolute http(s) URL without a fragment, as written. */
export function readHttpUrl(r: PlainReader, field: PlainField): string | undefined {
  const text = r.string(field);
  if (text === undefined) return undefined;
  const problem = httpUrlProblem(text);
  if (problem === null) return text;
  r.report(r.at(field), field.path, problem);
  return undefined;
}

/** Why `text` is not an absolute http(s) URL without a fragment, or null. */
export function httpUrlProblem(text: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    return 'must be an absolute http:// or https:// URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    return `must be an http:// or https:// URL, not ${parsed.protocol}`;
  if (parsed.hash !== '' || text.includes('#')) return 'must not have a #fragment';
  return null;
}

function readSigninUrl(r: PlainReader, field: PlainField): string | undefined {
  const text = r.string(field);
  if (text === undefined) return undefined;
  const problem = signinUrlProblem(text);
  if (problem === null) return text;
  r.report(r.at(field), field.path, problem);
  return undefined;
}

function readHeaderName(r: PlainReader, field: PlainField | PlainItem): string | undefined {
  const text = r.string(field);
  return text === undefined ? undefined : checkHeaderName(r, text, field.node, field.path);
}

function checkHeaderName(
  r: PlainReader,
  name: string,
  node: PlainNode | null,
  path: string,
): string | undefined {
  const problem = unconfigurableHeaderReason(name);
  if (problem !== null) {
    r.report(node, path, problem);
    return undefined;
  }
  return name.toLowerCase();
}

function readHeaderNames(r: PlainReader, field: PlainField): string[] {
  const names: string[] = [];
  for (const item of r.items(field, 'a list of header names') ?? []) {
    const name = readHeaderName(r, item);
    if (name === undefined) continue;
    if (names.includes(name)) r.report(item.node, item.path, `'${name}' is listed twice`);
    else names.push(name);
  }
  return names;
}
