import type { V1Secret } from '@kubernetes/client-node';
import type { PathConfig } from '../../../config/types.ts';
import { readAuthorization as readPolicyAuthorization } from '../../../policy/authorization.ts';
import type { PolicyContext as AuthContext } from '../../../policy/context.ts';
import { isMapping, PlainReader } from '../../../policy/plain-reader.ts';
import { POLICY_KEYS as REQUEST_POLICY_KEYS, readPathPolicies } from '../../../policy/request-policies.ts';
import { decodeSecret } from '../secret-data.ts';
import { referencePermitted } from './grants.ts';
import type { ObjectMeta, ReferenceGrant } from './objects.ts';
import type { Lookup } from './reads.ts';

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
  /** Honoured, but the author should act (a key in the other place, a weak hash). */
  warnings?: string[];
}

export interface PolicyContext {
  secrets: Lookup<V1Secret>;
  grants: readonly ReferenceGrant[];
  reachesTollgate?: ((host: string, port: number) => boolean) | undefined;
  /** The names of main.yaml's `oidc_providers` (a `type: oidc` policy must name one). */
  oidcProviders?: readonly string[] | undefined;
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
 * A request-policy key (`cors`, `source_ranges`, `deny_ranges`, `max_body_bytes`, `cache`) read by
 * upstreams.yaml's own reader (policy/request-policies), so a policy and a file accept and refuse the
 * same things.
 */
function readRequestPolicy(key: string) {
  return (
    value: unknown,
    _policy: TollgatePolicy,
    _context: PolicyContext,
    built: BuiltPolicy,
  ): string | null => {
    const r = new PlainReader();
    const fields = r.fields({ value: { [key]: value }, place: { segments: [], side: 'value' } }, 'spec', [
      key,
    ]);
    const read = fields === null ? {} : readPathPolicies(r, fields);
    if (r.issues.length > 0) return r.issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
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

/**
 * `authorization`: read by the one policy reader (policy/authorization), as upstreams.yaml's, with
 * credentials by Secret reference (a ReferenceGrant for another namespace's) instead of inline and
 * no file of Tollgate's pod. `allow` belongs inside it; `spec.allow` beside it is read the same with
 * a warning naming the right place (docs/gateway-api.md#tollgatepolicy).
 */
function readAuthorization(
  value: unknown,
  policy: TollgatePolicy,
  context: PolicyContext,
  built: BuiltPolicy,
): string | null {
  const beside = policy.spec?.allow;
  let spec = value;
  if (beside !== undefined && isMapping(value)) {
    if (value.allow !== undefined)
      return 'spec.allow and spec.authorization.allow are both set: keep spec.authorization.allow';
    spec = { ...value, allow: beside };
    built.warnings = [...(built.warnings ?? []), ALLOW_BESIDE];
  }
  const r = new PlainReader();
  const authorization = readPolicyAuthorization(
    r,
    r.root('authorization', spec, 'spec.authorization'),
    policyAuthContext(policy, context),
  );
  const warnings = r.warnings.map((warning) => `${warning.path}: ${warning.message}`);
  if (warnings.length > 0) built.warnings = [...(built.warnings ?? []), ...warnings];
  if (r.issues.length > 0) return r.issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
  if (authorization === null) return 'spec.authorization cannot be read';
  built.patch.authorization = authorization;
  return null;
}

/** The warning for `allow` written beside `authorization`: read, but in the other place. */
export const ALLOW_BESIDE =
  'spec.allow belongs in spec.authorization.allow (as in upstreams.yaml): it is read from there, move it';

/** What a policy's authorization may read: its namespace's Secrets (others by ReferenceGrant), main.yaml's providers. */
function policyAuthContext(policy: TollgatePolicy, context: PolicyContext): AuthContext {
  const namespace = policy.metadata?.namespace ?? 'default';
  return {
    oidcProviders: context.oidcProviders ?? [],
    kubernetes: {
      reachesTollgate: context.reachesTollgate,
      secret: (ref) => {
        const target = ref.namespace ?? namespace;
        const key = `${target}/${ref.name}`;
        if (
          !referencePermitted(context.grants, {
            from: { group: POLICY_GROUP, kind: POLICY_KIND, namespace },
            to: { group: '', kind: 'Secret', namespace: target, name: ref.name },
          })
        )
          return { problem: `no ReferenceGrant in ${target} allows this policy to read Secret ${key}` };
        const secret = context.secrets.get(key);
        if (secret === undefined) return { problem: `Secret ${key} does not exist` };
        return { data: decodeSecret(secret), name: `Secret ${key}` };
      },
    },
  };
}

/**
 * `spec.allow` (the other spelling of `spec.authorization.allow`): read with the authorization, so
 * here it only needs one.
 */
function readAllow(
  _value: unknown,
  policy: TollgatePolicy,
  _context: PolicyContext,
  _built: BuiltPolicy,
): string | null {
  return policy.spec?.authorization === undefined ? 'allow needs an authorization in the same policy' : null;
}
