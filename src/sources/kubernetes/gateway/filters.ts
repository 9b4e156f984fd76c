import type { CorsConfig } from '../../../config/policy-types.ts';
import type { HeaderOps, PathTimeouts } from '../../../config/types.ts';
import { unconfigurableHeaderReason } from '../../../header-names.ts';
import { corsProblems } from '../../../routing/cors.ts';
import { normaliseHostKey, normalisePrefix } from '../../../routing/normalise.ts';
import type { RequestRedirectConfig } from '../../../routing/request-redirect.ts';
import type { BackendRef, HeaderModifier, HttpRouteFilter, HttpRouteRule } from './objects.ts';
import type { BuiltRule } from './rule-types.ts';

/**
 * Route rule filters and timeouts (docs/gateway-api.md#filters): RequestHeaderModifier,
 * ResponseHeaderModifier, RequestRedirect, URLRewrite, CORS and RequestMirror into the path's
 * settings; any other filter refuses its rule.
 */

export type Filters = Pick<
  BuiltRule,
  'requestHeaders' | 'responseHeaders' | 'requestRedirect' | 'policies' | 'upstreamHost'
> & {
  /** RequestMirror filters as written; rules.ts resolves their Services as it does backendRefs. */
  mirrorRefs: MirrorRef[];
};

/** One RequestMirror filter: its backendRef and the share (0–1] of requests it receives. */
export interface MirrorRef {
  ref: BackendRef;
  share: number;
}

/** One filter into the rule's settings, or why it cannot be served. */
export function readFilter(filter: HttpRouteFilter, filters: Filters): string | null {
  switch (filter.type) {
    case 'RequestHeaderModifier':
    case 'ResponseHeaderModifier': {
      const ops = headerFilter(filter);
      if (typeof ops === 'string') return ops;
      if (filter.type === 'RequestHeaderModifier') filters.requestHeaders = ops;
      else filters.responseHeaders = ops;
      return null;
    }
    case 'RequestRedirect': {
      const redirect = redirectOf(filter.requestRedirect as RedirectSpec | undefined);
      if (typeof redirect === 'string') return `RequestRedirect: ${redirect}`;
      filters.requestRedirect = redirect;
      return null;
    }
    case 'URLRewrite': {
      const spec = (filter.urlRewrite ?? {}) as RewriteSpec;
      if (spec.hostname !== undefined) {
        const host = normaliseHostKey(spec.hostname);
        if (!host.ok || spec.hostname.includes('*'))
          return `URLRewrite: hostname ${spec.hostname} is not a host name`;
        filters.upstreamHost = host.value;
      }
      if (spec.path !== undefined) {
        const path = pathModifier(spec.path);
        if (typeof path === 'string') return `URLRewrite: ${path}`;
        filters.policies = {
          ...filters.policies,
          rewrite:
            path.kind === 'prefix'
              ? { kind: 'prefix', prefix: path.value }
              : // The whole path, whatever it was: a pattern that always matches, a replacement without groups.
                { kind: 'regex', regex: '^.*$', replacement: path.value },
        };
      }
      return null;
    }
    case 'RequestMirror': {
      const mirror = mirrorOf(filter.requestMirror as MirrorSpec | undefined);
      if (typeof mirror === 'string') return `RequestMirror: ${mirror}`;
      filters.mirrorRefs.push(mirror);
      return null;
    }
    case 'CORS': {
      const cors = corsOf(filter.cors as CorsSpec | undefined);
      if (typeof cors === 'string') return `CORS: ${cors}`;
      filters.policies = { ...filters.policies, cors };
      return null;
    }
    default:
      return `filter ${filter.type} is not supported`;
  }
}

interface MirrorSpec {
  backendRef?: BackendRef;
  percent?: number;
  fraction?: { numerator?: number; denominator?: number };
}

/**
 * `percent` (0–100) or `fraction` (numerator/denominator, denominator 100 unless written) as a share
 * of requests; neither = every request. Both at once is invalid, as the CRD says.
 */
function mirrorOf(spec: MirrorSpec | undefined): MirrorRef | string {
  if (spec?.backendRef === undefined) return 'names no backendRef';
  if (spec.percent !== undefined && spec.fraction !== undefined)
    return 'percent and fraction cannot be used together';
  let share = 1;
  if (spec.percent !== undefined) {
    if (!Number.isInteger(spec.percent) || spec.percent < 0 || spec.percent > 100)
      return `percent ${spec.percent} is not a whole number from 0 to 100`;
    share = spec.percent / 100;
  } else if (spec.fraction !== undefined) {
    const numerator = spec.fraction.numerator;
    const denominator = spec.fraction.denominator ?? 100;
    if (
      !Number.isInteger(numerator) ||
      !Number.isInteger(denominator) ||
      (numerator as number) < 0 ||
      denominator < 1 ||
      (numerator as number) > denominator
    )
      return `fraction ${numerator}/${denominator} is not a share from 0 to 1`;
    share = (numerator as number) / denominator;
  }
  return { ref: spec.backendRef, share };
}

interface CorsSpec {
  allowOrigins?: string[];
  allowMethods?: string[];
  allowHeaders?: string[];
  exposeHeaders?: string[];
  allowCredentials?: boolean;
  maxAge?: number;
}

/**
 * The CORS filter as upstreams.yaml's `cors` (docs/policies.md#cors), checked by the same rules.
 * One difference the Gateway API defines: `*` with `allowCredentials` answers with the request's
 * origin (upstreams.yaml refuses that pair); `maxAge` defaults to 5 seconds, as the CRD does.
 */
function corsOf(spec: CorsSpec | undefined): CorsConfig | string {
  const list = (value: unknown, what: string): string[] | string =>
    value === undefined
      ? []
      : Array.isArray(value) && value.every((item) => typeof item === 'string') && value.length <= 64
        ? value
        : `${what} is not a list of at most 64 strings`;
  const origins = list(spec?.allowOrigins, 'allowOrigins');
  const methods = list(spec?.allowMethods, 'allowMethods');
  const headers = list(spec?.allowHeaders, 'allowHeaders');
  const expose = list(spec?.exposeHeaders, 'exposeHeaders');
  for (const value of [origins, methods, headers, expose]) if (typeof value === 'string') return value;
  const maxAge = spec?.maxAge ?? 5;
  if (!Number.isInteger(maxAge) || maxAge < 1 || maxAge > 86_400 * 365)
    return `maxAge ${maxAge} is not a number of seconds`;
  if ((methods as string[]).includes('*') && methods.length > 1)
    return "'*' in allowMethods must stand alone";
  const cors: CorsConfig = {
    allowOrigins: (origins as string[]).map((origin) => origin.toLowerCase()),
    allowMethods: methods as string[],
    allowHeaders: headers as string[],
    exposeHeaders: expose as string[],
    allowCredentials: spec?.allowCredentials === true,
    maxAgeSeconds: maxAge,
  };
  const problems = corsProblems({ ...cors, allowCredentials: false });
  return problems.length > 0 ? problems.join('; ') : cors;
}

/** A backendRef's own header filters (docs/gateway-api.md#filters). */
export interface BackendFilters {
  request: HeaderOps | null;
  response: HeaderOps | null;
  /** URLRewrite and RequestRedirect, read by readFilter once rules.ts knows the ref takes every request. */
  whole: HttpRouteFilter[];
}

/**
 * Filters on a backendRef: RequestHeaderModifier and ResponseHeaderModifier, applied after the
 * rule's own (rules.ts decides which requests they meet); URLRewrite and RequestRedirect where the
 * backendRef takes every request of the rule; any other filter refuses the rule.
 */
export function readBackendFilters(filters: readonly HttpRouteFilter[]): BackendFilters | string {
  const out: BackendFilters = { request: null, response: null, whole: [] };
  for (const filter of filters) {
    if (filter.type === 'URLRewrite' || filter.type === 'RequestRedirect') {
      out.whole.push(filter);
      continue;
    }
    if (filter.type !== 'RequestHeaderModifier' && filter.type !== 'ResponseHeaderModifier')
      return `filter ${filter.type} on a backendRef is not supported`;
    const ops = headerFilter(filter);
    if (typeof ops === 'string') return `backendRef ${ops}`;
    if (filter.type === 'RequestHeaderModifier') out.request = thenApply(out.request, ops);
    else out.response = thenApply(out.response, ops);
  }
  return out;
}

/**
 * `first`'s operations, then `then`'s, as one set: a name `then` sets or removes loses what `first`
 * did to it; what `then` adds comes after what `first` left.
 */
export function thenApply(first: HeaderOps | null, then: HeaderOps): HeaderOps {
  if (first === null) return then;
  const replaced = new Set([...then.set.map((item) => item.name), ...then.remove]);
  const kept = (items: HeaderOps['set']) => items.filter((item) => !replaced.has(item.name));
  return {
    set: [...kept(first.set), ...then.set],
    add: [...kept(first.add), ...then.add],
    remove: [...first.remove.filter((name) => !replaced.has(name)), ...then.remove],
  };
}

interface RedirectSpec {
  scheme?: string;
  hostname?: string;
  port?: number;
  path?: PathModifierSpec;
  statusCode?: number;
}
interface RewriteSpec {
  hostname?: string;
  path?: PathModifierSpec;
}
interface PathModifierSpec {
  type?: string;
  replaceFullPath?: string;
  replacePrefixMatch?: string;
}

/** 303, 307 and 308 are the extended ones: 307/308 keep a POST a POST, 303 makes it a GET. */
const REDIRECT_CODES: readonly RequestRedirectConfig['statusCode'][] = [301, 302, 303, 307, 308];

function redirectOf(spec: RedirectSpec | undefined): RequestRedirectConfig | string {
  const scheme = spec?.scheme ?? null;
  if (scheme !== null && scheme !== 'http' && scheme !== 'https')
    return `scheme ${scheme} is not http or https`;
  let hostname: string | null = null;
  if (spec?.hostname !== undefined) {
    const host = normaliseHostKey(spec.hostname);
    if (!host.ok || spec.hostname.includes('*')) return `hostname ${spec.hostname} is not a host name`;
    hostname = host.value;
  }
  const port = spec?.port ?? null;
  if (port !== null && (!Number.isInteger(port) || port < 1 || port > 65_535))
    return `port ${port} is not a port`;
  const statusCode = spec?.statusCode ?? 302;
  if (!REDIRECT_CODES.includes(statusCode as RequestRedirectConfig['statusCode']))
    return `statusCode ${statusCode} is not one of ${REDIRECT_CODES.join(', ')}`;
  const path = spec?.path === undefined ? null : pathModifier(spec.path);
  if (typeof path === 'string') return path;
  return { scheme, hostname, port, path, statusCode: statusCode as RequestRedirectConfig['statusCode'] };
}

/** ReplaceFullPath / ReplacePrefixMatch: the value must be a plain path Tollgate would route. */
function pathModifier(spec: PathModifierSpec): { kind: 'full' | 'prefix'; value: string } | string {
  const kind =
    spec.type === 'ReplaceFullPath' ? 'full' : spec.type === 'ReplacePrefixMatch' ? 'prefix' : null;
  if (kind === null) return `path type ${spec.type} is not ReplaceFullPath or ReplacePrefixMatch`;
  const value = kind === 'full' ? spec.replaceFullPath : spec.replacePrefixMatch;
  if (value === undefined) return `path ${spec.type} names no value`;
  const normal = normalisePrefix(value);
  if (!value.startsWith('/') || !normal.ok || /[?#$\\]/.test(value))
    return `path ${value} is not a plain path`;
  return { kind, value: kind === 'prefix' ? normal.value : value };
}

const DURATION_UNITS: Readonly<Record<string, number>> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };

/** A Gateway API Duration (`10s`, `500ms`, `1m30s`) in ms; null when `text` is not one. */
export function gatewayDurationMs(text: string): number | null {
  if (!/^([0-9]{1,5}(h|m|s|ms)){1,4}$/.test(text)) return null;
  let ms = 0;
  for (const [, amount, unit] of text.matchAll(/([0-9]+)(h|ms|m|s)/g))
    ms += Number(amount) * (DURATION_UNITS[unit as string] as number);
  return ms;
}

/** `timeouts.request` / `backendRequest` (Gateway API durations such as `10s`, `500ms`, `1m30s`). */
export function timeoutsOf(spec: HttpRouteRule['timeouts']): PathTimeouts | null | string {
  if (spec === undefined) return null;
  const parse = (text: string | undefined, what: string): number | null | string => {
    if (text === undefined) return null;
    if (!/^([0-9]{1,5}(h|m|s|ms)){1,4}$/.test(text))
      return `timeouts.${what} ${text} is not a duration such as 10s or 500ms`;
    let ms = 0;
    for (const [, amount, unit] of text.matchAll(/([0-9]+)(h|ms|m|s)/g))
      ms += Number(amount) * (DURATION_UNITS[unit as string] as number);
    // 0s switches the timeout off (the spec's meaning): main.yaml's applies.
    return ms === 0 ? null : ms;
  };
  const request = parse(spec.request, 'request');
  const backend = parse(spec.backendRequest, 'backendRequest');
  if (typeof request === 'string') return request;
  if (typeof backend === 'string') return backend;
  if (request !== null && backend !== null && backend > request)
    return 'timeouts.backendRequest may not be longer than timeouts.request';
  // Both bound the wait for the upstream's response headers (docs/gateway-api.md#limits).
  const responseMs = backend ?? request;
  return responseMs === null ? null : { connectMs: null, responseMs, idleMs: null };
}

/** RequestHeaderModifier / ResponseHeaderModifier as header rules; anything else is refused. */
function headerFilter(filter: HttpRouteFilter): HeaderOps | string {
  let modifier: HeaderModifier | undefined;
  if (filter.type === 'RequestHeaderModifier') modifier = filter.requestHeaderModifier;
  else if (filter.type === 'ResponseHeaderModifier') modifier = filter.responseHeaderModifier;
  else return `filter ${filter.type} is not supported`;
  const ops: HeaderOps = { set: [], add: [], remove: [] };
  for (const [list, items] of [
    ['set', modifier?.set ?? []],
    ['add', modifier?.add ?? []],
  ] as const) {
    for (const item of items) {
      const problem = item.name ? unconfigurableHeaderReason(item.name) : 'a header names nothing';
      if (problem !== null) return `${filter.type}: ${problem}`;
      if (!/^[\x20-\x7e\t]*$/.test(item.value ?? ''))
        return `${filter.type}: the value of ${item.name} is not printable`;
      ops[list].push({ name: (item.name as string).toLowerCase(), value: item.value ?? '' });
    }
  }
  for (const name of modifier?.remove ?? []) {
    const problem = unconfigurableHeaderReason(name);
    if (problem !== null) return `${filter.type}: ${problem}`;
    ops.remove.push(name.toLowerCase());
  }
  return ops;
}
