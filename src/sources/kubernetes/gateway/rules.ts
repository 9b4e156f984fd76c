import type { NameValue } from '../../../routing/conditions.ts';
import { normalisePrefix } from '../../../routing/normalise.ts';
import { type Backends, backendsOf, mirrorsOf } from './backends.ts';
import {
  type BackendFilters,
  type Filters,
  readBackendFilters,
  readFilter,
  thenApply,
  timeoutsOf,
} from './filters.ts';
import type { RouteKind } from './listeners.ts';
import type { HttpRouteMatch, HttpRouteRule } from './objects.ts';
import { retryOf } from './retry.ts';
import type { BuiltRule, Refusal, RouteContext } from './rule-types.ts';

/**
 * One rule of an HTTPRoute or GRPCRoute in upstreams.yaml's terms (docs/gateway-api.md#routes): its
 * matches as paths with conditions, its filters (filters.ts), its backends (backends.ts) and timeouts.
 */

export function buildRule(
  rule: HttpRouteRule,
  index: number,
  kind: RouteKind,
  namespace: string,
  context: RouteContext,
  refusals: Refusal[],
): BuiltRule | null {
  const where = `rule ${rule.name ?? index}`;
  const refuse = (message: string) => {
    refusals.push({ condition: 'Accepted', reason: 'UnsupportedValue', message: `${where}: ${message}` });
    return null;
  };
  const matches: BuiltRule['matches'] = [];
  const written = rule.matches ?? [];
  for (const match of written.length === 0 ? [{}] : written) {
    const built = kind === 'GRPCRoute' ? grpcMatch(match as GrpcMatch) : httpMatch(match as HttpRouteMatch);
    if (typeof built === 'string') return refuse(built);
    matches.push(built);
  }
  const filters: Filters = {
    requestHeaders: null,
    responseHeaders: null,
    requestRedirect: null,
    policies: null,
    upstreamHost: null,
    mirrorRefs: [],
  };
  for (const filter of rule.filters ?? []) {
    const problem = readFilter(filter, filters);
    if (problem !== null) return refuse(problem);
  }
  if (filters.requestRedirect !== null && filters.policies?.rewrite !== undefined)
    return refuse('RequestRedirect and URLRewrite cannot be used together');
  // Only requests without a body are copied (docs/gateway-api.md#mirrors): a gRPC call always has one.
  if (kind === 'GRPCRoute' && filters.mirrorRefs.length > 0)
    return refuse('filter RequestMirror is not supported on a GRPCRoute (a gRPC call always has a body)');
  const refFilters = new Map<object, BackendFilters>();
  for (const ref of rule.backendRefs ?? []) {
    if ((ref.filters ?? []).length === 0) continue;
    const read = readBackendFilters(ref.filters ?? []);
    if (typeof read === 'string') return refuse(read);
    refFilters.set(ref, read);
  }
  const timeouts = timeoutsOf(rule.timeouts);
  if (typeof timeouts === 'string') return refuse(timeouts);
  const retry = kind === 'HTTPRoute' ? retryOf(rule) : null;
  if (typeof retry === 'string') return refuse(retry);
  // A redirecting rule serves nothing itself: it needs no backend.
  const backend: Backends =
    filters.requestRedirect !== null
      ? { service: null, canary: null, error: null, errorShare: null, protocol: null, refusals: [] }
      : backendsOf(rule.backendRefs ?? [], kind, namespace, context);
  for (const refusal of backend.refusals)
    refusals.push({ ...refusal, message: `${where}: ${refusal.message}` });
  const problem = applyBackendFilters(refFilters, backend, filters);
  if (problem !== null) return refuse(problem);
  const { mirrorRefs, ...served } = filters;
  const mirrorRefusals: Refusal[] = [];
  const mirrors = mirrorsOf(mirrorRefs, kind, namespace, context, mirrorRefusals);
  for (const refusal of mirrorRefusals)
    refusals.push({ ...refusal, message: `${where}: ${refusal.message}` });
  return {
    index,
    name: rule.name ?? null,
    matches,
    ...served,
    mirrors,
    timeouts,
    retry,
    service: backend.service,
    canary: backend.canary,
    backendError: backend.error,
    backendErrorShare: backend.errorShare,
    protocol: backend.protocol,
  };
}

/**
 * A backendRef's filters where its requests go (docs/gateway-api.md#filters): the path's Service's
 * after the rule's, on the path; the canary's after the rule's, on the canary's requests only. A
 * response filter, a URLRewrite or a RequestRedirect beside another weighted backend is refused
 * (they are decided before, or after, the Service is chosen).
 */
function applyBackendFilters(
  refFilters: ReadonlyMap<object, BackendFilters>,
  backend: Backends,
  filters: Filters,
): string | null {
  if (refFilters.size === 0) return null;
  const main = backend.mainRef === undefined ? undefined : refFilters.get(backend.mainRef);
  const canary = backend.canaryRef === undefined ? undefined : refFilters.get(backend.canaryRef);
  if (backend.canary !== null && (main?.response != null || canary?.response != null))
    return 'a ResponseHeaderModifier on a backendRef beside another weighted backendRef is not supported';
  if (backend.canary !== null && ((main?.whole.length ?? 0) > 0 || (canary?.whole.length ?? 0) > 0))
    return 'a URLRewrite or RequestRedirect on a backendRef beside another weighted backendRef is not supported';
  for (const filter of main?.whole ?? []) {
    const problem = readFilter(filter, filters);
    if (problem !== null) return `backendRef ${problem}`;
  }
  if (filters.requestRedirect !== null && filters.policies?.rewrite !== undefined)
    return 'RequestRedirect and URLRewrite cannot be used together';
  const ruleRequest = filters.requestHeaders;
  if (main?.request != null) filters.requestHeaders = thenApply(ruleRequest, main.request);
  if (main?.response != null) filters.responseHeaders = thenApply(filters.responseHeaders, main.response);
  if (backend.canary !== null && (main?.request != null || canary?.request != null))
    backend.canary.requestHeaders =
      canary?.request != null
        ? thenApply(ruleRequest, canary.request)
        : (ruleRequest ?? { set: [], add: [], remove: [] });
  return null;
}

type BuiltMatch = BuiltRule['matches'][number];

function httpMatch(match: HttpRouteMatch): BuiltMatch | string {
  const type = match.path?.type ?? 'PathPrefix';
  const value = match.path?.value ?? '/';
  if (type !== 'PathPrefix' && type !== 'Exact')
    return `path type ${type} is not supported (Exact, PathPrefix)`;
  const prefix = normalisePrefix(value);
  if (!prefix.ok || !value.startsWith('/'))
    return `path ${value} ${prefix.ok ? 'must start with /' : prefix.reason}`;
  const exact = type === 'Exact';
  const path = exact && value.endsWith('/') && prefix.value !== '/' ? `${prefix.value}/` : prefix.value;
  const headers: NameValue[] = [];
  for (const header of match.headers ?? []) {
    if ((header.type ?? 'Exact') !== 'Exact')
      return `header match type ${header.type} is not supported (Exact)`;
    if (!header.name) return 'a header match names no header';
    const name = header.name.toLowerCase();
    // The first match of a name counts; later ones are ignored (the Gateway API's rule).
    if (!headers.some((item) => item.name === name)) headers.push({ name, value: header.value ?? '' });
  }
  const query: NameValue[] = [];
  for (const param of match.queryParams ?? []) {
    if ((param.type ?? 'Exact') !== 'Exact') return `query match type ${param.type} is not supported (Exact)`;
    if (!param.name) return 'a query match names no parameter';
    if (!query.some((item) => item.name === param.name))
      query.push({ name: param.name, value: param.value ?? '' });
  }
  const method = match.method?.toUpperCase() ?? null;
  const conditions =
    method === null && headers.length === 0 && query.length === 0 ? null : { method, headers, query };
  return { prefix: path, exact, conditions };
}

interface GrpcMatch {
  method?: { type?: string; service?: string; method?: string };
  headers?: HttpRouteMatch['headers'];
}

/** A GRPCRoute match: `/service/method` exact, or `/service/` as a prefix; headers as for HTTP. */
function grpcMatch(match: GrpcMatch): BuiltMatch | string {
  const type = match.method?.type ?? 'Exact';
  if (type !== 'Exact') return `method match type ${type} is not supported (Exact)`;
  const service = match.method?.service;
  const method = match.method?.method;
  const name = /^[A-Za-z0-9_.]+$/;
  if (service !== undefined && !name.test(service)) return `service ${service} is not a gRPC service name`;
  if (method !== undefined && !name.test(method)) return `method ${method} is not a gRPC method name`;
  if (method !== undefined && service === undefined)
    return 'a method match without a service is not supported';
  const headers = httpMatch({ headers: match.headers });
  if (typeof headers === 'string') return headers;
  const conditions = headers.conditions === null ? null : { ...headers.conditions, method: null };
  if (service === undefined) return { prefix: '/', exact: false, conditions };
  if (method === undefined) return { prefix: `/${service}`, exact: false, conditions };
  return { prefix: `/${service}/${method}`, exact: true, conditions };
}
