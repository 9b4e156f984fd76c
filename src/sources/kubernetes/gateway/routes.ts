import type { V1Service } from '@kubernetes/client-node';
import type { PathPolicies } from '../../../config/policy-types.ts';
import type { CanaryConfig, HeaderOps, PathConfig, PathTimeouts } from '../../../config/types.ts';
import { unconfigurableHeaderReason } from '../../../header-names.ts';
import type { NameValue, RouteConditions } from '../../../routing/conditions.ts';
import { normaliseHostKey, normalisePrefix } from '../../../routing/normalise.ts';
import type { RequestRedirectConfig } from '../../../routing/request-redirect.ts';
import { referencePermitted } from './grants.ts';
import { hostnameKey, intersectHostnames } from './hostnames.ts';
import { namespaceAllowed, type ResolvedGateway, type RouteKind } from './listeners.ts';
import {
  type BackendRef,
  type Condition,
  condition,
  GATEWAY_GROUP,
  type HeaderModifier,
  type HttpRoute,
  type HttpRouteFilter,
  type HttpRouteMatch,
  type HttpRouteRule,
  type ParentReference,
  type ReferenceGrant,
} from './objects.ts';

/** What a route translation reads besides the route. */
export interface RouteContext {
  /** Our Gateways, resolved, by `namespace/name`. */
  gateways: ReadonlyMap<string, ResolvedGateway>;
  /** Namespace labels by name (allowedRoutes Selector). */
  namespaces: ReadonlyMap<string, Readonly<Record<string, string>>>;
  services: ReadonlyMap<string, V1Service>;
  grants: readonly ReferenceGrant[];
}

/** One path a route asks for on one host, before host ownership and policies are applied. */
export interface PathEntry {
  host: string;
  path: PathConfig;
  /** The route (`namespace/name`), its kind, its rule (name or index) and the Gateways it came through. */
  route: string;
  kind: RouteKind;
  namespace: string;
  rule: { index: number; name: string | null };
  gateways: Array<{ gateway: string; listener: string; protocol: 'HTTP' | 'HTTPS' }>;
  /** Gateway API precedence after the path (the matcher orders exact and prefix length itself). */
  rank: { method: number; headers: number; query: number; age: number; match: number };
}

/** Status of one parentRef that is one of our Gateways. */
export interface ParentOutcome {
  parentRef: ParentReference;
  conditions: Condition[];
}

export interface RouteOutcome {
  kind: RouteKind;
  namespace: string;
  name: string;
  generation: number | undefined;
  /** Only the parentRefs naming our Gateways: the status entries Tollgate writes. */
  parents: ParentOutcome[];
  entries: PathEntry[];
  /** What is wrong with it, for Events and logs (empty when served as written). */
  problems: string[];
  /** Accepted by at least one of our parents. */
  accepted: boolean;
  /** The names of its rules (a policy's sectionName names one). */
  ruleNames: string[];
}

interface BuiltRule {
  index: number;
  name: string | null;
  matches: Array<{ prefix: string; exact: boolean; conditions: RouteConditions | null }>;
  requestHeaders: HeaderOps | null;
  responseHeaders: HeaderOps | null;
  requestRedirect: RequestRedirectConfig | null;
  policies: PathPolicies | null;
  upstreamHost: string | null;
  timeouts: PathTimeouts | null;
  service: PathConfig['service'];
  canary: CanaryConfig | null;
  backendError: string | null;
  backendErrorShare: number | null;
}

/** A refusal of part of a route, with the status reason it is reported under. */
interface Refusal {
  condition: 'Accepted' | 'ResolvedRefs';
  reason: string;
  message: string;
}

/**
 * One HTTPRoute or GRPCRoute against our Gateways (docs/gateway-api.md#routes): which parents accept
 * it (listener, namespace, kind, hostname), and the paths its valid rules ask for on the hosts it got.
 * A rule that cannot be served (a RegularExpression path, an unknown filter) is left out and
 * reported; the route's other rules serve. A backend that cannot be resolved keeps its rule, which
 * answers 500. Pure.
 */
export function translateRoute(
  route: HttpRoute,
  kind: RouteKind,
  age: number,
  context: RouteContext,
): RouteOutcome {
  const namespace = route.metadata?.namespace ?? 'default';
  const name = route.metadata?.name ?? '';
  const generation = route.metadata?.generation;
  const outcome: RouteOutcome = {
    kind,
    namespace,
    name,
    generation,
    parents: [],
    entries: [],
    problems: [],
    accepted: false,
    ruleNames: (route.spec?.rules ?? []).flatMap((rule) => (rule.name ? [rule.name] : [])),
  };
  const ours = (route.spec?.parentRefs ?? []).filter(
    (ref) =>
      (ref.group ?? GATEWAY_GROUP) === GATEWAY_GROUP &&
      (ref.kind ?? 'Gateway') === 'Gateway' &&
      context.gateways.has(`${ref.namespace ?? namespace}/${ref.name ?? ''}`),
  );
  if (ours.length === 0) return outcome;

  const refusals: Refusal[] = [];
  const hostnames: string[] = [];
  for (const hostname of route.spec?.hostnames ?? []) {
    const key = hostnameKey(hostname);
    if (key.ok) hostnames.push(key.value);
    else
      refusals.push({
        condition: 'Accepted',
        reason: 'UnsupportedValue',
        message: `hostname ${hostname} ${key.reason}`,
      });
  }
  const rules: BuiltRule[] = [];
  for (const [index, rule] of (route.spec?.rules ?? []).entries()) {
    const built = buildRule(rule, index, kind, namespace, context, refusals);
    if (built !== null) rules.push(built);
  }
  const resolved = refusals.find((refusal) => refusal.condition === 'ResolvedRefs');
  const unsupported = refusals.find((refusal) => refusal.condition === 'Accepted');
  outcome.problems.push(...refusals.map((refusal) => refusal.message));

  const hostsOf = new Map<string, PathEntry['gateways']>();
  for (const ref of ours) {
    const gatewayKey = `${ref.namespace ?? namespace}/${ref.name ?? ''}`;
    const gateway = context.gateways.get(gatewayKey) as ResolvedGateway;
    const parent = (accepted: boolean, reason: string, message: string): ParentOutcome => ({
      parentRef: parentRefOf(ref),
      conditions: [
        condition('Accepted', accepted, reason, message, generation),
        resolved
          ? condition('ResolvedRefs', false, resolved.reason, resolved.message, generation)
          : condition('ResolvedRefs', true, 'ResolvedRefs', 'every reference resolved', generation),
        ...(accepted && unsupported
          ? [condition('PartiallyInvalid', true, 'UnsupportedValue', unsupported.message, generation)]
          : []),
      ],
    });
    const listeners = gateway.listeners.filter(
      (listener) =>
        (ref.sectionName === undefined || listener.name === ref.sectionName) &&
        (ref.port === undefined || listener.port === ref.port),
    );
    if (listeners.length === 0) {
      const message = `Gateway ${gatewayKey} has no listener ${ref.sectionName ?? ''}${ref.port === undefined ? '' : ` on port ${ref.port}`}`;
      outcome.parents.push(parent(false, 'NoMatchingParent', message));
      outcome.problems.push(message);
      continue;
    }
    const allowed = listeners.filter(
      (listener) =>
        listener.usable &&
        listener.kinds.includes(kind) &&
        namespaceAllowed(listener, namespace, context.namespaces.get(namespace)),
    );
    if (allowed.length === 0) {
      const message = `no listener of Gateway ${gatewayKey} allows a ${kind} of namespace ${namespace}`;
      outcome.parents.push(parent(false, 'NotAllowedByListeners', message));
      outcome.problems.push(message);
      continue;
    }
    let matched = false;
    for (const listener of allowed) {
      const hosts = intersectHostnames(hostnames, listener.hostname);
      if (hosts.length === 0) continue;
      matched = true;
      listener.attachedRoutes += 1;
      for (const host of hosts) {
        const via = hostsOf.get(host) ?? [];
        hostsOf.set(host, via);
        via.push({ gateway: gatewayKey, listener: listener.name, protocol: listener.protocol });
      }
    }
    if (!matched) {
      const message = `no hostname of this route meets a listener hostname of Gateway ${gatewayKey}`;
      outcome.parents.push(parent(false, 'NoMatchingListenerHostname', message));
      outcome.problems.push(message);
      continue;
    }
    if (rules.length === 0 && unsupported) {
      outcome.parents.push(parent(false, 'UnsupportedValue', unsupported.message));
      continue;
    }
    outcome.parents.push(parent(true, 'Accepted', 'served by Tollgate'));
    outcome.accepted = true;
  }

  const key = `${namespace}/${name}`;
  for (const [host, gateways] of hostsOf) {
    for (const rule of rules) {
      for (const [matchIndex, match] of rule.matches.entries()) {
        outcome.entries.push({
          host,
          route: key,
          kind,
          namespace,
          rule: { index: rule.index, name: rule.name },
          gateways,
          rank: {
            method: match.conditions?.method ? 1 : 0,
            headers: match.conditions?.headers.length ?? 0,
            query: match.conditions?.query.length ?? 0,
            age,
            match: rule.index * 1000 + matchIndex,
          },
          path: {
            prefix: match.prefix,
            exact: match.exact,
            servers: [],
            service: rule.service,
            // Reached only through HTTPS listeners: plain HTTP is redirected, never served.
            toHttps: gateways.every((via) => via.protocol === 'HTTPS'),
            authorization: null,
            rateLimit: null,
            healthCheck: null,
            unavailable: null,
            origin: `${kind.toLowerCase()}/${key}`,
            requestHeaders: rule.requestHeaders,
            responseHeaders: rule.responseHeaders,
            redirectTo: null,
            authFailureLimit: null,
            conditions: match.conditions,
            backendError: rule.backendError,
            requestRedirect: rule.requestRedirect,
            policies: rule.policies,
            upstreamHost: rule.upstreamHost,
            timeouts: rule.timeouts,
            canary: rule.canary,
            backendErrorShare: rule.backendErrorShare,
            ...(kind === 'GRPCRoute' ? { upstreamProtocol: 'h2c' as const } : {}),
          },
        });
      }
    }
  }
  return outcome;
}

/** The parentRef as written back into status (defaults filled in, as other controllers do). */
function parentRefOf(ref: ParentReference): ParentReference {
  return {
    group: ref.group ?? GATEWAY_GROUP,
    kind: ref.kind ?? 'Gateway',
    ...(ref.namespace === undefined ? {} : { namespace: ref.namespace }),
    name: ref.name ?? '',
    ...(ref.sectionName === undefined ? {} : { sectionName: ref.sectionName }),
    ...(ref.port === undefined ? {} : { port: ref.port }),
  };
}

function buildRule(
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
  };
  for (const filter of rule.filters ?? []) {
    const problem = readFilter(filter, filters);
    if (problem !== null) return refuse(problem);
  }
  if (filters.requestRedirect !== null && filters.policies?.rewrite !== undefined)
    return refuse('RequestRedirect and URLRewrite cannot be used together');
  for (const ref of rule.backendRefs ?? [])
    if ((ref.filters ?? []).length > 0) return refuse('filters on a backendRef are not supported');
  const timeouts = timeoutsOf(rule.timeouts);
  if (typeof timeouts === 'string') return refuse(timeouts);
  // A redirecting rule serves nothing itself: it needs no backend.
  const backend: Backends =
    filters.requestRedirect !== null
      ? { service: null, canary: null, error: null, errorShare: null, refusals: [] }
      : backendsOf(rule.backendRefs ?? [], kind, namespace, context);
  for (const refusal of backend.refusals)
    refusals.push({ ...refusal, message: `${where}: ${refusal.message}` });
  return {
    index,
    name: rule.name ?? null,
    matches,
    ...filters,
    timeouts,
    service: backend.service,
    canary: backend.canary,
    backendError: backend.error,
    backendErrorShare: backend.errorShare,
  };
}

type Filters = Pick<
  BuiltRule,
  'requestHeaders' | 'responseHeaders' | 'requestRedirect' | 'policies' | 'upstreamHost'
>;

/** One filter into the rule's settings, or why it cannot be served. */
function readFilter(filter: HttpRouteFilter, filters: Filters): string | null {
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
          rewrite:
            path.kind === 'prefix'
              ? { kind: 'prefix', prefix: path.value }
              : // The whole path, whatever it was: a pattern that always matches, a replacement without groups.
                { kind: 'regex', regex: '^.*$', replacement: path.value },
        };
      }
      return null;
    }
    default:
      return `filter ${filter.type} is not supported`;
  }
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
  if (statusCode !== 301 && statusCode !== 302) return `statusCode ${statusCode} is not 301 or 302`;
  const path = spec?.path === undefined ? null : pathModifier(spec.path);
  if (typeof path === 'string') return path;
  return { scheme, hostname, port, path, statusCode };
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

/** `timeouts.request` / `backendRequest` (Gateway API durations such as `10s`, `500ms`, `1m30s`). */
function timeoutsOf(spec: HttpRouteRule['timeouts']): PathTimeouts | null | string {
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

interface Backends {
  service: PathConfig['service'];
  canary: CanaryConfig | null;
  error: string | null;
  /** Share of requests owed to unresolvable backendRefs beside resolvable ones (answered 500). */
  errorShare: number | null;
  refusals: Refusal[];
}

/**
 * The Services a rule forwards to, split by `weight` (0 = none): the first resolvable weighted
 * backendRef is the path's Service, a second one takes its weighted share (the canary split of
 * docs/traffic.md); a third resolvable one is not served (reported). A backendRef that cannot be
 * resolved (unknown kind, another namespace without a ReferenceGrant, no such Service or port) is
 * reported and keeps its share of requests, answered 500, as the Gateway API asks; when none can
 * be resolved, or none has a weight, every request of the rule answers 500.
 */
function backendsOf(
  refs: readonly BackendRef[],
  kind: RouteKind,
  namespace: string,
  context: RouteContext,
): Backends {
  const refusals: Refusal[] = [];
  const weighted = refs
    .filter((ref) => (ref.weight ?? 1) !== 0)
    .map((ref) => ({ weight: ref.weight ?? 1, resolved: serviceOf(ref, kind, namespace, context) }));
  const valid: Array<{ weight: number; service: ResolvedService }> = [];
  let invalidWeight = 0;
  for (const { weight, resolved } of weighted) {
    if ('refusal' in resolved) {
      refusals.push(resolved.refusal);
      invalidWeight += weight;
    } else valid.push({ weight, service: resolved.service });
  }
  if (weighted.length === 0)
    return {
      service: null,
      canary: null,
      error: 'the rule has no backend with a weight above 0',
      errorShare: null,
      refusals,
    };
  const [first, second, ...rest] = valid;
  if (first === undefined)
    return {
      service: null,
      canary: null,
      error: refusals.map((r) => r.message).join('; '),
      errorShare: null,
      refusals,
    };
  if (rest.length > 0)
    refusals.push({
      condition: 'Accepted',
      reason: 'UnsupportedValue',
      message: `${valid.length} weighted backendRefs: only two Services per rule are served`,
    });
  const canary: CanaryConfig | null =
    second === undefined
      ? null
      : {
          service: second.service,
          origin: `${kind.toLowerCase()} backendRef ${second.service.namespace}/${second.service.name}`,
          weight: second.weight,
          weightTotal: first.weight + second.weight,
          header: null,
          headerValue: null,
          cookie: null,
        };
  const served = first.weight + (second?.weight ?? 0);
  const errorShare = invalidWeight === 0 ? null : invalidWeight / (served + invalidWeight);
  return { service: first.service, canary, error: null, errorShare, refusals };
}

type ResolvedService = { name: string; namespace: string; port: string };

function serviceOf(
  ref: BackendRef,
  kind: RouteKind,
  namespace: string,
  context: RouteContext,
): { service: ResolvedService } | { refusal: Refusal } {
  const fail = (reason: string, message: string) => ({
    refusal: { condition: 'ResolvedRefs' as const, reason, message },
  });
  if ((ref.group ?? '') !== '' || (ref.kind ?? 'Service') !== 'Service')
    return fail('InvalidKind', `backendRef ${ref.group ?? ''}/${ref.kind} ${ref.name} is not a Service`);
  const target = ref.namespace ?? namespace;
  const key = `${target}/${ref.name ?? ''}`;
  if (
    !referencePermitted(context.grants, {
      from: { group: GATEWAY_GROUP, kind, namespace },
      to: { group: '', kind: 'Service', namespace: target, name: ref.name ?? '' },
    })
  )
    return fail(
      'RefNotPermitted',
      `no ReferenceGrant in ${target} allows a ${kind} of ${namespace} to use Service ${key}`,
    );
  const service = context.services.get(key);
  if (service === undefined) return fail('BackendNotFound', `Service ${key} does not exist`);
  if (ref.port === undefined) return fail('UnsupportedValue', `backendRef ${key} names no port`);
  const port = (service.spec?.ports ?? []).find((candidate) => candidate.port === ref.port);
  if (port === undefined) return fail('BackendNotFound', `Service ${key} has no port ${ref.port}`);
  return { service: { name: ref.name ?? '', namespace: target, port: port.name ?? '' } };
}
