import { resolve } from 'node:path';
import { issueAt, positionOf, rememberPosition } from './positions.ts';
import type {
  AuthorizationConfig,
  ConfigIssue,
  MainConfig,
  OidcProviderSettings,
  UpstreamsConfig,
} from './types.ts';
import { readHttpUrl } from './validate-forward.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/** main.yaml keys read here (docs/configuration.md "OpenID Connect"). */
export const OIDC_MAIN_KEYS = ['oidc_providers', 'session_secret_file', 'session_max_age_seconds'] as const;

const PROVIDER_KEYS = [
  'issuer',
  'client_id',
  'client_secret_file',
  'scopes',
  'groups_claim',
  'subject_claim',
  'pass_access_token',
  'redirect_url',
  'require_verified_email',
  'ca_file',
  'cookie_domain',
  'post_logout_redirect_url',
] as const;

const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const DEFAULT_SCOPES = ['openid', 'email', 'profile'];
export const DEFAULT_SESSION_MAX_AGE_SECONDS = 8 * 3600;
/** Where the callback is served on every host with an oidc route (docs/authentication.md). */
export const OIDC_CALLBACK_PATH = '/.tollgate/oidc/callback';

/** Loopback hosts: the only places an `http://` issuer is accepted (a provider run beside us, tests). */
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

/** The oidc part of MainConfig, keys present only when set (so configs without them compare equal). */
export function readOidcMain(
  r: YamlReader,
  get: (key: string) => Field | undefined,
  dir: string,
): Partial<Pick<MainConfig, 'oidcProviders' | 'sessionSecretFile' | 'sessionMaxAgeSeconds'>> {
  const out: Partial<Pick<MainConfig, 'oidcProviders' | 'sessionSecretFile' | 'sessionMaxAgeSeconds'>> = {};
  const providers = get('oidc_providers');
  if (providers) {
    const read = readProviders(r, providers, dir);
    if (read !== null) out.oidcProviders = read;
  }
  const secret = get('session_secret_file');
  if (secret) {
    const path = r.string(secret);
    // Its line is recorded by config/load with the other files main.yaml names.
    if (path !== undefined) out.sessionSecretFile = resolve(dir, path);
  }
  const maxAge = get('session_max_age_seconds');
  if (maxAge) {
    const seconds = r.number(maxAge, { integer: true, min: 60, max: 366 * 86_400 });
    if (seconds !== undefined) out.sessionMaxAgeSeconds = seconds;
  }
  if (out.oidcProviders !== undefined && out.sessionSecretFile === undefined && providers) {
    r.report(
      providers.keyNode,
      providers.path,
      'needs session_secret_file as well: sessions are sealed with its secrets',
    );
  }
  return out;
}

function readProviders(
  r: YamlReader,
  field: Field,
  dir: string,
): Record<string, OidcProviderSettings> | null {
  const entries = r.entries(field.node, field.path);
  if (entries === null) return null;
  const providers: Record<string, OidcProviderSettings> = Object.create(null);
  for (const entry of entries) {
    if (!PROVIDER_NAME.test(entry.key)) {
      r.report(entry.keyNode, entry.path, 'a provider name is letters, digits, ., _ and - (at most 63)');
      continue;
    }
    const provider = readProvider(r, entry, dir);
    if (provider !== null) providers[entry.key] = provider;
  }
  if (entries.length === 0) r.report(field.keyNode, field.path, 'is empty: name at least one provider');
  return providers;
}

function readProvider(r: YamlReader, field: Field, dir: string): OidcProviderSettings | null {
  const fields = r.fields(field.node, field.path, PROVIDER_KEYS);
  if (fields === null) return null;
  const get = (key: string): Field | undefined => r.given(fields, key);
  let ok = true;
  const required = (key: string): Field | undefined => {
    const entry = get(key);
    if (entry === undefined) {
      r.report(field.keyNode, field.path, `missing '${key}'`);
      ok = false;
    }
    return entry;
  };
  const issuerField = required('issuer');
  const clientIdField = required('client_id');
  const secretField = required('client_secret_file');
  const issuer = issuerField ? readIssuer(r, issuerField) : undefined;
  const clientId = clientIdField ? r.string(clientIdField) : undefined;
  const secretPath = secretField ? r.string(secretField) : undefined;
  const scopesField = get('scopes');
  let scopes = DEFAULT_SCOPES;
  if (scopesField) {
    scopes = [];
    for (const item of r.items(scopesField, 'a list of scopes') ?? []) {
      const scope = r.string(item);
      if (scope !== undefined) scopes.push(scope);
    }
    if (!scopes.includes('openid'))
      r.report(
        r.at(scopesField),
        scopesField.path,
        "must include 'openid' (this is an OpenID Connect login)",
      );
  }
  const text = (key: string, fallback: string) => {
    const entry = get(key);
    return entry ? (r.string(entry) ?? fallback) : fallback;
  };
  const passField = get('pass_access_token');
  const verifiedField = get('require_verified_email');
  const caField = get('ca_file');
  const caPath = caField ? r.string(caField) : undefined;
  const domainField = get('cookie_domain');
  const cookieDomain = domainField ? readCookieDomain(r, domainField) : undefined;
  const logoutField = get('post_logout_redirect_url');
  const postLogoutRedirectUrl = logoutField ? readHttpUrl(r, logoutField) : undefined;
  const redirectField = get('redirect_url');
  const redirectUrl = redirectField ? readRedirectUrl(r, redirectField) : null;
  if (!ok || issuer === undefined || clientId === undefined || secretPath === undefined) return null;
  const provider: OidcProviderSettings = {
    name: field.key,
    issuer,
    clientId,
    clientSecretFile: resolve(dir, secretPath),
    scopes,
    groupsClaim: text('groups_claim', 'groups'),
    subjectClaim: text('subject_claim', 'sub'),
    passAccessToken: (passField && r.boolean(passField)) ?? false,
    requireVerifiedEmail: (verifiedField && r.boolean(verifiedField)) ?? false,
    caFile: caPath === undefined ? null : resolve(dir, caPath),
    cookieDomain: cookieDomain ?? null,
    postLogoutRedirectUrl: postLogoutRedirectUrl ?? null,
    redirectUrl: redirectUrl ?? null,
  };
  if (secretField)
    rememberPosition(provider, 'client_secret_file', { file: r.file, ...r.positionOf(r.at(secretField)) });
  if (caField) rememberPosition(provider, 'ca_file', { file: r.file, ...r.positionOf(r.at(caField)) });
  return provider;
}

/** An https issuer, or http on a loopback address; no query or fragment (discovery appends a path). */
function readIssuer(r: YamlReader, field: Field): string | undefined {
  const value = readHttpUrl(r, field);
  if (value === undefined) return undefined;
  const url = new URL(value);
  if (url.protocol === 'http:' && !LOOPBACK.test(url.hostname)) {
    r.report(r.at(field), field.path, 'must be https:// (http:// only for a provider on this machine)');
    return undefined;
  }
  if (url.search !== '') {
    r.report(r.at(field), field.path, 'must not have a query');
    return undefined;
  }
  return value;
}

/** A domain whose hosts share sessions: a DNS name of two labels or more, an optional leading dot. */
function readCookieDomain(r: YamlReader, field: Field): string | undefined {
  const value = r.string(field);
  if (value === undefined) return undefined;
  const domain = value.replace(/^\./, '').toLowerCase();
  if (!COOKIE_DOMAIN.test(domain) || /^[\d.]+$/.test(domain)) {
    r.report(
      r.at(field),
      field.path,
      `'${value}' is not a domain name of two labels or more (such as .corp.example.com)`,
    );
    return undefined;
  }
  return domain;
}

const COOKIE_DOMAIN =
  /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

function readRedirectUrl(r: YamlReader, field: Field): string | undefined {
  const value = readHttpUrl(r, field);
  if (value === undefined) return undefined;
  if (new URL(value).pathname !== OIDC_CALLBACK_PATH) {
    r.report(
      r.at(field),
      field.path,
      `must end in ${OIDC_CALLBACK_PATH}, where Tollgate answers the provider`,
    );
    return undefined;
  }
  return value;
}

/**
 * Rules across both files, run with the other consistency checks (config/load): every oidc policy
 * names a provider main.yaml defines, and one serving `DEFAULT` has a redirect_url (it has no host of
 * its own to build the callback from).
 */
export function checkOidcReferences(main: MainConfig, upstreams: UpstreamsConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const providers = main.oidcProviders ?? {};
  const check = (policy: AuthorizationConfig | null, host: string | null) => {
    if (policy?.oidc === undefined) return;
    const name = policy.oidc.provider;
    const provider = Object.hasOwn(providers, name) ? providers[name] : undefined;
    const at = positionOf(policy.oidc, 'provider');
    const issue = (message: string) =>
      issues.push(
        at === undefined
          ? issueAt(null, 'provider', upstreams.file, message)
          : { ...at, path: 'authorization.provider', message },
      );
    if (provider === undefined) {
      const known = Object.keys(providers);
      issue(
        `unknown OpenID provider '${name}' (${known.length === 0 ? 'main.yaml has no oidc_providers' : `main.yaml defines ${known.join(', ')}`})`,
      );
    } else if (host === 'DEFAULT' && provider.redirectUrl === null) {
      issue(`a route under DEFAULT needs oidc_providers.${name}.redirect_url: it has no host of its own`);
    }
  };
  check(upstreams.authorization, null);
  for (const host of upstreams.hosts) {
    for (const path of host.paths) check(upstreams.authorization ?? path.authorization, host.name);
  }
  // One issue per line is enough (a global policy is checked once per path).
  const seen = new Set<string>();
  return issues.filter((issue) => {
    const key = `${issue.file}:${issue.line}:${issue.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
