import type { V1ConfigMap, V1Secret, V1Service } from '@kubernetes/client-node';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import { DEFAULT_HOST } from '../../../routing/normalise.ts';
import type { ClientCheckPem } from '../ingress/certificates.ts';
import { type AgedClaim, byCreation, hostOwners, hostOwnershipProblem } from '../ownership.ts';
import {
  gatewayConfigMaps,
  gatewaySecrets,
  type ResolvedGateway,
  type RouteKind,
  resolveGateway,
} from './listeners.ts';
import {
  byAge,
  type Condition,
  condition,
  GATEWAY_CONTROLLER,
  type Gateway,
  type GatewayClass,
  type HttpRoute,
  keyOf,
  parametersProblem,
  type ReferenceGrant,
} from './objects.ts';
import {
  applyPolicies,
  type PolicyOutcome,
  policiesInForce,
  policySecrets,
  type TollgatePolicy,
} from './policy.ts';
import { type PathEntry, type RouteOutcome, translateRoute } from './routes.ts';
import { markConflicts } from './shared-ports.ts';

/** Everything a translation reads: objects as the API gave them, nothing fetched here. */
export interface GatewayInput {
  /** main.yaml `kubernetes.gateway_class`. */
  className: string;
  /** main.yaml `kubernetes.gateway_names` (`namespace/name`): only these are ours; null = all of the class. */
  gatewayNames?: readonly string[] | null;
  classes: readonly GatewayClass[];
  gateways: readonly Gateway[];
  httpRoutes: readonly HttpRoute[];
  grpcRoutes: readonly HttpRoute[];
  grants: readonly ReferenceGrant[];
  policies: readonly TollgatePolicy[];
  /** Labels of every namespace, by name (allowedRoutes Selector). */
  namespaces: ReadonlyMap<string, Readonly<Record<string, string>>>;
  /** By `namespace/name`. */
  services: ReadonlyMap<string, V1Service>;
  /** By `namespace/name`; a Secret listed and found absent is simply not in the map. */
  secrets: ReadonlyMap<string, V1Secret>;
  /** By `namespace/name`: the ConfigMaps Gateways name (frontend CA certificates). */
  configMaps?: ReadonlyMap<string, V1ConfigMap>;
  /** Hosts upstreams.yaml serves: theirs alone (docs/gateway-api.md#host-ownership). */
  fileHosts: readonly string[];
  /** The hosts Ingresses claim, with their namespace and age: the oldest claim owns a host. */
  ingressClaims: readonly AgedClaim[];
  /** What Gateway status announces (publish_service / publish_address), or null when unknown. */
  addresses: ReadonlyArray<{ type: 'IPAddress' | 'Hostname'; value: string }> | null;
  /** The names of main.yaml's `oidc_providers`: what a `type: oidc` policy may name. */
  oidcProviders?: readonly string[] | undefined;
  /** An auth `url` a policy may not target (Tollgate's own listeners, loopback); none given: not checked. */
  reachesTollgate?: ((host: string, port: number) => boolean) | undefined;
}

/** The status Tollgate wants an object to have; for routes, only its own parents' entries. */
export interface DesiredStatus {
  resource: 'gatewayclasses' | 'gateways' | 'httproutes' | 'grpcroutes' | 'tollgatepolicies';
  namespace: string;
  name: string;
  status: Record<string, unknown>;
  /**
   * Routes, with gateway_names: the Gateways (`namespace/name`) this deployment serves; the parents
   * of any other are another deployment's to write (status.ts keeps them).
   */
  ownGateways?: readonly string[];
}

export interface GatewayCertificate {
  secret: string;
  names: string[];
  certificate: string;
  key: string;
  /** The listener's spec.tls.frontend check (docs/gateway-api.md#client-certificates). */
  clientCertificates?: ClientCheckPem;
}

export interface GatewayTranslation {
  /** Host configs to merge after upstreams.yaml's and the Ingresses'. */
  hosts: HostConfig[];
  certificates: GatewayCertificate[];
  statuses: DesiredStatus[];
  routes: RouteOutcome[];
  policies: PolicyOutcome[];
  /** Our Gateways, resolved (listener problems live in their status). */
  gateways: ResolvedGateway[];
  /** Objects left out because their shape could not be read (logged). */
  malformed?: string[];
  /** The hosts each route names, with its age: what the Ingresses must respect. */
  claims?: AgedClaim[];
}

export const EMPTY_GATEWAY_TRANSLATION: GatewayTranslation = {
  hosts: [],
  certificates: [],
  statuses: [],
  routes: [],
  policies: [],
  gateways: [],
};

/**
 * True when the GatewayClass `className` is ours (its controllerName is Tollgate's) and accepted: a
 * class with a `parametersRef` is not, and its Gateways are not served.
 */
export function classIsOurs(input: Pick<GatewayInput, 'className' | 'classes'>): boolean {
  return input.classes.some(
    (item) =>
      item.metadata?.name === input.className &&
      item.spec?.controllerName === GATEWAY_CONTROLLER &&
      parametersProblem(item.spec?.parametersRef) === null,
  );
}

/** Our Gateways: those of the configured class, when that class is ours, narrowed by gateway_names. */
export function ourGateways(
  input: Pick<GatewayInput, 'className' | 'classes' | 'gateways' | 'gatewayNames'>,
): Gateway[] {
  if (!classIsOurs(input)) return [];
  const names = input.gatewayNames ?? null;
  return input.gateways.filter(
    (gateway) =>
      gateway.spec?.gatewayClassName === input.className &&
      (names === null || names.includes(keyOf(gateway))),
  );
}

/** The Secrets a translation reads (listener certificates, policy credentials): what to watch. */
export function secretsWanted(
  input: Pick<GatewayInput, 'className' | 'classes' | 'gateways' | 'gatewayNames' | 'policies'>,
): string[] {
  const names = new Set<string>();
  for (const gateway of ourGateways(input)) for (const name of gatewaySecrets(gateway)) names.add(name);
  for (const policy of input.policies) for (const name of policySecrets(policy)) names.add(name);
  return [...names];
}

/** The ConfigMaps a translation reads (frontend CA certificates): what to watch. */
export function configMapsWanted(input: Pick<GatewayInput, 'className' | 'classes' | 'gateways'>): string[] {
  const names = new Set<string>();
  for (const gateway of ourGateways(input)) for (const name of gatewayConfigMaps(gateway)) names.add(name);
  return [...names];
}

/** The time an object was created, in ms (unknown: last). */
export function createdAt(object: { metadata?: { creationTimestamp?: string | Date } }): number {
  const value = object.metadata?.creationTimestamp as unknown;
  const ms = value instanceof Date ? value.getTime() : Date.parse(String(value ?? ''));
  return Number.isNaN(ms) ? Number.POSITIVE_INFINITY : ms;
}

/**
 * Turns the Gateway API objects of our class into routes in upstreams.yaml's own terms plus the
 * status every object should have (docs/gateway-api.md). Pure: the same objects give the same routes
 * and statuses, in every replica. One bad route, rule or listener is reported and left out; every
 * other one keeps serving. A route whose policy cannot be built keeps its paths, closed (503).
 */
export function translateGateways(input: GatewayInput): GatewayTranslation {
  const statuses: DesiredStatus[] = [];
  const ours = classIsOurs(input);
  // Every class of Tollgate's controllerName gets a status, not only the configured one: another
  // deployment may serve it, and each writes the same (it depends on the class alone).
  for (const item of input.classes) {
    if (item.spec?.controllerName !== GATEWAY_CONTROLLER || !item.metadata?.name) continue;
    statuses.push(classStatus(item));
  }
  if (!ours) return { ...EMPTY_GATEWAY_TRANSLATION, statuses };

  // A malformed object (a list where an object belongs, …) is that object's problem alone: it is
  // left out and reported, and every other one is translated as usual.
  const malformed: string[] = [];
  const gateways = ourGateways(input)
    .sort(byAge)
    .flatMap((gateway) => {
      try {
        return [resolveGateway(gateway, input.secrets, input.grants, input.configMaps)];
      } catch (error) {
        malformed.push(
          `Gateway ${gateway.metadata?.namespace}/${gateway.metadata?.name}: ${(error as Error).message}`,
        );
        return [];
      }
    });
  // Listeners that would take each other's requests on Tollgate's shared ports: the newer is refused.
  markConflicts(gateways);
  const gatewayMap = new Map(gateways.map((gateway) => [`${gateway.namespace}/${gateway.name}`, gateway]));
  const context = {
    gateways: gatewayMap,
    namespaces: input.namespaces,
    services: input.services,
    grants: input.grants,
  };
  const all: Array<{ route: HttpRoute; kind: RouteKind }> = [
    ...input.httpRoutes.map((route) => ({ route, kind: 'HTTPRoute' as const })),
    ...input.grpcRoutes.map((route) => ({ route, kind: 'GRPCRoute' as const })),
  ].sort((a, b) => byAge(a.route, b.route));
  const routes = all.map(({ route, kind }, age) => {
    try {
      return translateRoute(route, kind, age, context);
    } catch (error) {
      return malformedRoute(route, kind, (error as Error).message);
    }
  });

  // Host ownership across upstreams.yaml, Ingresses and routes: the oldest claim owns a host. A
  // route claims the hosts it names, not those it serves now (docs/gateway-api.md#host-ownership).
  const routeClaims: AgedClaim[] = all.map(({ route }, index) => ({
    namespace: route.metadata?.namespace ?? 'default',
    ingress: `${(routes[index] as RouteOutcome).kind} ${route.metadata?.namespace}/${route.metadata?.name}`,
    hosts: (routes[index] as RouteOutcome).claims,
    created: createdAt(route),
  }));
  const owners = hostOwners(input.fileHosts, byCreation([...input.ingressClaims, ...routeClaims]));
  const entries: PathEntry[] = [];
  for (const outcome of routes) {
    const refused = new Set<string>();
    for (const entry of outcome.entries) {
      const problem = hostOwnershipProblem(entry.host, owners.get(entry.host), outcome.namespace);
      if (problem === null) entries.push(entry);
      else if (!refused.has(entry.host)) {
        refused.add(entry.host);
        outcome.problems.push(problem.replace('an Ingress of namespace', 'a route of namespace'));
      }
    }
  }

  const attachment = applyPolicies(entries, routes, gateways, input);
  const hosts = hostsOf(entries);
  // Policy status comes from the table just built; a path without its policy is closed there.
  const policies = policiesInForce(attachment, hosts, entries).filter((outcome) =>
    policyIsOurs(outcome, input, gatewayMap, routes),
  );
  const certificates = certificatesOf(gateways, entries);

  for (const gateway of gateways) statuses.push(gatewayStatus(gateway, input));
  for (const outcome of routes)
    statuses.push({
      resource: outcome.kind === 'HTTPRoute' ? 'httproutes' : 'grpcroutes',
      namespace: outcome.namespace,
      name: outcome.name,
      ...(input.gatewayNames ? { ownGateways: input.gatewayNames } : {}),
      status: {
        parents: outcome.parents.map((parent) => ({
          parentRef: parent.parentRef,
          controllerName: GATEWAY_CONTROLLER,
          conditions: parent.conditions,
        })),
      },
    });
  for (const policy of policies)
    statuses.push({
      resource: 'tollgatepolicies',
      namespace: policy.namespace,
      name: policy.name,
      status: { conditions: policy.conditions },
    });
  return { hosts, certificates, statuses, routes, policies, gateways, malformed, claims: routeClaims };
}

/**
 * With gateway_names, a policy is this deployment's to report on only when it targets one of its
 * Gateways or a route attached to one: another deployment reports on the rest (two would fight).
 */
function policyIsOurs(
  outcome: PolicyOutcome,
  input: GatewayInput,
  gateways: ReadonlyMap<string, ResolvedGateway>,
  routes: readonly RouteOutcome[],
): boolean {
  if ((input.gatewayNames ?? null) === null) return true;
  const policy = input.policies.find(
    (item) => item.metadata?.namespace === outcome.namespace && item.metadata?.name === outcome.name,
  );
  const refs = policy?.spec?.targetRefs;
  if (!Array.isArray(refs)) return false;
  return refs.some((ref) =>
    ref.kind === 'Gateway'
      ? gateways.has(`${outcome.namespace}/${ref.name ?? ''}`)
      : routes.some(
          (route) =>
            route.kind === ref.kind &&
            route.namespace === outcome.namespace &&
            route.name === ref.name &&
            route.parents.length > 0,
        ),
  );
}

/** A route whose shape the translation could not read: served nowhere, reported on its Events. */
function malformedRoute(route: HttpRoute, kind: RouteKind, message: string): RouteOutcome {
  return {
    kind,
    namespace: route.metadata?.namespace ?? 'default',
    name: route.metadata?.name ?? '',
    generation: route.metadata?.generation,
    parents: [],
    entries: [],
    claims: [],
    problems: [`the ${kind} is malformed and left out: ${message}`],
    accepted: false,
    ruleNames: [],
  };
}

/**
 * Entries grouped by host, each host's paths in Gateway API precedence order: where several share a
 * path the matcher takes the first whose conditions hold, so the order here is the precedence
 * (method, then more header matches, then more query matches, then the oldest route, then rule order).
 * The same path with the same conditions twice: the first (oldest) wins, the other is never reached.
 */
function hostsOf(entries: readonly PathEntry[]): HostConfig[] {
  const byHost = new Map<string, PathEntry[]>();
  for (const entry of entries) {
    const list = byHost.get(entry.host) ?? [];
    byHost.set(entry.host, list);
    list.push(entry);
  }
  const hosts: HostConfig[] = [];
  for (const [name, list] of byHost) {
    list.sort(
      (a, b) =>
        b.rank.method - a.rank.method ||
        b.rank.headers - a.rank.headers ||
        b.rank.query - a.rank.query ||
        a.rank.age - b.rank.age ||
        a.rank.match - b.rank.match,
    );
    const paths: PathConfig[] = list.map((entry) => entry.path);
    hosts.push({ name, paths });
  }
  return hosts;
}

/**
 * Each usable HTTPS listener's certificate, for its own hostname and the names routes were given
 * through it; a listener without hostname claims every name nothing more specific claims (`*`).
 */
function certificatesOf(
  gateways: readonly ResolvedGateway[],
  entries: readonly PathEntry[],
): GatewayCertificate[] {
  const certificates: GatewayCertificate[] = [];
  for (const gateway of gateways) {
    for (const listener of gateway.listeners) {
      if (listener.certificate === null || !listener.usable) continue;
      const key = `${gateway.namespace}/${gateway.name}`;
      const names = new Set<string>([listener.hostname ?? '*']);
      for (const entry of entries)
        if (
          entry.host !== DEFAULT_HOST &&
          entry.gateways.some((via) => via.gateway === key && via.listener === listener.name)
        )
          names.add(entry.host);
      if (names.size > 0)
        certificates.push({
          ...listener.certificate,
          names: [...names],
          ...(listener.clientCertificates === null
            ? {}
            : { clientCertificates: listener.clientCertificates }),
        });
    }
  }
  return certificates;
}

/** A GatewayClass of Tollgate's controllerName: Accepted, unless it names parameters. */
function classStatus(item: GatewayClass): DesiredStatus {
  const generation = item.metadata?.generation;
  const problem = parametersProblem(item.spec?.parametersRef);
  return {
    resource: 'gatewayclasses',
    namespace: '',
    name: item.metadata?.name ?? '',
    status: {
      conditions: [
        problem === null
          ? condition('Accepted', true, 'Accepted', 'served by Tollgate', generation)
          : condition('Accepted', false, 'InvalidParameters', problem, generation),
        condition('SupportedVersion', true, 'SupportedVersion', 'gateway.networking.k8s.io/v1', generation),
      ],
    },
  };
}

/**
 * Gateway `Accepted`: False with InvalidParameters for a parametersRef, False with ListenersNotValid
 * when no listener is accepted, True with ListenersNotValid when only some are (as the spec words it).
 */
function gatewayAccepted(gateway: ResolvedGateway): Condition {
  const generation = gateway.generation;
  if (gateway.invalidParameters !== null)
    return condition('Accepted', false, 'InvalidParameters', gateway.invalidParameters, generation);
  const accepted = gateway.listeners.filter((listener) =>
    listener.conditions.some((item) => item.type === 'Accepted' && item.status === 'True'),
  );
  if (accepted.length === 0)
    return condition('Accepted', false, 'ListenersNotValid', 'no listener is valid', generation);
  if (accepted.length < gateway.listeners.length)
    return condition(
      'Accepted',
      true,
      'ListenersNotValid',
      'served; some listeners are not valid (see their conditions)',
      generation,
    );
  return condition('Accepted', true, 'Accepted', 'served by Tollgate', generation);
}

function gatewayStatus(gateway: ResolvedGateway, input: GatewayInput): DesiredStatus {
  const generation = gateway.generation;
  const usable = gateway.listeners.some((listener) => listener.usable);
  const conditions: Condition[] = [
    gatewayAccepted(gateway),
    usable
      ? condition('Programmed', true, 'Programmed', "served on Tollgate's listeners", generation)
      : condition('Programmed', false, 'Invalid', 'no listener can be served', generation),
    // GEP-91: said while a frontend validation lets clients in without a valid certificate.
    ...(gateway.insecureFrontend
      ? [
          condition(
            'InsecureFrontendValidationMode',
            true,
            'ConfigurationChanged',
            'AllowInsecureFallback is set',
            generation,
          ),
        ]
      : []),
  ];
  return {
    resource: 'gateways',
    namespace: gateway.namespace,
    name: gateway.name,
    status: {
      ...(input.addresses === null ? {} : { addresses: input.addresses.map((address) => ({ ...address })) }),
      conditions,
      listeners: gateway.listeners.map((listener) => ({
        name: listener.name,
        supportedKinds: listener.kinds.map((kind) => ({ group: 'gateway.networking.k8s.io', kind })),
        attachedRoutes: listener.attachedRoutes,
        conditions: listener.conditions,
      })),
    },
  };
}

export type { PathEntry, RouteOutcome };
