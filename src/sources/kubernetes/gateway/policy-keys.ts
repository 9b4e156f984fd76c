import type { V1Secret } from '@kubernetes/client-node';
import type { AuthorizationConfig, PathConfig } from '../../../config/types.ts';
import { readAllowRules } from '../../../config/validate-allow.ts';
import { validateAuthorization } from '../../../config/validate-auth.ts';
import { DEFAULT_AUTH_REQUEST_HEADERS } from '../../../config/validate-forward.ts';
import { POLICY_KEYS as REQUEST_POLICY_KEYS, readPathPolicies } from '../../../config/validate-policies.ts';
import { YamlReader } from '../../../config/yaml-reader.ts';
import { unconfigurableHeaderReason } from '../../../header-names.ts';
import { authUrlTargetProblem } from '../ingress/auth-url-guard.ts';
import { parseApiKeys, parseHtpasswd } from '../ingress/credentials.ts';
import { decodeSecret } from '../secret-data.ts';
import { referencePermitted } from './grants.ts';
import type { ObjectMeta, ReferenceGrant } from './objects.ts';

/**
 * What a TollgatePolicy's spec says (docs/gateway-api.md#tollgatepolicy): each key besides
 * targetRefs read by its own reader into the path settings it stands for, with Secrets by reference.
 * policy.ts decides which paths a policy covers; this file only what it sets on them.
 */

/** The group and kind of Tollgate's policy CRD (deploy/helm: the CRD; docs/gateway-api.md#tollgatepolicy). */
export const POLICY_GROUP = 'tollgate.io';
export const POLICY_KIND = 'TollgatePolicy';

export interface PolicyTargetRef {
  group?: string;
  kind?: string;
  name?: string;
  sectionName?: string;
}

export interface TollgatePolicy {
  metadata?: ObjectMeta;
  spec?: { targetRefs?: PolicyTargetRef[]; [key: string]: unknown };
}

/** What a policy's spec turned into: the path keys it sets, or why its paths must stay closed. */
export interface BuiltPolicy {
  patch: Partial<Pick<PathConfig, 'authorization' | 'rateLimit' | 'policies'>>;
  /** Set when the policy cannot be honoured: its paths answer 503 auth_misconfigured. */
  broken: string | null;
}

export interface PolicyContext {
  secrets: ReadonlyMap<string, V1Secret>;
  grants: readonly ReferenceGrant[];
  reachesTollgate?: (host: string, port: number) => boolean;
  /** The names of main.yaml's `oidc_providers` (a `type: oidc` policy must name one). */
  oidcProviders?: readonly string[];
}

/**
 * The spec keys a TollgatePolicy may hold besides targetRefs: upstreams.yaml's path keys that are
 * policy (docs/gateway-api.md#tollgatepolicy), each read by its own function into the path. A new
 * key (allow, cors, source_ranges, oidc) is one line here plus its reader.
 */
const POLICY_KEYS: Record<
  string,
  (value: unknown, policy: TollgatePolicy, context: PolicyContext, built: BuiltPolicy) => string | null
> = {
  authorization: readAuthorization,
  allow: readAllow,
  rate_limit: (value, _policy, _context, built) => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
      return 'rate_limit must be a whole number of requests per second (1 or more)';
    built.patch.rateLimit = value;
    return null;
  },
  // upstreams.yaml's request policies, read by its own reader (docs/policies.md).
  ...Object.fromEntries(
    REQUEST_POLICY_KEYS.filter((key) => key !== 'rewrite').map((key) => [key, readRequestPolicy(key)]),
  ),
};

/**
 * A request-policy key (`cors`, `source_ranges`, `deny_ranges`, `max_body_bytes`) read exactly as
 * upstreams.yaml reads it: the value is handed to the same reader (JSON is YAML), so a policy and a
 * file accept and refuse the same things.
 */
function readRequestPolicy(key: string) {
  return (
    value: unknown,
    _policy: TollgatePolicy,
    _context: PolicyContext,
    built: BuiltPolicy,
  ): string | null => {
    const reader = new YamlReader(JSON.stringify({ [key]: value }), 'TollgatePolicy');
    const fields = reader.fields(reader.root(), 'spec', [key]);
    const read = fields === null ? {} : readPathPolicies(reader, fields);
    if (reader.issues.length > 0)
      return reader.issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
    built.patch.policies = { ...built.patch.policies, ...read.policies };
    return null;
  };
}

/** The Secrets a policy reads (basic, apikey): what the watches must list. */
export function policySecrets(policy: TollgatePolicy): string[] {
  const namespace = policy.metadata?.namespace ?? 'default';
  const authorization = policy.spec?.authorization as
    | Record<string, { secretRef?: { name?: string; namespace?: string } }>
    | undefined;
  const names: string[] = [];
  for (const method of ['basic', 'apikey']) {
    const ref = authorization?.[method]?.secretRef;
    if (ref?.name) names.push(`${ref.namespace ?? namespace}/${ref.name}`);
  }
  return names;
}

export function buildPolicy(policy: TollgatePolicy, context: PolicyContext): BuiltPolicy {
  try {
    return readPolicy(policy, context);
  } catch (error) {
    // A spec shaped so that a reader trips on it: closed, like any policy that cannot be built.
    return { patch: {}, broken: `the policy cannot be read: ${(error as Error).message}` };
  }
}

function readPolicy(policy: TollgatePolicy, context: PolicyContext): BuiltPolicy {
  const built: BuiltPolicy = { patch: {}, broken: null };
  const problems: string[] = [];
  // `authorization` first: `allow` is read for its method.
  const entries = Object.entries(policy.spec ?? {}).sort(([a], [b]) =>
    a === 'authorization' ? -1 : b === 'authorization' ? 1 : 0,
  );
  for (const [key, value] of entries) {
    if (key === 'targetRefs') continue;
    const reader = POLICY_KEYS[key];
    // An unknown key may be a misspelt `authorization`: never serve the paths without it.
    const problem =
      reader === undefined
        ? `spec.${key} is not a TollgatePolicy key (${Object.keys(POLICY_KEYS).join(', ')})`
        : reader(value, policy, context, built);
    if (problem !== null) problems.push(problem);
  }
  if (problems.length > 0) built.broken = problems.join('; ');
  return built;
}

type AuthSpec = {
  type?: string;
  realm?: string;
  basic?: { secretRef?: { name?: string; namespace?: string } };
  apikey?: { secretRef?: { name?: string; namespace?: string } };
  provider?: string;
  url?: string;
  auth_request_headers?: string[];
  auth_response_headers?: string[];
  subject_header?: string;
  timeout_seconds?: number;
};

/** `authorization`: as upstreams.yaml's, with credentials by Secret reference instead of inline. */
function readAuthorization(
  value: unknown,
  policy: TollgatePolicy,
  context: PolicyContext,
  built: BuiltPolicy,
): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'authorization must be an object';
  const spec = value as AuthSpec;
  const realm = spec.realm === undefined ? {} : { realm: spec.realm };
  if (
    spec.realm !== undefined &&
    (typeof spec.realm !== 'string' || !/^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(spec.realm))
  )
    return 'authorization.realm must be printable text without quotes or backslashes';
  const type = spec.type === 'api' ? 'apikey' : spec.type;
  if (type === 'client_certificate' || type === 'ext_authz') return readAsUpstreams(value, context, built);
  const allowed: Record<string, string[]> = {
    basic: ['type', 'basic', 'realm'],
    apikey: ['type', 'apikey', 'realm'],
    jwt: ['type', 'realm'],
    oidc: ['type', 'provider'],
    forward: [
      'type',
      'url',
      'auth_request_headers',
      'auth_response_headers',
      'subject_header',
      'timeout_seconds',
      'realm',
    ],
  };
  const keys = type === undefined ? undefined : allowed[type];
  if (keys === undefined)
    return `authorization.type ${spec.type} is not basic, apikey, jwt, forward, oidc, client_certificate or ext_authz`;
  const extra = Object.keys(spec).filter((key) => !keys.includes(key));
  if (extra.length > 0) return `authorization.${extra[0]} is not a key of type ${type}`;
  if (type === 'jwt') {
    built.patch.authorization = { type: 'jwt', users: [], keys: [], ...realm };
    return null;
  }
  if (type === 'oidc') {
    if (typeof spec.provider !== 'string') return 'authorization.provider is required for type oidc';
    if (!(context.oidcProviders ?? []).includes(spec.provider))
      return `authorization.provider ${spec.provider} is not one of main.yaml's oidc_providers`;
    built.patch.authorization = { type: 'oidc', users: [], keys: [], oidc: { provider: spec.provider } };
    return null;
  }
  if (type === 'forward') {
    if (typeof spec.url !== 'string') return 'authorization.url is required for type forward';
    const target = authUrlTargetProblem(spec.url, context.reachesTollgate);
    if (target !== null) return `authorization.url ${target}: a policy may not send auth requests there`;
    const names = (list: unknown, what: string): string[] | string => {
      if (list === undefined) return [];
      if (!Array.isArray(list) || list.some((item) => typeof item !== 'string'))
        return `${what} must be a list of header names`;
      for (const name of list as string[]) {
        const problem = unconfigurableHeaderReason(name);
        if (problem !== null) return `${what}: ${problem}`;
      }
      return (list as string[]).map((name) => name.toLowerCase());
    };
    const requestHeaders =
      spec.auth_request_headers === undefined
        ? [...DEFAULT_AUTH_REQUEST_HEADERS]
        : names(spec.auth_request_headers, 'auth_request_headers');
    const responseHeaders = names(spec.auth_response_headers, 'auth_response_headers');
    if (typeof requestHeaders === 'string') return requestHeaders;
    if (typeof responseHeaders === 'string') return responseHeaders;
    const timeout = spec.timeout_seconds ?? 5;
    if (typeof timeout !== 'number' || !(timeout > 0 && timeout <= 60))
      return 'authorization.timeout_seconds must be a number of seconds up to 60';
    built.patch.authorization = {
      type: 'forward',
      users: [],
      keys: [],
      ...realm,
      forward: {
        url: new URL(spec.url).href,
        authRequestHeaders: requestHeaders,
        authResponseHeaders: responseHeaders,
        subjectHeader: spec.subject_header?.toLowerCase() ?? null,
        timeoutMs: Math.round(timeout * 1000),
        signinUrl: null,
      },
    };
    return null;
  }
  const ref = (type === 'basic' ? spec.basic : spec.apikey)?.secretRef;
  if (!ref?.name) return `authorization.${type}.secretRef.name is required`;
  const namespace = policy.metadata?.namespace ?? 'default';
  const target = ref.namespace ?? namespace;
  const key = `${target}/${ref.name}`;
  if (
    !referencePermitted(context.grants, {
      from: { group: POLICY_GROUP, kind: POLICY_KIND, namespace },
      to: { group: '', kind: 'Secret', namespace: target, name: ref.name },
    })
  )
    return `no ReferenceGrant in ${target} allows this policy to read Secret ${key}`;
  const secret = context.secrets.get(key);
  if (secret === undefined) return `Secret ${key} does not exist`;
  const data = decodeSecret(secret);
  if (type === 'basic') {
    if (data.auth === undefined) return `Secret ${key} has no 'auth' key (htpasswd)`;
    const users = parseHtpasswd(data.auth);
    if (users.problems.length > 0) return `Secret ${key}: ${users.problems.join('; ')}`;
    built.patch.authorization = {
      type: 'basic',
      users: users.entries,
      keys: [],
      ...realm,
    } satisfies AuthorizationConfig;
    return null;
  }
  if (data.keys === undefined) return `Secret ${key} has no 'keys' key (name:key lines)`;
  const parsed = parseApiKeys(data.keys);
  if (parsed.problems.length > 0) return `Secret ${key}: ${parsed.problems.join('; ')}`;
  built.patch.authorization = { type: 'apikey', users: [], keys: parsed.entries, ...realm };
  return null;
}

/**
 * `type: client_certificate` and `type: ext_authz` hold no credentials, so upstreams.yaml's own reader
 * reads them (JSON is YAML): a policy and a file accept and refuse the same things. An ext_authz
 * service may not be Tollgate itself nor a loopback or link-local address (as a forward `url`), and
 * names no file of Tollgate's pod (`grpc.tls.ca_file`).
 */
function readAsUpstreams(value: unknown, context: PolicyContext, built: BuiltPolicy): string | null {
  const reader = new YamlReader(JSON.stringify({ authorization: value }), 'TollgatePolicy');
  const field = reader.fields(reader.root(), 'spec', ['authorization'])?.get('authorization');
  const tls = (value as { grpc?: { tls?: unknown } }).grpc?.tls;
  if (typeof tls === 'object' && tls !== null && 'ca_file' in tls)
    return 'authorization.grpc.tls.ca_file names a file of the Tollgate pod: not in a policy';
  const authorization = field === undefined ? null : validateAuthorization(reader, field);
  if (reader.issues.length > 0)
    return reader.issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
  if (authorization === null) return 'authorization cannot be read';
  if (authorization.extAuthz !== undefined) {
    const target = authUrlTargetProblem(`http://${authorization.extAuthz.address}/`, context.reachesTollgate);
    if (target !== null) return `authorization.grpc.address ${target}: a policy may not send checks there`;
  }
  built.patch.authorization = authorization;
  return null;
}

/**
 * `allow` (docs/authentication.md#who-may-pass): who may pass once authenticated, read by
 * upstreams.yaml's own reader for the policy's method (basic, apikey and forward know only the
 * subject). It needs an `authorization` in the same policy.
 */
function readAllow(
  value: unknown,
  _policy: TollgatePolicy,
  _context: PolicyContext,
  built: BuiltPolicy,
): string | null {
  const authorization = built.patch.authorization;
  if (authorization === undefined || authorization === null)
    return 'allow needs an authorization in the same policy';
  const reader = new YamlReader(JSON.stringify({ allow: value }), 'TollgatePolicy');
  const field = reader.fields(reader.root(), 'spec', ['allow'])?.get('allow');
  const rules = field === undefined ? null : readAllowRules(reader, field, authorization.type);
  if (reader.issues.length > 0)
    return reader.issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
  if (rules === null) return 'allow cannot be read';
  built.patch.authorization = { ...authorization, allow: rules };
  return null;
}
