import type { V1Secret } from '@kubernetes/client-node';
import type { AuthorizationConfig, PathConfig } from '../../../config/types.ts';
import { readAllowRules } from '../../../config/validate-allow.ts';
import { DEFAULT_AUTH_REQUEST_HEADERS } from '../../../config/validate-forward.ts';
import { POLICY_KEYS as REQUEST_POLICY_KEYS, readPathPolicies } from '../../../config/validate-policies.ts';
import { YamlReader } from '../../../config/yaml-reader.ts';
import { unconfigurableHeaderReason } from '../../../header-names.ts';
import { authUrlTargetProblem } from '../ingress/auth-url-guard.ts';
import { parseApiKeys, parseHtpasswd } from '../ingress/credentials.ts';
import { referencePermitted } from './grants.ts';
import { decodeSecret, type ResolvedGateway } from './listeners.ts';
import {
  byAge,
  type Condition,
  condition,
  GATEWAY_GROUP,
  type ObjectMeta,
  type ReferenceGrant,
} from './objects.ts';
import type { PathEntry, RouteOutcome } from './routes.ts';

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

export interface PolicyOutcome {
  namespace: string;
  name: string;
  conditions: Condition[];
  /** What is wrong, for Events and logs. */
  problems: string[];
}

/** What a policy's spec turned into: the path keys it sets, or why its paths must stay closed. */
interface BuiltPolicy {
  patch: Partial<Pick<PathConfig, 'authorization' | 'rateLimit' | 'policies'>>;
  /** Set when the policy cannot be honoured: its paths answer 503 auth_misconfigured. */
  broken: string | null;
}

interface PolicyContext {
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

/** How specific a target is: a rule or listener (sectionName) beats its route, a route its Gateway. */
const SPECIFICITY = { rule: 3, route: 2, listener: 1, gateway: 0 } as const;

/**
 * Attaches TollgatePolicies to the paths they target (docs/gateway-api.md#tollgatepolicy): the most
 * specific target wins (a route's rule, the route, a Gateway's listener, the Gateway); two policies
 * on the same target: the older wins and the newer is Conflicted; a target that does not exist is
 * TargetNotFound. A policy that cannot be built (a missing Secret, an unknown key) closes the paths
 * it covers with 503 auth_misconfigured, never leaves them open. Mutates the entries' paths.
 */
export function applyPolicies(
  entries: readonly PathEntry[],
  routes: readonly RouteOutcome[],
  gateways: readonly ResolvedGateway[],
  input: PolicyContext & { policies: readonly TollgatePolicy[] },
): PolicyOutcome[] {
  const outcomes: PolicyOutcome[] = [];
  /** target key → the policy holding it (older first). */
  const holders = new Map<string, { policy: TollgatePolicy; built: BuiltPolicy; level: number }>();
  for (const policy of [...input.policies].sort(byAge)) {
    const namespace = policy.metadata?.namespace ?? 'default';
    const generation = policy.metadata?.generation;
    const outcome: PolicyOutcome = {
      namespace,
      name: policy.metadata?.name ?? '',
      conditions: [],
      problems: [],
    };
    outcomes.push(outcome);
    const built = buildPolicy(policy, input);
    // targetRefs the CRD schema would refuse (not a list): the policy is invalid and holds nothing.
    if (!Array.isArray(policy.spec?.targetRefs ?? [])) {
      outcome.problems.push('spec.targetRefs is not a list');
      outcome.conditions.push(
        condition('Accepted', false, 'Invalid', 'spec.targetRefs is not a list', generation),
      );
      continue;
    }
    const missing: string[] = [];
    const conflicted: string[] = [];
    let held = 0;
    for (const ref of policy.spec?.targetRefs ?? []) {
      const target = targetOf(ref, namespace, routes, gateways);
      if (target === null) {
        missing.push(
          `${ref.kind ?? '?'} ${namespace}/${ref.name ?? ''}${ref.sectionName ? ` section ${ref.sectionName}` : ''}`,
        );
        continue;
      }
      const holder = holders.get(target.key);
      if (holder !== undefined) {
        conflicted.push(
          `${target.key} already has the policy ${holder.policy.metadata?.namespace}/${holder.policy.metadata?.name}`,
        );
        continue;
      }
      holders.set(target.key, { policy, built, level: target.level });
      held += 1;
    }
    if ((policy.spec?.targetRefs ?? []).length === 0) missing.push('it names no targetRefs');
    outcome.problems.push(
      ...(built.broken === null ? [] : [built.broken]),
      ...missing.map((item) => `target not found: ${item}`),
      ...conflicted.map((item) => `conflicted: ${item}`),
    );
    outcome.conditions.push(
      held === 0 && conflicted.length > 0
        ? condition('Accepted', false, 'Conflicted', conflicted.join('; '), generation)
        : held === 0
          ? condition('Accepted', false, 'TargetNotFound', missing.join('; ') || 'no target', generation)
          : built.broken !== null
            ? condition(
                'Accepted',
                false,
                'Invalid',
                `${built.broken}: the paths it covers answer 503`,
                generation,
              )
            : condition('Accepted', true, 'Accepted', 'attached', generation),
    );
    if (held > 0 && conflicted.length > 0)
      outcome.conditions.push(condition('Conflicted', true, 'Conflicted', conflicted.join('; '), generation));
    if (held > 0 && missing.length > 0)
      outcome.conditions.push(
        condition('TargetNotFound', true, 'TargetNotFound', missing.join('; '), generation),
      );
  }

  for (const entry of entries) {
    const candidates = [
      entry.rule.name === null ? null : holders.get(`rule ${entry.kind} ${entry.route} ${entry.rule.name}`),
      holders.get(`route ${entry.kind} ${entry.route}`),
      ...entry.gateways.map((via) => holders.get(`listener ${via.gateway} ${via.listener}`)),
      ...entry.gateways.map((via) => holders.get(`gateway ${via.gateway}`)),
    ];
    const chosen = candidates.find((candidate) => candidate !== undefined);
    if (!chosen) continue;
    const { policies, ...rest } = chosen.built.patch;
    Object.assign(entry.path, rest);
    // A route's own policies (a URLRewrite filter) stay; the policy's keys are added beside them.
    if (policies !== undefined) entry.path.policies = { ...entry.path.policies, ...policies };
    if (chosen.built.broken !== null) entry.path.unavailable = chosen.built.broken;
  }
  return outcomes;
}

/** The key of what a targetRef names (policies are local: targets live in the policy's namespace). */
function targetOf(
  ref: PolicyTargetRef,
  namespace: string,
  routes: readonly RouteOutcome[],
  gateways: readonly ResolvedGateway[],
): { key: string; level: number } | null {
  if ((ref.group ?? GATEWAY_GROUP) !== GATEWAY_GROUP || !ref.name) return null;
  const id = `${namespace}/${ref.name}`;
  if (ref.kind === 'Gateway') {
    const gateway = gateways.find((item) => item.namespace === namespace && item.name === ref.name);
    if (gateway === undefined) return null;
    if (ref.sectionName === undefined) return { key: `gateway ${id}`, level: SPECIFICITY.gateway };
    if (!gateway.listeners.some((listener) => listener.name === ref.sectionName)) return null;
    return { key: `listener ${id} ${ref.sectionName}`, level: SPECIFICITY.listener };
  }
  if (ref.kind === 'HTTPRoute' || ref.kind === 'GRPCRoute') {
    const route = routes.find(
      (item) => item.kind === ref.kind && item.namespace === namespace && item.name === ref.name,
    );
    if (route === undefined || route.parents.length === 0) return null;
    if (ref.sectionName === undefined) return { key: `route ${ref.kind} ${id}`, level: SPECIFICITY.route };
    if (!route.ruleNames.includes(ref.sectionName)) return null;
    return { key: `rule ${ref.kind} ${id} ${ref.sectionName}`, level: SPECIFICITY.rule };
  }
  return null;
}

function buildPolicy(policy: TollgatePolicy, context: PolicyContext): BuiltPolicy {
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
  if (keys === undefined) return `authorization.type ${spec.type} is not basic, apikey, jwt, forward or oidc`;
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
