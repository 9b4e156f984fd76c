import { parseByteSize } from '../config/byte-size.ts';
import type { CorsConfig, PathPolicies, RewriteConfig } from '../config/policy-types.ts';
import { parseRange, policyProblems } from '../routing/policies.ts';
import { readPathCache } from './cache.ts';
import {
  type PlainField as Field,
  type PlainItem as Item,
  isMapping,
  type PlainReader,
} from './plain-reader.ts';

/**
 * The request policies of a path (docs/policies.md): the keys `rewrite`, `max_body_bytes`, `cors`,
 * `source_ranges`, `deny_ranges`, `cache` (cache.ts), and upstreams.yaml's global `max_body_bytes`,
 * read over plain values for upstreams.yaml (config/plain-yaml attaches the lines) and a
 * TollgatePolicy alike. The checks themselves are routing/policies' policyProblems, which the Ingress
 * translation runs on annotations too, so every source refuses exactly the same things.
 */
export const POLICY_KEYS: readonly string[] = [
  'rewrite',
  'max_body_bytes',
  'cors',
  'source_ranges',
  'deny_ranges',
  'cache',
];

const REWRITE_KEYS = ['prefix', 'regex', 'replacement'];
const CORS_KEYS = [
  'allow_origins',
  'allow_methods',
  'allow_headers',
  'expose_headers',
  'allow_credentials',
  'max_age_seconds',
];

/** `max_body_bytes`: bytes as a number, or a size with k/m/g ("8m"); 0 = unlimited. */
export function readMaxBodyBytes(r: PlainReader, field: Field): number | undefined {
  if (typeof field.node?.value === 'number')
    return r.number(field, { integer: true, min: 0, max: 1024 ** 4 });
  const text = r.string(field);
  if (text === undefined) return undefined;
  const size = parseByteSize(text);
  if (!size.ok) {
    r.report(r.at(field), field.path, size.reason);
    return undefined;
  }
  return size.bytes;
}

/** The policies of one path (only the keys written), for PathConfig's `policies`. */
export function readPathPolicies(r: PlainReader, fields: Map<string, Field>): { policies?: PathPolicies } {
  const get = (key: string): Field | undefined => r.given(fields, key);
  const policies: PathPolicies = {};
  const rewriteField = get('rewrite');
  const rewrite = rewriteField && readRewrite(r, rewriteField);
  if (rewrite) policies.rewrite = rewrite;
  const bodyField = get('max_body_bytes');
  const maxBodyBytes = bodyField && readMaxBodyBytes(r, bodyField);
  if (maxBodyBytes !== undefined) policies.maxBodyBytes = maxBodyBytes;
  const corsField = get('cors');
  const cors = corsField && readCors(r, corsField);
  if (cors) policies.cors = cors;
  const sourceField = get('source_ranges');
  if (sourceField) policies.sourceRanges = readRanges(r, sourceField);
  const denyField = get('deny_ranges');
  if (denyField) policies.denyRanges = readRanges(r, denyField);
  const cacheField = get('cache');
  const cache = cacheField && readPathCache(r, cacheField);
  if (cache) policies.cache = cache;

  // The shared checks, each reported at the key it is about.
  const where: Record<string, Field | undefined> = {
    'rewrite.prefix': rewriteField,
    'rewrite.regex': rewriteField,
    'rewrite.replacement': rewriteField,
    cors: corsField,
  };
  for (const problem of policyProblems(policies)) {
    // Ranges were checked one by one above, each at its own line.
    if (problem.key === 'source_ranges' || problem.key === 'deny_ranges') continue;
    const field = where[problem.key];
    const sub = field && subField(r, field, problem.key.split('.')[1]);
    const at = sub ?? field;
    r.report(at ? r.at(at) : null, at?.path ?? problem.key, problem.message);
  }
  return Object.keys(policies).length === 0 ? {} : { policies };
}

/** `rewrite: { prefix: /new }` or `rewrite: { regex: "^/api/(.*)", replacement: "/v2/$1" }`. */
function readRewrite(r: PlainReader, field: Field): RewriteConfig | undefined {
  if (!isMapping(field.node?.value)) {
    r.report(
      r.at(field),
      field.path,
      `expected { prefix } or { regex, replacement }, got ${r.describe(field.node)}`,
    );
    return undefined;
  }
  const fields = r.fields(field.node, field.path, REWRITE_KEYS);
  if (fields === null) return undefined;
  const prefix = fields.get('prefix');
  const regex = fields.get('regex');
  const replacement = fields.get('replacement');
  if (prefix !== undefined && (regex !== undefined || replacement !== undefined)) {
    r.report(field.keyNode, field.path, "takes 'prefix', or 'regex' with 'replacement', not both");
    return undefined;
  }
  if (prefix !== undefined) {
    const text = r.string(prefix);
    return text === undefined ? undefined : { kind: 'prefix', prefix: text };
  }
  if (regex === undefined || replacement === undefined) {
    r.report(field.keyNode, field.path, "needs 'prefix', or both 'regex' and 'replacement'");
    return undefined;
  }
  const pattern = r.string(regex);
  const text = r.string(replacement);
  if (pattern === undefined || text === undefined) return undefined;
  return { kind: 'regex', regex: pattern, replacement: text };
}

/** `cors: { allow_origins, allow_methods, allow_headers, expose_headers, allow_credentials, max_age_seconds }`. */
function readCors(r: PlainReader, field: Field): CorsConfig | undefined {
  if (!isMapping(field.node?.value)) {
    r.report(r.at(field), field.path, `expected { allow_origins, … }, got ${r.describe(field.node)}`);
    return undefined;
  }
  const fields = r.fields(field.node, field.path, CORS_KEYS);
  if (fields === null) return undefined;
  const get = (key: string): Field | undefined => r.given(fields, key);
  const origins = get('allow_origins');
  if (origins === undefined) {
    r.report(field.keyNode, field.path, 'missing \'allow_origins\' (a list of origins, or ["*"])');
    return undefined;
  }
  const list = (key: string, fallback: string[]) => {
    const found = get(key);
    return found ? readStrings(r, found, 'a list of names') : fallback;
  };
  const credentials = get('allow_credentials');
  const maxAge = get('max_age_seconds');
  return {
    allowOrigins: readStrings(r, origins, 'a list of origins such as ["https://app.example.com"]').map(
      (origin) => origin.toLowerCase(),
    ),
    allowMethods: list('allow_methods', [...DEFAULT_CORS_METHODS]),
    allowHeaders: list('allow_headers', []),
    exposeHeaders: list('expose_headers', []),
    allowCredentials: credentials ? (r.boolean(credentials) ?? false) : false,
    maxAgeSeconds: maxAge ? (r.number(maxAge, { integer: true, min: 0, max: 86_400 * 365 }) ?? null) : null,
  };
}

/** Methods a preflight is told when `allow_methods` is not written. */
export const DEFAULT_CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** A list of CIDRs, each checked at its own line; only the valid ones are kept (the file is refused anyway). */
function readRanges(r: PlainReader, field: Field): string[] {
  const out: string[] = [];
  for (const item of r.items(field, 'a list of CIDR ranges such as ["10.0.0.0/8"]') ?? []) {
    const text = r.string(item);
    if (text === undefined) continue;
    const range = parseRange(text);
    if (range.ok) out.push(text.trim());
    else r.report(item.node, item.path, range.reason);
  }
  return out;
}

function readStrings(r: PlainReader, field: Field, expected: string): string[] {
  const out: string[] = [];
  for (const item of r.items(field, expected) ?? []) {
    const text = r.string(item as Item);
    if (text !== undefined) out.push(text.trim());
  }
  return out;
}

/** The field `key` inside the mapping `field`, to point a problem at its own line. */
function subField(r: PlainReader, field: Field, key: string | undefined): Field | undefined {
  if (key === undefined || !isMapping(field.node?.value)) return undefined;
  return r.entries(field.node, field.path)?.find((entry) => entry.key === key);
}
