import type { CacheConfig, PathPolicies, RewriteConfig } from '../config/policy-types.ts';
import { type CorsPolicy, compileCors, corsProblems } from './cors.ts';
import { compileSourceRanges, parseRange, type SourceRanges } from './ip-ranges.ts';
import { normalisePrefix, normaliseTarget } from './normalise.ts';
import {
  compilePathPattern,
  expandReplacement,
  type PathPattern,
  parseReplacement,
  type Replacement,
} from './path-pattern.ts';

// Validation reads ranges one by one (each at its own line) with the parser routing compiles them with.
export { parseRange };

/**
 * A route's request policies (docs/policies.md), compiled once per (re)load and frozen. Each is read
 * by its own pipeline stage, in this order: source ranges → CORS → (redirects) app root → … → body
 * limit → rewrite. Built the same way for upstreams.yaml paths, Ingress paths and, later, Gateway API
 * filters: the sources only fill PathPolicies.
 */
export interface RoutePolicy {
  readonly sourceRanges: SourceRanges | null;
  readonly cors: CorsPolicy | null;
  /** `/` is answered 302 to this path (an Ingress `app-root`). */
  readonly appRoot: string | null;
  /** Request body limit in bytes; null = none. */
  readonly maxBodyBytes: number | null;
  readonly rewrite: PathRewrite | null;
  /** Sent upstream as X-Forwarded-Prefix. */
  readonly forwardedPrefix: string | null;
  /** The whole path must match this (an Ingress regex path), else 404. */
  readonly pathPattern: PathPattern | null;
  /** The response cache's settings (docs/traffic.md#response-cache); null = not cached. */
  readonly cache: Readonly<CacheConfig> | null;
}

/**
 * The path the upstream receives for `path` (already normalised, matched on `prefix`): the new path,
 * or null when the result is not a valid path (the request is then refused with 400).
 */
export type PathRewrite = (path: string, prefix: string) => string | null;

/** What is wrong with a path's policies, one line each (empty when nothing): validation and Ingress share it. */
export function policyProblems(policies: PathPolicies): Array<{ key: string; message: string }> {
  const problems: Array<{ key: string; message: string }> = [];
  const { rewrite } = policies;
  if (rewrite?.kind === 'prefix') {
    const prefix = normalisePrefix(rewrite.prefix);
    if (!prefix.ok) problems.push({ key: 'rewrite.prefix', message: `'${rewrite.prefix}' ${prefix.reason}` });
  } else if (rewrite?.kind === 'regex') {
    const pattern = compilePathPattern(rewrite.regex, { caseInsensitive: rewrite.caseInsensitive === true });
    if (!pattern.ok) problems.push({ key: 'rewrite.regex', message: `'${rewrite.regex}' ${pattern.reason}` });
    if (!rewrite.replacement.startsWith('/'))
      problems.push({ key: 'rewrite.replacement', message: "must start with '/'" });
    else if (/[?#]/.test(rewrite.replacement))
      problems.push({
        key: 'rewrite.replacement',
        message: "must not contain '?' or '#': the query is kept as sent",
      });
    else if (pattern.ok) {
      const replacement = parseReplacement(rewrite.replacement, pattern.value.groups);
      if (!replacement.ok) problems.push({ key: 'rewrite.replacement', message: replacement.reason });
    }
  }
  if (policies.cors !== undefined)
    for (const message of corsProblems(policies.cors)) problems.push({ key: 'cors', message });
  for (const key of ['sourceRanges', 'denyRanges'] as const)
    for (const range of policies[key] ?? []) {
      const parsed = parseRange(range);
      if (!parsed.ok)
        problems.push({
          key: key === 'sourceRanges' ? 'source_ranges' : 'deny_ranges',
          message: parsed.reason,
        });
    }
  if (policies.pathRegex !== undefined) {
    const pattern = compilePathPattern(policies.pathRegex, { caseInsensitive: true });
    if (!pattern.ok) problems.push({ key: 'path', message: `'${policies.pathRegex}' ${pattern.reason}` });
  }
  const { cache } = policies;
  if (cache !== undefined && !(cache.maxBytes >= 1 && cache.maxObjectBytes >= 1))
    problems.push({ key: 'cache', message: 'max_bytes and max_object_bytes must be at least one byte' });
  else if (cache !== undefined && cache.maxObjectBytes > cache.maxBytes)
    problems.push({
      key: 'cache',
      message: `max_object_bytes (${cache.maxObjectBytes}) is more than max_bytes (${cache.maxBytes})`,
    });
  if (policies.appRoot !== undefined) {
    const root = normaliseTarget(policies.appRoot);
    if (!root.ok || root.path === '/' || root.path !== policies.appRoot)
      problems.push({
        key: 'app_root',
        message: `'${policies.appRoot}' is not a normalised path other than '/'`,
      });
  }
  return problems;
}

/**
 * The compiled policy of one path; null when it has none (the common case: every stage then costs
 * one property read). `globalMaxBodyBytes` is upstreams.yaml's top-level `max_body_bytes`.
 */
export function compileRoutePolicy(
  policies: PathPolicies | null | undefined,
  globalMaxBodyBytes: number | null,
): RoutePolicy | null {
  const own = policies ?? {};
  const limit = own.maxBodyBytes ?? globalMaxBodyBytes ?? 0;
  const policy: RoutePolicy = {
    sourceRanges: compileSourceRanges(own.sourceRanges ?? [], own.denyRanges ?? []),
    cors: own.cors === undefined ? null : compileCors(own.cors),
    appRoot: own.appRoot ?? null,
    // 0 is "unlimited", as nginx's client_max_body_size 0.
    maxBodyBytes: limit > 0 ? limit : null,
    rewrite: own.rewrite === undefined ? null : compileRewrite(own.rewrite),
    forwardedPrefix: own.forwardedPrefix ?? null,
    pathPattern: own.pathRegex === undefined ? null : mustCompile(own.pathRegex, true),
    cache: own.cache === undefined ? null : Object.freeze({ ...own.cache }),
  };
  if (Object.values(policy).every((value) => value === null)) return null;
  return Object.freeze(policy);
}

function mustCompile(source: string, caseInsensitive: boolean): PathPattern {
  const pattern = compilePathPattern(source, { caseInsensitive });
  // Validation (or the Ingress translation) refused every pattern that does not compile.
  if (!pattern.ok) throw new Error(`unvalidated path pattern: ${pattern.reason}`);
  return pattern.value;
}

function compileRewrite(rewrite: RewriteConfig): PathRewrite {
  if (rewrite.kind === 'prefix') {
    const replacement = rewrite.prefix === '/' ? '' : rewrite.prefix;
    return (path, prefix) => {
      // The rest after the matched prefix is '' or starts with '/' (routes match on segment boundaries).
      const rest = prefix === '/' ? path : path.slice(prefix.length);
      return renormalised(replacement + rest || '/');
    };
  }
  const pattern = mustCompile(rewrite.regex, rewrite.caseInsensitive === true);
  const parsed = parseReplacement(rewrite.replacement, pattern.groups);
  if (!parsed.ok) throw new Error(`unvalidated replacement: ${parsed.reason}`);
  const replacement: Replacement = parsed.value;
  return (path) => {
    const groups = pattern.exec(path);
    return groups === null ? path : renormalised(expandReplacement(replacement, groups));
  };
}

/**
 * The rewritten path in normalised form (dot-segments a capture brought in resolved, escapes as the
 * route stage writes them), or null when it is not a path at all: the upstream gets exactly what was
 * checked, never something it could read differently (docs/policies.md#rewrite).
 */
function renormalised(path: string): string | null {
  const target = normaliseTarget(path);
  if (!target.ok || target.query !== '' || path.includes('?')) return null;
  return target.path;
}
