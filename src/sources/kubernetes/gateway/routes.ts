import { pathConfig } from '../../../config/path-config.ts';
import type { PathConfig } from '../../../config/types.ts';
import { attachedThrough } from '../../../routing/conditions.ts';
import { hostnameKey, intersectHostnames } from './hostnames.ts';
import {
  holdsClaim,
  isolatedHosts,
  namespaceAllowed,
  type ResolvedGateway,
  type ResolvedListener,
  type RouteKind,
} from './listeners.ts';
import { type Condition, condition, GATEWAY_GROUP, type HttpRoute, type ParentReference } from './objects.ts';
import { refusalSummary } from './refusal-summary.ts';
import type { BuiltRule, Refusal, RouteContext } from './rule-types.ts';
import { buildRule } from './rules.ts';

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

/**
 * One route's translation. Never changed once returned (translation-cache.ts shares it between
 * translations): what later steps add (host ownership problems) goes into a copy.
 */
export interface RouteOutcome {
  kind: RouteKind;
  namespace: string;
  name: string;
  generation: number | undefined;
  /** Only the parentRefs naming our Gateways: the status entries Tollgate writes. */
  parents: ParentOutcome[];
  entries: PathEntry[];
  /**
   * The host keys it claims (docs/gateway-api.md#host-ownership): its hostnames intersected with
   * those of the listeners it names that accept it (kind, namespace), served or not. Named, not
   * compiled: a rule refused or a certificate missing for a moment does not give the host away.
   */
  claims: string[];
  /** What is wrong with it, for Events and logs (empty when served as written). */
  problems: string[];
  /** Accepted by at least one of our parents. */
  accepted: boolean;
  /** The names of its rules (a policy's sectionName names one). */
  ruleNames: string[];
  /**
   * The listeners it attaches to, once per attachment: translate.ts counts them into each
   * listener's attachedRoutes (the resolved Gateways are shared between translations, never counted into).
   */
  attached: ResolvedListener[];
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
    claims: [],
    problems: [],
    accepted: false,
    attached: [],
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
  const unsupportedMessage = refusalSummary(
    refusals.filter((refusal) => refusal.condition === 'Accepted').map((refusal) => refusal.message),
  );
  outcome.problems.push(...refusals.map((refusal) => refusal.message));

  const hostsOf = new Map<string, PathEntry['gateways']>();
  const claims = new Set<string>();
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
          ? [condition('PartiallyInvalid', true, 'UnsupportedValue', unsupportedMessage, generation)]
          : []),
      ],
    });
    const listeners = gateway.listeners.filter(
      (listener) =>
        (ref.sectionName === undefined || listener.name === ref.sectionName) &&
        (ref.port === undefined || listener.port === ref.port),
    );
    if (listeners.length === 0) {
      const named = [
        ...(ref.sectionName === undefined ? [] : [` ${ref.sectionName}`]),
        ...(ref.port === undefined ? [] : [` on port ${ref.port}`]),
      ].join('');
      const message = `Gateway ${gatewayKey} has no listener${named}`;
      outcome.parents.push(parent(false, 'NoMatchingParent', message));
      outcome.problems.push(message);
      continue;
    }
    const admitting = listeners.filter(
      (listener) =>
        listener.kinds.includes(kind) &&
        namespaceAllowed(listener, namespace, () => context.namespaces.get(namespace)),
    );
    // A route attaches to an accepted listener that is not programmed (its certificate is
    // missing): it is counted in attachedRoutes, and served once the listener is. Such a listener
    // still carries the route's claim; one refused for its own shape (a bad hostname) carries none.
    for (const listener of admitting.filter(listenerAccepted)) {
      const hosts = isolatedHosts(
        intersectHostnames(hostnames, listener.hostname),
        listener,
        gateway.listeners,
      );
      for (const host of hosts) claims.add(host);
      if (!listener.usable && hosts.length > 0) outcome.attached.push(listener);
    }
    const allowed = admitting.filter((listener) => listener.usable);
    const waiting = admitting.filter(
      (listener) => listenerAccepted(listener) && intersectHostnames(hostnames, listener.hostname).length > 0,
    );
    if (allowed.length === 0 && waiting.length > 0) {
      // Attached (and counted) but not served yet: Accepted, as the conformance suite's
      // GatewayWithAttachedRoutes expects; the listener's own conditions say what it lacks.
      const names = waiting.map((listener) => listener.name).join(', ');
      const message = `attached to listener ${names} of Gateway ${gatewayKey}, which is not programmed (see its conditions): served once it is`;
      outcome.parents.push(parent(true, 'Accepted', message));
      outcome.problems.push(message);
      outcome.accepted = true;
      continue;
    }
    if (allowed.length === 0) {
      const message = `no listener of Gateway ${gatewayKey} allows a ${kind} of namespace ${namespace}`;
      outcome.parents.push(parent(false, 'NotAllowedByListeners', message));
      outcome.problems.push(message);
      continue;
    }
    let matched = false;
    for (const listener of allowed) {
      const hosts = isolatedHosts(
        intersectHostnames(hostnames, listener.hostname),
        listener,
        gateway.listeners,
      );
      if (hosts.length === 0) continue;
      matched = true;
      outcome.attached.push(listener);
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
      outcome.parents.push(parent(false, 'UnsupportedValue', unsupportedMessage));
      continue;
    }
    outcome.parents.push(parent(true, 'Accepted', 'served by Tollgate'));
    outcome.accepted = true;
  }

  outcome.claims = [...claims];
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
          path: pathConfig(match.prefix, {
            exact: match.exact,
            service: rule.service,
            // Reached only through HTTPS listeners: plain HTTP is redirected, never served.
            toHttps: gateways.every((via) => via.protocol === 'HTTPS'),
            origin: `${kind.toLowerCase()}/${key}`,
            requestHeaders: rule.requestHeaders,
            responseHeaders: rule.responseHeaders,
            // Served only on the kinds of listener it came through (docs/gateway-api.md#ports).
            conditions: attachedThrough(
              match.conditions,
              gateways.map((via) => via.protocol),
            ),
            backendError: rule.backendError,
            requestRedirect: rule.requestRedirect,
            policies: rule.policies,
            upstreamHost: rule.upstreamHost,
            timeouts: rule.timeouts,
            retry: rule.retry,
            canary: rule.canary,
            backendErrorShare: rule.backendErrorShare,
            mirrors: rule.mirrors,
            ...(kind === 'GRPCRoute' || rule.protocol === 'h2c' ? { upstreamProtocol: 'h2c' as const } : {}),
          }),
        });
      }
    }
  }
  return outcome;
}

/** True when the listener's own shape was accepted (it may still lack a reference, e.g. its certificate). */
function listenerAccepted(listener: ResolvedListener): boolean {
  return holdsClaim(listener);
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
