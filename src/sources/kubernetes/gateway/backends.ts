import type { CanaryConfig, MirrorConfig, PathConfig } from '../../../config/types.ts';
import type { RouteKind } from './listeners.ts';
import { type BackendRef, GATEWAY_GROUP } from './objects.ts';
import type { Refusal, RouteContext } from './rule-types.ts';

export interface Backends {
  service: PathConfig['service'];
  canary: CanaryConfig | null;
  error: string | null;
  /** Share of requests owed to unresolvable backendRefs beside resolvable ones (answered 500). */
  errorShare: number | null;
  /** `h2c` when the Service ports say `appProtocol: kubernetes.io/h2c`; null = as any path. */
  protocol: 'h2c' | null;
  /** The backendRefs that became the path's Service and its canary (their filters apply to them). */
  mainRef?: BackendRef;
  canaryRef?: BackendRef;
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
export function backendsOf(
  refs: readonly BackendRef[],
  kind: RouteKind,
  namespace: string,
  context: RouteContext,
): Backends {
  const refusals: Refusal[] = [];
  const weighted = refs
    .filter((ref) => (ref.weight ?? 1) !== 0)
    .map((ref) => ({ ref, weight: ref.weight ?? 1, resolved: serviceOf(ref, kind, namespace, context) }));
  const valid: Array<{ ref: BackendRef; weight: number; service: ResolvedService; h2c: boolean }> = [];
  let invalidWeight = 0;
  for (const { ref, weight, resolved } of weighted) {
    if ('refusal' in resolved) {
      refusals.push(resolved.refusal);
      invalidWeight += weight;
    } else valid.push({ ref, weight, service: resolved.service, h2c: resolved.h2c });
  }
  if (weighted.length === 0)
    return {
      service: null,
      canary: null,
      error: 'the rule has no backend with a weight above 0',
      errorShare: null,
      protocol: null,
      refusals,
    };
  const [first, second, ...rest] = valid;
  if (first === undefined)
    return {
      service: null,
      canary: null,
      error: refusals.map((r) => r.message).join('; '),
      errorShare: null,
      protocol: null,
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
  // One protocol per path: both sides of a split must speak it (docs/gateway-api.md#routes).
  // A second Service of another protocol is reported and takes no traffic.
  const protocol = first.h2c ? 'h2c' : null;
  const mixed = second !== undefined && second.h2c !== first.h2c;
  if (mixed)
    refusals.push({
      condition: 'ResolvedRefs',
      reason: 'UnsupportedProtocol',
      message: `Service ${second.service.namespace}/${second.service.name} does not share the appProtocol of Service ${first.service.namespace}/${first.service.name}`,
    });
  return {
    service: first.service,
    canary: mixed ? null : canary,
    error: null,
    errorShare,
    protocol,
    refusals,
    mainRef: first.ref,
    ...(mixed || second === undefined ? {} : { canaryRef: second.ref }),
  };
}

type ResolvedService = { name: string; namespace: string; port: string };

/**
 * A RequestMirror filter's Services (docs/gateway-api.md#filters), resolved and checked as
 * backendRefs are; one that cannot be resolved is reported and mirrors nothing, the main traffic
 * is left alone.
 */
export function mirrorsOf(
  mirrors: readonly { ref: BackendRef; share: number }[],
  kind: RouteKind,
  namespace: string,
  context: RouteContext,
  refusals: Refusal[],
): MirrorConfig[] | null {
  const out: MirrorConfig[] = [];
  for (const { ref, share } of mirrors) {
    const resolved = serviceOf(ref, kind, namespace, context);
    if ('refusal' in resolved)
      refusals.push({ ...resolved.refusal, message: `RequestMirror: ${resolved.refusal.message}` });
    else if (share > 0) out.push({ service: resolved.service, share });
  }
  return out.length === 0 ? null : out;
}

function serviceOf(
  ref: BackendRef,
  kind: RouteKind,
  namespace: string,
  context: RouteContext,
): { service: ResolvedService; h2c: boolean } | { refusal: Refusal } {
  const fail = (reason: string, message: string) => ({
    refusal: { condition: 'ResolvedRefs' as const, reason, message },
  });
  if ((ref.group ?? '') !== '' || (ref.kind ?? 'Service') !== 'Service')
    return fail('InvalidKind', `backendRef ${ref.group ?? ''}/${ref.kind} ${ref.name} is not a Service`);
  const target = ref.namespace ?? namespace;
  const key = `${target}/${ref.name ?? ''}`;
  if (
    !context.permits({
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
  // `kubernetes.io/h2c`: HTTP/2 without TLS (Gateway API backend protocols). `kubernetes.io/ws` needs
  // nothing: WebSockets go upstream over HTTP/1.1 on every path. Other values are served as before.
  const h2c = port.appProtocol === 'kubernetes.io/h2c';
  return { service: { name: ref.name ?? '', namespace: target, port: port.name ?? '' }, h2c };
}
