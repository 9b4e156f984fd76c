import type { V1ConfigMap, V1Secret, V1Service } from '@kubernetes/client-node';
import type { HostConfig, PathConfig } from '../../../config/types.ts';
import { DEFAULT_HOST } from '../../../routing/normalise.ts';
import type { ClientCheckPem } from '../ingress/certificates.ts';
import {
  type AgedClaim,
  byCreation,
  type HostOwner,
  hostOwners,
  hostOwnershipProblem,
} from '../ownership.ts';
import { referencePermitted } from './grants.ts';
import {
  gatewayConfigMaps,
  gatewaySecrets,
  type ResolvedGateway,
  type ResolvedListener,
  type RouteKind,
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
import type { RouteContext } from './rule-types.ts';
import { withConflicts } from './shared-ports.ts';
import { GatewayTranslationCache, type RouteEntry } from './translation-cache.ts';

/**
 * Everything a translation reads: objects as the API gave them, nothing fetched here. Neither the
 * objects nor the maps and lists are changed once given (a translation cache compares them by
 * identity: translation-cache.ts); a change is a new object, map or list.
 */
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
  /**
   * The route entries the table was built from, host ownership and policies applied (a route's own
   * `entries` are as it asked, shared between translations and never changed).
   */
  served?: readonly PathEntry[];
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
 *
 * `cache` (the source's, kept from translation to translation) makes an edit cost work in proportion
 * to what changed: what it reuses is exactly what this translation would build, the very same
 * objects (translation-cache.ts). Without one, everything is built anew. Nothing built is changed
 * once made: every step after a route's translation copies what it changes.
 */
export function translateGateways(
  input: GatewayInput,
  cache: GatewayTranslationCache = new GatewayTranslationCache(),
): GatewayTranslation {
  cache.begin();
  const translation = translateWith(input, cache);
  cache.commit();
  return translation;
}

function translateWith(input: GatewayInput, cache: GatewayTranslationCache): GatewayTranslation {
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
  const configMaps = input.configMaps ?? new Map();
  const resolved = ourGateways(input)
    .sort(byAge)
    .flatMap((gateway) => {
      try {
        return [cache.resolve(gateway, input.secrets, input.grants, configMaps)];
      } catch (error) {
        malformed.push(
          `Gateway ${gateway.metadata?.namespace}/${gateway.metadata?.name}: ${(error as Error).message}`,
        );
        return [];
      }
    });
  // Listeners that would take each other's requests on Tollgate's shared ports: the newer is refused.
  const gateways = cache.views(resolved, withConflicts);
  const gatewayMap = cache.gatewayMap(gateways);
  const context: RouteContext = {
    gateways: gatewayMap,
    namespaces: input.namespaces,
    services: input.services,
    permits: (reference) => referencePermitted(input.grants, reference),
  };
  cache.observe(context, input.grants);
  const all = cache.order(input.httpRoutes, input.grpcRoutes, ageOfRoute);
  const translated = all.map(({ route, kind }, age) => {
    try {
      return cache.route(route, kind, age, context, translateRoute);
    } catch (error) {
      return cache.uncached(kind, age, malformedRoute(route, kind, (error as Error).message));
    }
  });

  // Host ownership across upstreams.yaml, Ingresses and routes: the oldest claim owns a host. A
  // route claims the hosts it names, not those it serves now (docs/gateway-api.md#host-ownership).
  const routeClaims: AgedClaim[] = all.map(({ route, created }, index) => {
    const entry = translated[index] as RouteEntry;
    return cache.claim(entry, route, created);
  });
  const owners = cache.owners(input.fileHosts, input.ingressClaims, routeClaims, () =>
    hostOwners(input.fileHosts, byCreation([...input.ingressClaims, ...routeClaims])),
  );
  const routes: RouteOutcome[] = [];
  const entries: PathEntry[] = [];
  for (const entry of translated) {
    const owned = ownedOf(entry, owners);
    routes.push(owned.outcome);
    for (const item of owned.entries) entries.push(item);
  }

  const { attachment, entries: governed } = applyPolicies(
    entries,
    routes,
    gateways,
    input,
    cache.policyMemo(),
  );
  // Policy status comes from the table just built; a path without its policy is closed there. No
  // target held: no path is governed, and every path of the table is an entry's (cache.hosts built
  // it from them), so the walk would find nothing; the policies' status is read all the same.
  const table = cache.hosts(governed, inPrecedence);
  const checked =
    attachment.holders.length === 0
      ? { policies: policiesInForce(attachment, [], []).policies, hosts: table }
      : policiesInForce(attachment, table, governed);
  const policies = checked.policies.filter(policyIsOurs(input, gatewayMap, routes));
  const certificates = certificatesOf(gateways, governed);

  const served = withAttachedRoutes(gateways, routes);
  for (const gateway of served) statuses.push(gatewayStatus(gateway, input));
  for (const [index, outcome] of routes.entries())
    statuses.push(routeStatus(translated[index] as RouteEntry, outcome, input.gatewayNames ?? null));
  for (const policy of policies)
    statuses.push({
      resource: 'tollgatepolicies',
      namespace: policy.namespace,
      name: policy.name,
      status: { conditions: policy.conditions },
    });
  return {
    hosts: checked.hosts,
    certificates,
    statuses,
    routes,
    policies,
    gateways: served,
    malformed,
    claims: routeClaims,
    served: governed,
  };
}

/** A route's creation time and `namespace/name`: what age order sorts by (byAge's order). */
function ageOfRoute(route: HttpRoute): { created: number; key: string } {
  return { created: createdAt(route), key: keyOf(route) };
}

/**
 * A route's outcome and paths once host ownership is applied: a host another source owns is not
 * served, and the route's outcome (a copy) says why. Kept per route while the owners are the same.
 */
function ownedOf(
  entry: RouteEntry,
  owners: ReadonlyMap<string, HostOwner>,
): NonNullable<RouteEntry['owned']> {
  const { outcome } = entry;
  if (entry.owned !== undefined && entry.owned.owners === owners && entry.owned.base === outcome)
    return entry.owned;
  const kept: PathEntry[] = [];
  const problems: string[] = [];
  const refused = new Set<string>();
  for (const item of outcome.entries) {
    const problem = hostOwnershipProblem(item.host, owners.get(item.host), outcome.namespace);
    if (problem === null) kept.push(item);
    else if (!refused.has(item.host)) {
      refused.add(item.host);
      problems.push(problem.replace('an Ingress of namespace', 'a route of namespace'));
    }
  }
  entry.owned = {
    owners,
    base: outcome,
    outcome: problems.length === 0 ? outcome : { ...outcome, problems: [...outcome.problems, ...problems] },
    entries: kept.length === outcome.entries.length ? outcome.entries : kept,
  };
  return entry.owned;
}

/** A route's status (its own parents' entries), the same object while its parents are. */
function routeStatus(
  entry: RouteEntry,
  outcome: RouteOutcome,
  gatewayNames: readonly string[] | null,
): DesiredStatus {
  const before = entry.status;
  if (before !== undefined && before.parents === outcome.parents && before.gatewayNames === gatewayNames)
    return before.desired as DesiredStatus;
  const desired: DesiredStatus = {
    resource: outcome.kind === 'HTTPRoute' ? 'httproutes' : 'grpcroutes',
    namespace: outcome.namespace,
    name: outcome.name,
    ...(gatewayNames ? { ownGateways: gatewayNames } : {}),
    status: {
      parents: outcome.parents.map((parent) => ({
        parentRef: parent.parentRef,
        controllerName: GATEWAY_CONTROLLER,
        conditions: parent.conditions,
      })),
    },
  };
  entry.status = { gatewayNames, parents: outcome.parents, desired };
  return desired;
}

/** The Gateways as reported: copies with each listener's attachedRoutes counted from the routes. */
function withAttachedRoutes(
  gateways: readonly ResolvedGateway[],
  routes: readonly RouteOutcome[],
): ResolvedGateway[] {
  const counts = new Map<ResolvedListener, number>();
  for (const route of routes)
    for (const listener of route.attached) counts.set(listener, (counts.get(listener) ?? 0) + 1);
  return gateways.map((gateway) => ({
    ...gateway,
    listeners: gateway.listeners.map((listener) => ({
      ...listener,
      attachedRoutes: counts.get(listener) ?? 0,
    })),
  }));
}

/**
 * With gateway_names, a policy is this deployment's to report on only when it targets one of its
 * Gateways or a route attached to one: another deployment reports on the rest (two would fight).
 */
function policyIsOurs(
  input: GatewayInput,
  gateways: ReadonlyMap<string, ResolvedGateway>,
  routes: readonly RouteOutcome[],
): (outcome: PolicyOutcome) => boolean {
  if ((input.gatewayNames ?? null) === null) return () => true;
  // The first policy of a name, as a search in order finds it; the routes attached to a parent.
  const policyOf = new Map<string, TollgatePolicy>();
  for (const item of input.policies) {
    const key = `${item.metadata?.namespace}/${item.metadata?.name}`;
    if (!policyOf.has(key)) policyOf.set(key, item);
  }
  const attached = new Set<string>();
  for (const route of routes)
    if (route.parents.length > 0) attached.add(`${route.kind} ${route.namespace}/${route.name}`);
  return (outcome) => {
    const refs = policyOf.get(`${outcome.namespace}/${outcome.name}`)?.spec?.targetRefs;
    if (!Array.isArray(refs)) return false;
    return refs.some((ref) =>
      ref.kind === 'Gateway'
        ? gateways.has(`${outcome.namespace}/${ref.name ?? ''}`)
        : attached.has(`${ref.kind} ${outcome.namespace}/${ref.name}`),
    );
  };
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
    attached: [],
  };
}

/**
 * One host's entries in Gateway API precedence order: where several share a path the matcher takes
 * the first whose conditions hold, so the order here is the precedence (method, then more header
 * matches, then more query matches, then the oldest route, then rule order). The same path with the
 * same conditions twice: the first (oldest) wins, the other is never reached.
 */
function inPrecedence(group: readonly PathEntry[]): PathConfig[] {
  return [...group]
    .sort(
      (a, b) =>
        b.rank.method - a.rank.method ||
        b.rank.headers - a.rank.headers ||
        b.rank.query - a.rank.query ||
        a.rank.age - b.rank.age ||
        a.rank.match - b.rank.match,
    )
    .map((entry) => entry.path);
}

/**
 * Each usable HTTPS listener's certificate, for its own hostname and the names routes were given
 * through it; a listener without hostname claims every name nothing more specific claims (`*`).
 */
function certificatesOf(
  gateways: readonly ResolvedGateway[],
  entries: readonly PathEntry[],
): GatewayCertificate[] {
  // The hosts given through each listener with a certificate (`gateway listener`), in entry order.
  const serving = new Set<string>();
  for (const gateway of gateways)
    if (gateway.listeners.some((listener) => listener.certificate !== null && listener.usable))
      serving.add(`${gateway.namespace}/${gateway.name}`);
  const given = new Map<string, string[]>();
  if (serving.size > 0)
    for (const entry of entries) {
      if (entry.host === DEFAULT_HOST) continue;
      for (const via of entry.gateways) {
        if (!serving.has(via.gateway)) continue;
        const key = `${via.gateway} ${via.listener}`;
        const hosts = given.get(key) ?? [];
        given.set(key, hosts);
        hosts.push(entry.host);
      }
    }
  const certificates: GatewayCertificate[] = [];
  for (const gateway of gateways) {
    for (const listener of gateway.listeners) {
      if (listener.certificate === null || !listener.usable) continue;
      const key = `${gateway.namespace}/${gateway.name} ${listener.name}`;
      const names = new Set<string>([listener.hostname ?? '*', ...(given.get(key) ?? [])]);
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
