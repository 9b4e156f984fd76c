import type { V1Secret } from '@kubernetes/client-node';
import { DEFAULT_HOST } from '../../../routing/normalise.ts';
import type { ClientCheckPem } from '../ingress/certificates.ts';
import { tlsPair } from '../secret-data.ts';
import {
  type CaObjects,
  type FrontendValidation,
  frontendCaRefs,
  frontendValidation,
} from './frontend-tls.ts';
import { referencePermitted } from './grants.ts';
import { hostnameKey, hostWithin } from './hostnames.ts';
import {
  type Condition,
  condition,
  GATEWAY_GROUP,
  type Gateway,
  type GatewayInfrastructure,
  type LabelSelector,
  type Listener,
  parametersProblem,
  type ReferenceGrant,
} from './objects.ts';
import type { Lookup } from './reads.ts';

/** The listener `Accepted` reason of a frontend validation none of whose CA references resolves. */
const NO_VALID_CA = 'NoValidCACertificate';

/**
 * True when the listener holds its hostname and port (the routes' claims, docs/gateway-api.md
 * #host-ownership, and conflicts, #listener-conflicts): its own shape was accepted, though it may lack
 * a reference (its certificate, its client CA). A listener refused for its shape (a bad hostname, an
 * unsupported protocol, a conflict) holds nothing. One refused for its client CA (`Accepted: False,
 * NoValidCACertificate`) keeps holding, so its host is never served by another listener without the
 * check.
 */
export function holdsClaim(listener: Pick<ResolvedListener, 'conditions'>): boolean {
  return listener.conditions.some(
    (item) => item.type === 'Accepted' && (item.status === 'True' || item.reason === NO_VALID_CA),
  );
}

/**
 * Listener isolation (docs/gateway-api.md#routes): a request goes to the most specific listener of
 * its Gateway on its port that matches its host, and only the routes attached to that listener serve
 * it. So of the hosts a route gets through `listener`, those lying within a more specific sibling's
 * hostname (a listener of the same Gateway served on the same port, holding its hostname) are left
 * out: through `*.example.com`, not `*.foo.example.com` nor `abc.foo.example.com` where the Gateway
 * has listeners for those; through a listener without hostname, none of the three.
 */
export function isolatedHosts(
  hosts: readonly string[],
  listener: ResolvedListener,
  siblings: readonly ResolvedListener[],
): string[] {
  const narrower = siblings.filter(
    (other) =>
      other !== listener &&
      other.protocol === listener.protocol &&
      other.hostname !== null &&
      other.hostname !== listener.hostname &&
      hostWithin(other.hostname, listener.hostname) &&
      holdsClaim(other),
  );
  return hosts.filter(
    (host) => host === DEFAULT_HOST || !narrower.some((other) => hostWithin(host, other.hostname as string)),
  );
}

/** The route kinds a Tollgate listener serves: HTTP and HTTPS listeners take both. */
export const ROUTE_KINDS = ['HTTPRoute', 'GRPCRoute'] as const;
export type RouteKind = (typeof ROUTE_KINDS)[number];

/** A listener of one of our Gateways, checked: what routes attach to (docs/gateway-api.md#gateways). */
export interface ResolvedListener {
  gateway: string;
  gatewayNamespace: string;
  name: string;
  port: number | null;
  protocol: 'HTTP' | 'HTTPS';
  /** Host key (`a.example.com`, `*.example.com`), or null for any host. */
  hostname: string | null;
  /** Routes may attach (the listener is valid). */
  usable: boolean;
  from: 'Same' | 'All' | 'Selector';
  selector: LabelSelector | null;
  kinds: RouteKind[];
  /** The certificate of an HTTPS listener, checked. */
  certificate: { secret: string; certificate: string; key: string } | null;
  /** The client-certificate check of an HTTPS listener (spec.tls.frontend), or null. */
  clientCertificates: ClientCheckPem | null;
  conditions: Condition[];
  /** Counted by the route translation. */
  attachedRoutes: number;
}

export interface ResolvedGateway {
  namespace: string;
  name: string;
  generation: number | undefined;
  listeners: ResolvedListener[];
  /** Why its `infrastructure.parametersRef` is refused (Accepted=False InvalidParameters), or null. */
  invalidParameters: string | null;
  /** `spec.tls.frontend` lets clients in without a valid certificate somewhere (AllowInsecureFallback). */
  insecureFrontend: boolean;
}

/** The `namespace/name` of every Secret a Gateway's listeners name (what the watches must list). */
export function gatewaySecrets(gateway: Gateway): string[] {
  const namespace = gateway.metadata?.namespace ?? 'default';
  const names = new Set<string>();
  for (const listener of gateway.spec?.listeners ?? [])
    for (const ref of listener.tls?.certificateRefs ?? [])
      if ((ref.group ?? '') === '' && (ref.kind ?? 'Secret') === 'Secret' && ref.name)
        names.add(`${ref.namespace ?? namespace}/${ref.name}`);
  for (const name of frontendCaRefs(gateway).secrets) names.add(name);
  return [...names];
}

/** The `namespace/name` of every ConfigMap a Gateway names (frontend CA certificates). */
export function gatewayConfigMaps(gateway: Gateway): string[] {
  return frontendCaRefs(gateway).configMaps;
}

/**
 * One Gateway's listeners, each checked: protocol (HTTP, HTTPS with tls.mode Terminate), hostname,
 * certificate (a kubernetes.io/tls Secret, another namespace's only with a ReferenceGrant) and
 * allowedRoutes. A listener that cannot be served gets conditions saying why; the others serve.
 */
export function resolveGateway(
  gateway: Gateway,
  secrets: Lookup<V1Secret>,
  grants: readonly ReferenceGrant[],
  configMaps: CaObjects['configMaps'] = new Map(),
): ResolvedGateway {
  const namespace = gateway.metadata?.namespace ?? 'default';
  const generation = gateway.metadata?.generation;
  const listeners: ResolvedListener[] = [];
  const seen = new Set<string>();
  for (const [index, listener] of (gateway.spec?.listeners ?? []).entries()) {
    const name = listener.name ?? `listener-${index}`;
    const frontend =
      listener.protocol === 'HTTPS'
        ? frontendValidation(
            gateway,
            typeof listener.port === 'number' ? listener.port : null,
            { secrets, configMaps },
            grants,
          )
        : null;
    const resolved = resolveListener(listener, name, namespace, generation, secrets, grants, frontend);
    if (seen.has(name)) {
      resolved.usable = false;
      resolved.conditions = [
        condition('Accepted', false, 'Invalid', `listener name ${name} is used twice`, generation),
        condition('Programmed', false, 'Invalid', 'the listener is not served', generation),
        condition('ResolvedRefs', true, 'ResolvedRefs', 'references resolved', generation),
      ];
    }
    seen.add(name);
    listeners.push({ ...resolved, gateway: gateway.metadata?.name ?? '', gatewayNamespace: namespace });
  }
  const invalidParameters = parametersProblem(
    (gateway.spec as GatewayInfrastructure | undefined)?.infrastructure?.parametersRef,
  );
  // A Gateway that is not accepted serves nothing: its listeners keep their own conditions, but
  // none is programmed and no route attaches.
  if (invalidParameters !== null)
    for (const listener of listeners) {
      listener.usable = false;
      listener.conditions = listener.conditions.map((item) =>
        item.type === 'Programmed'
          ? condition('Programmed', false, 'Invalid', 'the Gateway is not accepted', generation)
          : item,
      );
    }
  const frontend = gateway.spec?.tls?.frontend;
  const insecureFrontend = [frontend?.default, ...(frontend?.perPort ?? []).map((entry) => entry.tls)].some(
    (settings) => settings?.validation?.mode === 'AllowInsecureFallback',
  );
  return {
    namespace,
    name: gateway.metadata?.name ?? '',
    generation,
    listeners,
    invalidParameters,
    insecureFrontend,
  };
}

function resolveListener(
  listener: Listener,
  name: string,
  namespace: string,
  generation: number | undefined,
  secrets: Lookup<V1Secret>,
  grants: readonly ReferenceGrant[],
  frontend: FrontendValidation,
): Omit<ResolvedListener, 'gateway' | 'gatewayNamespace'> {
  const problems: Array<{ type: 'Accepted' | 'ResolvedRefs'; reason: string; message: string }> = [];
  const protocol = listener.protocol === 'HTTPS' ? 'HTTPS' : 'HTTP';
  if (listener.protocol !== 'HTTP' && listener.protocol !== 'HTTPS')
    problems.push({
      type: 'Accepted',
      reason: 'UnsupportedProtocol',
      message: `protocol ${listener.protocol} is not served (HTTP and HTTPS are)`,
    });
  let hostname: string | null = null;
  if (listener.hostname !== undefined && listener.hostname !== '') {
    const key = hostnameKey(listener.hostname);
    if (key.ok) hostname = key.value;
    else
      problems.push({
        type: 'Accepted',
        reason: 'Invalid',
        message: `hostname ${listener.hostname} ${key.reason}`,
      });
  }
  // allowedRoutes.kinds: the supported ones are served; any other makes ResolvedRefs false.
  const wanted = listener.allowedRoutes?.kinds;
  const kinds: RouteKind[] = [];
  if (wanted === undefined || wanted.length === 0) kinds.push(...ROUTE_KINDS);
  else
    for (const kind of wanted) {
      const known = ROUTE_KINDS.find((candidate) => candidate === kind.kind);
      if (known !== undefined && (kind.group ?? GATEWAY_GROUP) === GATEWAY_GROUP) kinds.push(known);
      else
        problems.push({
          type: 'ResolvedRefs',
          reason: 'InvalidRouteKinds',
          message: `route kind ${kind.group ?? GATEWAY_GROUP}/${kind.kind} is not supported`,
        });
    }
  // A listener of a protocol Tollgate does not serve supports no route kind (its supportedKinds is empty).
  if (protocol !== listener.protocol) kinds.length = 0;
  const from = listener.allowedRoutes?.namespaces?.from ?? 'Same';
  if (from !== 'Same' && from !== 'All' && from !== 'Selector')
    problems.push({
      type: 'Accepted',
      reason: 'Invalid',
      message: `allowedRoutes.namespaces.from ${from} is not Same, All or Selector`,
    });
  let certificate: ResolvedListener['certificate'] = null;
  if (protocol === 'HTTPS' && listener.protocol === 'HTTPS') {
    const mode = listener.tls?.mode ?? 'Terminate';
    if (mode !== 'Terminate')
      problems.push({
        type: 'Accepted',
        reason: 'UnsupportedProtocol',
        message: `tls.mode ${mode} is not served (Terminate is)`,
      });
    const refs = listener.tls?.certificateRefs ?? [];
    const first = refs[0];
    if (first === undefined)
      problems.push({
        type: 'ResolvedRefs',
        reason: 'InvalidCertificateRef',
        message: 'an HTTPS listener needs a certificateRef',
      });
    else {
      const resolved = certificateOf(first, namespace, secrets, grants);
      if ('problem' in resolved) problems.push({ type: 'ResolvedRefs', ...resolved.problem });
      else certificate = resolved;
    }
  }
  // A CA reference that does not resolve leaves the listener unserved, never served unchecked. With
  // none resolving, the spec has the listener not accepted either (it still holds its hostname:
  // holdsClaim).
  if (frontend !== null && 'problem' in frontend) {
    problems.push({ type: 'ResolvedRefs', ...frontend.problem });
    if (frontend.noValidCa)
      problems.push({
        type: 'Accepted',
        reason: NO_VALID_CA,
        message: `no caCertificateRef resolves: ${frontend.problem.message}`,
      });
  }
  const accepted = problems.find((problem) => problem.type === 'Accepted');
  const refs = problems.find((problem) => problem.type === 'ResolvedRefs');
  const usable = accepted === undefined && refs === undefined;
  return {
    name,
    port: typeof listener.port === 'number' ? listener.port : null,
    protocol,
    hostname,
    usable,
    from: from === 'All' || from === 'Selector' ? from : 'Same',
    selector: listener.allowedRoutes?.namespaces?.selector ?? null,
    kinds,
    certificate,
    clientCertificates: frontend !== null && 'check' in frontend ? frontend.check : null,
    attachedRoutes: 0,
    conditions: [
      accepted
        ? condition('Accepted', false, accepted.reason, accepted.message, generation)
        : condition('Accepted', true, 'Accepted', 'the listener is served', generation),
      usable
        ? condition('Programmed', true, 'Programmed', 'the listener is served', generation)
        : condition('Programmed', false, 'Invalid', (accepted ?? refs)?.message ?? '', generation),
      refs
        ? condition('ResolvedRefs', false, refs.reason, refs.message, generation)
        : condition('ResolvedRefs', true, 'ResolvedRefs', 'references resolved', generation),
    ],
  };
}

function certificateOf(
  ref: { group?: string; kind?: string; name?: string; namespace?: string },
  namespace: string,
  secrets: Lookup<V1Secret>,
  grants: readonly ReferenceGrant[],
): { secret: string; certificate: string; key: string } | { problem: { reason: string; message: string } } {
  const invalid = (message: string) => ({ problem: { reason: 'InvalidCertificateRef', message } });
  if ((ref.group ?? '') !== '' || (ref.kind ?? 'Secret') !== 'Secret')
    return invalid(`certificateRef ${ref.group ?? ''}/${ref.kind} is not a core Secret`);
  const target = ref.namespace ?? namespace;
  const key = `${target}/${ref.name ?? ''}`;
  if (
    !referencePermitted(grants, {
      from: { group: GATEWAY_GROUP, kind: 'Gateway', namespace },
      to: { group: '', kind: 'Secret', namespace: target, name: ref.name ?? '' },
    })
  )
    return {
      problem: {
        reason: 'RefNotPermitted',
        message: `no ReferenceGrant in ${target} allows this Gateway to use Secret ${key}`,
      },
    };
  const secret = secrets.get(key);
  if (secret === undefined) return invalid(`Secret ${key} does not exist`);
  const pair = tlsPair(secret);
  if (typeof pair === 'string') return invalid(`Secret ${key} ${pair}`);
  return { secret: key, ...pair };
}

/**
 * True when a route of `namespace` may attach to the listener. Its labels are read only for a
 * Selector (a route's cached translation depends on them only then: translation-cache.ts).
 */
export function namespaceAllowed(
  listener: ResolvedListener,
  namespace: string,
  labelsOf: () => Readonly<Record<string, string>> | undefined,
): boolean {
  if (listener.from === 'All') return true;
  if (listener.from === 'Same') return namespace === listener.gatewayNamespace;
  const labels = labelsOf();
  return labels !== undefined && selectorMatches(listener.selector, labels);
}

/** A metav1.LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist), ANDed. */
export function selectorMatches(
  selector: LabelSelector | null,
  labels: Readonly<Record<string, string>>,
): boolean {
  if (selector === null) return false;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {}))
    if (labels[key] !== value) return false;
  for (const expression of selector.matchExpressions ?? []) {
    const value = expression.key === undefined ? undefined : labels[expression.key];
    const values = expression.values ?? [];
    switch (expression.operator) {
      case 'In':
        if (value === undefined || !values.includes(value)) return false;
        break;
      case 'NotIn':
        if (value !== undefined && values.includes(value)) return false;
        break;
      case 'Exists':
        if (value === undefined) return false;
        break;
      case 'DoesNotExist':
        if (value !== undefined) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}
