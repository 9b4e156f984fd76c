import type { HeaderOps } from '../../../config/types.ts';
import { unconfigurableHeaderReason } from '../../../header-names.ts';
import { realmProblem } from '../../../policy/authorization.ts';
import { BACKEND_ANNOTATIONS, type BackendSettings, signinUrl } from './backend-annotations.ts';
import {
  type ClientCertificateIngressSettings,
  errorPage,
  matchCn,
  secretName,
  verifyClient,
  verifyDepth,
} from './client-certificate-annotations.ts';
import {
  domainsList,
  emailsList,
  groupsList,
  type OidcIngressSettings,
  oidcProviderName,
  subjectsList,
} from './oidc-annotations.ts';
import { POLICY_ANNOTATIONS, type PolicySettings } from './policy-annotations.ts';

/**
 * The Ingress annotations Tollgate understands, as one table (docs/ingress.md#annotations): each
 * name, its validator and the setting it fills. `tollgate.io/…` and the ingress-nginx spellings of
 * the same setting read the same; an ingress-nginx annotation outside the table is never executed
 * (snippets above all) and only warned about, except one about authentication, which closes the
 * Ingress's paths: an auth rule Tollgate cannot honour must not leave the paths open.
 */

export const TOLLGATE_PREFIX = 'tollgate.io/';
export const NGINX_PREFIX = 'nginx.ingress.kubernetes.io/';

export type AuthKind = 'basic' | 'apikey' | 'jwt' | 'forward' | 'oidc';

/** What the annotations of one Ingress ask for. Absent = not set. */
export interface IngressSettings
  extends PolicySettings,
    BackendSettings,
    OidcIngressSettings,
    ClientCertificateIngressSettings {
  authType?: AuthKind;
  authSecret?: string;
  authSecretType?: 'auth-file' | 'auth-map';
  authRealm?: string;
  authUrl?: string;
  authResponseHeaders?: string[];
  authSignin?: string;
  rateLimit?: number;
  /** ssl-redirect: redirect plain HTTP on TLS hosts (the default there). */
  toHttps?: boolean;
  /** force-ssl-redirect: redirect plain HTTP even on hosts without TLS. */
  forceToHttps?: boolean;
  /** Cookie Max-Age in seconds, null for a session cookie, false for off. */
  sticky?: number | null | false;
  requestHeaders?: HeaderOps;
  responseHeaders?: HeaderOps;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

interface AnnotationSpec<K extends keyof IngressSettings> {
  target: K;
  /** Full annotation names meaning this setting. */
  names: string[];
  parse(value: string): Parsed<IngressSettings[K]>;
  /** Part of authentication: an unusable value closes the paths instead of leaving the Ingress out. */
  auth: boolean;
}

const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (message: string): Parsed<never> => ({ ok: false, message });

const SECRET_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?\/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

const bool = (value: string): Parsed<boolean> =>
  value === 'true' ? ok(true) : value === 'false' ? ok(false) : bad(`expected "true" or "false"`);

const url = (value: string): Parsed<string> => {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return bad('is not an absolute URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return bad('must be an http or https URL');
  // ingress-nginx rendered this into nginx.conf (CVE-2025-24514); here it is only ever a URL, but
  // characters that have no business in one are refused all the same.
  if (/[\s"'`${};\\]/.test(value)) return bad('contains characters a URL does not need');
  return ok(parsed.href);
};

const headerNames = (value: string): Parsed<string[]> => {
  const names = value
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.length === 0) return bad('lists no header');
  for (const name of names) {
    const problem = unconfigurableHeaderReason(name);
    if (problem !== null) return bad(problem);
  }
  return ok([...new Set(names.map((name) => name.toLowerCase()))]);
};

/** The same rules as upstreams.yaml's `request_headers` (docs/configuration.md#header-rules). */
const headerRule = (value: string): Parsed<HeaderOps> => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return bad('is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    return bad('must be a JSON object {"set": {…}, "add": {…}, "remove": […]}');
  const rule: HeaderOps = { set: [], add: [], remove: [] };
  for (const [key, item] of Object.entries(parsed)) {
    if (key === 'remove') {
      if (!Array.isArray(item) || item.some((name) => typeof name !== 'string'))
        return bad('"remove" must be a list of header names');
      for (const name of item as string[]) {
        const problem = unconfigurableHeaderReason(name);
        if (problem !== null) return bad(problem);
        rule.remove.push(name.toLowerCase());
      }
    } else if (key === 'set' || key === 'add') {
      if (typeof item !== 'object' || item === null || Array.isArray(item))
        return bad(`"${key}" must be an object of header names to values`);
      for (const [name, text] of Object.entries(item)) {
        const problem = unconfigurableHeaderReason(name);
        if (problem !== null) return bad(problem);
        // Visible ASCII and spaces only: what a header value may carry without surprises.
        if (typeof text !== 'string' || !/^[\x20-\x7e\t]*$/.test(text))
          return bad(`the value of '${name}' must be a one-line string of printable characters`);
        rule[key].push({ name: name.toLowerCase(), value: text });
      }
    } else return bad(`unknown member "${key}" (set, add, remove)`);
  }
  return ok(rule);
};

const positiveInteger = (value: string): Parsed<number> =>
  /^[1-9][0-9]{0,8}$/.test(value) ? ok(Number(value)) : bad('expected a whole number of requests per second');

function spec<K extends keyof IngressSettings>(
  target: K,
  names: string[],
  parse: (value: string) => Parsed<IngressSettings[K]>,
  auth = false,
): AnnotationSpec<K> {
  return { target, names, parse, auth };
}

/** Every annotation read, by setting. */
export const ANNOTATIONS: ReadonlyArray<AnnotationSpec<keyof IngressSettings>> = [
  spec(
    'authType',
    [`${TOLLGATE_PREFIX}auth-type`, `${NGINX_PREFIX}auth-type`],
    (value) => {
      const type = value === 'api' ? 'apikey' : value;
      if (type === 'basic' || type === 'apikey' || type === 'jwt' || type === 'forward' || type === 'oidc')
        return ok<AuthKind>(type);
      if (type === 'digest') return bad('digest authentication is not supported (use basic over TLS)');
      return bad(`'${value}' is not one of basic, apikey, jwt, forward, oidc`);
    },
    true,
  ),
  spec(
    'authSecret',
    [`${TOLLGATE_PREFIX}auth-secret`, `${NGINX_PREFIX}auth-secret`],
    (value) => (SECRET_NAME.test(value) ? ok(value) : bad(`'${value}' is not a Secret name`)),
    true,
  ),
  spec(
    'authSecretType',
    [`${TOLLGATE_PREFIX}auth-secret-type`, `${NGINX_PREFIX}auth-secret-type`],
    (value) =>
      value === 'auth-file' || value === 'auth-map'
        ? ok<'auth-file' | 'auth-map'>(value)
        : bad('expected auth-file or auth-map'),
    true,
  ),
  spec(
    'authRealm',
    [`${TOLLGATE_PREFIX}auth-realm`, `${NGINX_PREFIX}auth-realm`],
    // The policy reader's own check (policy/authorization), told here with the annotation's name.
    (value) => {
      const problem = realmProblem(value);
      return problem === null ? ok(value) : bad(problem);
    },
    true,
  ),
  spec('authUrl', [`${TOLLGATE_PREFIX}auth-url`, `${NGINX_PREFIX}auth-url`], url, true),
  spec(
    'authResponseHeaders',
    [`${TOLLGATE_PREFIX}auth-response-headers`, `${NGINX_PREFIX}auth-response-headers`],
    headerNames,
    true,
  ),
  spec('authSignin', [`${TOLLGATE_PREFIX}auth-signin`, `${NGINX_PREFIX}auth-signin`], signinUrl, true),
  // OpenID login and allow rules (sources/kubernetes/ingress/oidc-annotations.ts).
  spec('authOidcProvider', [`${TOLLGATE_PREFIX}auth-oidc-provider`], oidcProviderName, true),
  spec('allowSubjects', [`${TOLLGATE_PREFIX}allow-subjects`], subjectsList, true),
  spec('allowEmails', [`${TOLLGATE_PREFIX}allow-emails`], emailsList, true),
  spec('allowEmailDomains', [`${TOLLGATE_PREFIX}allow-email-domains`], domainsList, true),
  spec('allowGroups', [`${TOLLGATE_PREFIX}allow-groups`], groupsList, true),
  // Client certificates (sources/kubernetes/ingress/client-certificate-annotations.ts).
  spec('authTlsSecret', [`${NGINX_PREFIX}auth-tls-secret`], secretName, true),
  spec('authTlsVerifyClient', [`${NGINX_PREFIX}auth-tls-verify-client`], verifyClient, true),
  spec('authTlsVerifyDepth', [`${NGINX_PREFIX}auth-tls-verify-depth`], verifyDepth, true),
  spec('authTlsPassCertificate', [`${NGINX_PREFIX}auth-tls-pass-certificate-to-upstream`], bool, true),
  spec('authTlsMatchCn', [`${NGINX_PREFIX}auth-tls-match-cn`], matchCn, true),
  spec('authTlsErrorPage', [`${NGINX_PREFIX}auth-tls-error-page`], errorPage, true),
  spec('rateLimit', [`${TOLLGATE_PREFIX}rate-limit`, `${NGINX_PREFIX}limit-rps`], positiveInteger),
  spec('toHttps', [`${TOLLGATE_PREFIX}to-https`, `${NGINX_PREFIX}ssl-redirect`], bool),
  spec('forceToHttps', [`${NGINX_PREFIX}force-ssl-redirect`], bool),
  spec('sticky', [`${TOLLGATE_PREFIX}sticky-sessions`], (value) => {
    if (value === 'true') return ok(null);
    if (value === 'false') return ok<false>(false);
    return /^[1-9][0-9]{0,8}$/.test(value)
      ? ok(Number(value))
      : bad('expected "true", "false" or a cookie lifetime in seconds');
  }),
  spec('sticky', [`${NGINX_PREFIX}affinity`], (value) =>
    value === 'cookie' ? ok(null) : bad('only "cookie" affinity is supported'),
  ),
  spec('requestHeaders', [`${TOLLGATE_PREFIX}request-headers`], headerRule),
  spec('responseHeaders', [`${TOLLGATE_PREFIX}response-headers`], headerRule),
  // rewrite-target, proxy-body-size, cors-*, source ranges… (docs/ingress.md#request-policies)
  ...POLICY_ANNOTATIONS,
  ...(BACKEND_ANNOTATIONS as ReadonlyArray<AnnotationSpec<keyof IngressSettings>>),
];

const BY_NAME = new Map(ANNOTATIONS.flatMap((entry) => entry.names.map((name) => [name, entry] as const)));

export interface ReadAnnotations {
  readonly settings: IngressSettings;
  /** The Ingress cannot be served: left out. */
  readonly problems: readonly string[];
  /** Authentication was asked for and cannot be honoured: the paths answer 503. */
  readonly authProblems: readonly string[];
  readonly warnings: readonly string[];
}

/** Annotations objects as read: the watch never changes an object it handed over, it replaces it. */
const readBefore = new WeakMap<Readonly<Record<string, string>>, ReadAnnotations>();
/** What an Ingress without annotations reads as (one object, so its reading is kept too). */
const NO_ANNOTATIONS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * An Ingress's annotations, read through the table once per annotations object: the translation,
 * the canary step, the check of what is in force and the Secret watches all ask again for the same
 * Ingress, on every translation (docs/benchmark.md#control-plane-at-scale). The reading is frozen:
 * it is shared.
 */
export function readAnnotations(given: Readonly<Record<string, string>> | undefined): ReadAnnotations {
  const annotations = given ?? NO_ANNOTATIONS;
  const known = readBefore.get(annotations);
  if (known !== undefined) return known;
  const read = readAnnotationsAnew(annotations);
  Object.freeze(read.settings);
  Object.freeze(read.problems);
  Object.freeze(read.authProblems);
  Object.freeze(read.warnings);
  readBefore.set(annotations, Object.freeze(read));
  return read;
}

/** Reads an Ingress's annotations through the table. Pure. */
function readAnnotationsAnew(annotations: Readonly<Record<string, string>>): ReadAnnotations {
  const settings: IngressSettings = {};
  const from = new Map<keyof IngressSettings, { name: string; value: string }>();
  const problems: string[] = [];
  const authProblems: string[] = [];
  const warnings: string[] = [];
  let authTypeRefused = false;
  for (const name of Object.keys(annotations).sort()) {
    const value = (annotations[name] as string).trim();
    const entry = BY_NAME.get(name);
    if (entry === undefined) {
      if (name.startsWith(TOLLGATE_PREFIX)) {
        // A misspelt annotation must not silently drop what it meant (an auth rule above all).
        (name.includes('auth') ? authProblems : problems).push(`unknown annotation ${name}`);
      } else if (name.startsWith(NGINX_PREFIX)) {
        if (name.includes('auth')) {
          authProblems.push(`${name} is not supported; the paths stay closed rather than open without it`);
        } else if (name.endsWith('snippet')) {
          warnings.push(`${name} ignored: snippets are never executed`);
        } else warnings.push(`${name} ignored: not supported by Tollgate`);
      }
      continue;
    }
    const parsed = entry.parse(value);
    if (!parsed.ok) {
      if (entry.target === 'authType') authTypeRefused = true;
      (entry.auth ? authProblems : problems).push(`${name}: ${parsed.message}`);
      continue;
    }
    const earlier = from.get(entry.target);
    if (earlier !== undefined && JSON.stringify(settings[entry.target]) !== JSON.stringify(parsed.value)) {
      (entry.auth ? authProblems : problems).push(`${name} conflicts with ${earlier.name}`);
      continue;
    }
    from.set(entry.target, { name, value });
    (settings as Record<string, unknown>)[entry.target] = parsed.value;
  }
  // An auth-type written but refused (digest, say) was reported by name above; no second message.
  if (settings.authType === undefined && !authTypeRefused) {
    const dangling = (['authSecret', 'authUrl', 'authSecretType'] as const).filter(
      (key) => settings[key] !== undefined,
    );
    // auth-url alone means forward auth in ingress-nginx.
    if (settings.authUrl !== undefined) settings.authType = 'forward';
    else if (dangling.length > 0)
      authProblems.push(`${from.get(dangling[0] as 'authSecret')?.name} is set without an auth-type`);
  }
  return { settings, problems, authProblems, warnings };
}
