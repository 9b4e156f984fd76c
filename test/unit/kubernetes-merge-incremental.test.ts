import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type PathFields, pathConfig } from '../../src/config/path-config.ts';
import { resolveServiceRef, type ServiceRef, serviceRefKey } from '../../src/config/service-ref.ts';
import type {
  HostConfig,
  MainConfig,
  PathConfig,
  ServerAddress,
  UpstreamsConfig,
} from '../../src/config/types.ts';
import { compiledSize, emptyUpstreamsConfig } from '../../src/config/validate-upstreams.ts';
import { createLogger } from '../../src/log.ts';
import { compileRoutingTable, type EndpointLookup } from '../../src/routing/compile.ts';
import type { RoutingTable } from '../../src/routing/types.ts';
import type { Runtime } from '../../src/runtime.ts';
import {
  createKubernetesMerge,
  mergedSize,
  mergeSources,
  type SourceName,
  type SourceRoutes,
  withReferencesChecked,
} from '../../src/sources/kubernetes/merge.ts';
import type { AgedClaim } from '../../src/sources/kubernetes/ownership.ts';

/**
 * The merge and the compile work host by host (docs/benchmark.md, "Control plane at scale"): a
 * translation that keeps its objects (an unchanged Ingress or route gives the very same PathConfig)
 * costs what changed. What is kept must never be stale: at every step the incremental merge and
 * compile equal a merge and compile from scratch of copies of the same inputs.
 *
 * Seeded: TOLLGATE_PROPERTY_SEED=<n> replays a run; TOLLGATE_PROPERTY_RUNS=<n> runs more cases.
 */
const SEED = Number(process.env.TOLLGATE_PROPERTY_SEED ?? 38_001);
const RUNS = Number(process.env.TOLLGATE_PROPERTY_RUNS ?? 300);

const NAMESPACE = 'apps';
const main = {
  oidcProviders: { corp: { redirectUrl: null }, hosted: { redirectUrl: 'https://login.test/cb' } },
} as unknown as MainConfig;
const oidc = (provider: string) => ({ type: 'oidc' as const, users: [], keys: [], oidc: { provider } });
const keyOf = (ref: ServiceRef) => serviceRefKey(resolveServiceRef(ref, NAMESPACE));
const address = (ip: string): ServerAddress => ({ raw: `${ip}:8080`, host: ip, port: 8080 });

/**
 * A merge fed as the provider feeds it, with its runtime's table and a changeable endpoint snapshot
 * (a new Map on each change, as the Kubernetes source hands them over; `snapshots`: the lookup says
 * which one it answers from, as the provider's does).
 */
function harness(initial: UpstreamsConfig, sources: readonly SourceName[], snapshots = true) {
  let snapshot = new Map<string, readonly ServerAddress[]>();
  const endpoints = {
    set(name: string, servers: readonly ServerAddress[]) {
      snapshot = new Map(snapshot);
      snapshot.set(name, servers);
    },
  };
  const none: readonly ServerAddress[] = Object.freeze([]);
  const lookup = (ref: ServiceRef) => snapshot.get(ref.name) ?? none;
  const endpointsOf: EndpointLookup = snapshots
    ? Object.assign(lookup, { snapshot: () => snapshot })
    : lookup;
  let table: RoutingTable = compileRoutingTable(initial, endpointsOf);
  const runtime = {
    table: () => table,
    swapTable: (next: RoutingTable) => {
      table = next;
    },
  } as unknown as Runtime;
  const merge = createKubernetesMerge({
    main,
    runtime,
    logger: createLogger('error', { write: () => {} }),
    namespace: NAMESPACE,
    initial,
    sources,
    endpointsOf,
  });
  return { merge, endpoints, endpointsOf, table: () => table };
}

/** What a request-time reader sees of a table: every field of every route, servers by pool. */
function shape(table: RoutingTable): string {
  return JSON.stringify({
    hash: table.hash,
    servers: table.servers.map((server) => server.poolKey),
    routes: table.routes.map((route) => ({
      ...route,
      servers: route.servers.map((server) => server.poolKey),
      mirrors: route.mirrors?.map((mirror) => ({ ...mirror, servers: mirror.servers.map((s) => s.poolKey) })),
    })),
  });
}

const REQUEST_HOSTS = ['a.test', 'b.test', 'c.test', 'd.test', 'other.test'];
const REQUEST_PATHS = ['/', '/a', '/a/b', '/b', '/b/c', '/x'];
/** The route id each sample request finds. */
function answers(table: RoutingTable): (string | null)[] {
  return REQUEST_HOSTS.flatMap((host) => REQUEST_PATHS.map((path) => table.match(host, path)?.id ?? null));
}

/** The merge and compile of copies of the inputs, sharing no object with them. */
function fromScratch(
  base: UpstreamsConfig,
  sources: readonly SourceRoutes[],
  endpoints: (ref: ServiceRef) => readonly ServerAddress[],
) {
  const config = withReferencesChecked(mergeSources(structuredClone(base), structuredClone(sources)), main);
  return { config, table: compileRoutingTable(config, endpoints) };
}

describe('merge and compile by host: a translation that keeps its objects', () => {
  const HOSTS = 60;
  const translation = (paths: (host: number, index: number) => PathConfig): SourceRoutes => ({
    hosts: Array.from({ length: HOSTS }, (_, host) => ({
      name: `h${host}.test`,
      paths: [paths(host, 0), paths(host, 1)],
    })),
    claims: Array.from({ length: HOSTS }, (_, host) => ({
      namespace: NAMESPACE,
      ingress: `${NAMESPACE}/i${host}`,
      hosts: [`h${host}.test`],
      created: host,
    })),
    certificates: [],
  });
  const pathOf = (host: number, index: number, extra: Partial<PathFields> = {}) =>
    pathConfig(`/p${index}`, {
      service: { name: `s${host}`, namespace: NAMESPACE, port: 'http' },
      origin: `ingress/${NAMESPACE}/i${host}`,
      ...extra,
    });

  it('one changed path: the merged config and table equal a merge and compile from scratch, every other host and route is the object it was, and no kept path is keyed again', () => {
    const base = emptyUpstreamsConfig('upstreams.yaml', 'h', 'kubernetes');
    const { merge, endpoints, endpointsOf, table } = harness(base, ['ingresses']);
    for (let host = 0; host < HOSTS; host++)
      endpoints.set(`s${host}`, Object.freeze([address(`10.0.${host}.1`)]));
    // contentKey serializes a path: count how often each first translation's path is serialized.
    let keyed = 0;
    const first = translation((host, index) => {
      const path = pathOf(host, index);
      Object.defineProperty(path, 'toJSON', {
        enumerable: false,
        value() {
          keyed++;
          const { ...plain } = this as PathConfig;
          return plain;
        },
      });
      return path;
    });
    merge.translated('ingresses', first);
    merge.rebuild({ sources: new Set(['ingresses']), services: new Set() });
    const configBefore = merge.effective(base);
    const tableBefore = table();
    const keyedFirst = keyed;
    assert.equal(keyedFirst, HOSTS * 2);

    // The next translation as a cached translator gives it: new host objects and arrays, the very
    // same path objects but one, which changed.
    const changed = { ...pathOf(7, 1), prefix: '/renamed' };
    const second = translation((host, index) =>
      host === 7 && index === 1 ? changed : (first.hosts[host]?.paths[index] as PathConfig),
    );
    const change = merge.translated('ingresses', second);
    assert.deepEqual(change, { claims: false, served: true });
    assert.equal(keyed, keyedFirst, 'a path the host serves already is not keyed again');
    merge.rebuild({ sources: new Set(['ingresses']), services: new Set() });
    const config = merge.effective(base);
    const scratch = fromScratch(base, [second], endpointsOf);
    assert.deepEqual(config, scratch.config);
    assert.equal(shape(table()), shape(scratch.table));
    assert.deepEqual(answers(table()), answers(scratch.table));
    assert.equal(table().match('h7.test', '/renamed')?.prefix, '/renamed');
    for (let host = 0; host < HOSTS; host++) {
      const same = host !== 7;
      assert.equal(config.hosts[host] === configBefore.hosts[host], same, `host ${host} kept: ${same}`);
      for (const index of [0, 1]) {
        const kept = same || index === 0;
        const position = host * 2 + index;
        assert.equal(table().routes[position] === tableBefore.routes[position], kept);
      }
    }

    // An endpoint change: only the routes of that Service's host are new, and the result is a
    // compile from scratch with the new endpoints.
    const routesBefore = table().routes;
    endpoints.set('s3', Object.freeze([address('10.9.9.9')]));
    const outcome = merge.rebuild({
      sources: new Set(),
      services: new Set([keyOf({ name: 's3', namespace: NAMESPACE, port: 'http' })]),
    });
    assert.equal(outcome?.partial, true);
    assert.equal(shape(table()), shape(fromScratch(base, [second], endpointsOf).table));
    assert.equal(table().match('h3.test', '/p0')?.servers[0]?.address, '10.9.9.9:8080');
    for (const [position, route] of table().routes.entries())
      assert.equal(route === routesBefore[position], route.hostKey !== 'h3.test', route.id);

    // An edit after an endpoint change: the Services index follows the changed host (host 5 now
    // names a new Service), and that Service's endpoint change reaches its route.
    const third = translation((host, index) =>
      host === 5 && index === 0
        ? pathOf(5, 0, { service: { name: 'fresh', namespace: NAMESPACE, port: 'http' } })
        : (second.hosts[host]?.paths[index] as PathConfig),
    );
    merge.translated('ingresses', third);
    merge.rebuild({ sources: new Set(['ingresses']), services: new Set() });
    endpoints.set('fresh', Object.freeze([address('10.7.7.7')]));
    const fresh = merge.rebuild({
      sources: new Set(),
      services: new Set([keyOf({ name: 'fresh', namespace: NAMESPACE, port: 'http' })]),
    });
    assert.equal(fresh?.partial, true);
    assert.equal(table().match('h5.test', '/p0')?.servers[0]?.address, '10.7.7.7:8080');
    assert.equal(shape(table()), shape(fromScratch(base, [third], endpointsOf).table));
  });
});

// The generated world: a few hosts, Services and namespaces, so that hosts, paths, claims and
// owners collide often.
const HOST_NAMES = ['a.test', 'b.test', 'c.test', '*.test', 'DEFAULT'] as const;
const SERVICES = ['s1', 's2', 's3'] as const;

interface PathSpec {
  prefix: string;
  exact: boolean;
  service: string;
  provider: string | null;
  toHttps: boolean;
  namespace: string;
}
const pathSpec = fc.record({
  prefix: fc.constantFrom('/', '/a', '/b', '/a/b'),
  exact: fc.boolean(),
  service: fc.constantFrom(...SERVICES),
  provider: fc.constantFrom(null, null, 'corp', 'hosted', 'nowhere'),
  toHttps: fc.boolean(),
  namespace: fc.constantFrom('apps', 'apps', 'team'),
});
/** How a path of a new translation relates to the one at its place in the last translation. */
const pathMode = fc.constantFrom('same', 'same', 'same', 'copy', 'new');
const hostSpec = fc.record({
  name: fc.constantFrom(...HOST_NAMES),
  paths: fc.array(fc.record({ spec: pathSpec, mode: pathMode }), { minLength: 1, maxLength: 3 }),
  sameHost: fc.boolean(),
});
const claimSpec = fc.record({
  namespace: fc.constantFrom('apps', 'team'),
  hosts: fc.uniqueArray(fc.constantFrom(...HOST_NAMES), { maxLength: 2 }),
  created: fc.integer({ min: 0, max: 3 }),
});
const translationSpec = fc.record({
  hosts: fc.uniqueArray(hostSpec, { selector: (host) => host.name, maxLength: 4 }),
  claims: fc.oneof(
    fc.constant('same' as const),
    fc.constant('copy' as const),
    fc.array(claimSpec, { maxLength: 3 }),
  ),
});
const step = fc.oneof(
  fc.record({
    kind: fc.constant('translate' as const),
    source: fc.constantFrom(0, 1),
    translation: translationSpec,
  }),
  fc.record({
    kind: fc.constant('endpoints' as const),
    service: fc.constantFrom(...SERVICES),
    servers: fc.uniqueArray(fc.constantFrom('10.0.0.1', '10.0.0.2', '10.0.0.3'), { maxLength: 2 }),
  }),
  fc.record({
    kind: fc.constant('base' as const),
    hosts: fc.uniqueArray(fc.constantFrom('a.test', 'c.test', 'file.test'), { maxLength: 2 }),
    toHttps: fc.boolean(),
  }),
);

type TranslationSpec = typeof translationSpec extends fc.Arbitrary<infer T> ? T : never;
type Step = typeof step extends fc.Arbitrary<infer T> ? T : never;

const SOURCE_NAMES: readonly SourceName[] = ['ingresses', 'gateway api routes'];
const ORIGIN = ['ingress', 'httproute'] as const;

function buildPath(spec: PathSpec, source: number): PathConfig {
  return pathConfig(spec.prefix, {
    exact: spec.exact,
    service: { name: spec.service, namespace: NAMESPACE, port: 'http' },
    origin: `${ORIGIN[source]}/${spec.namespace}/object`,
    toHttps: spec.toHttps,
    authorization: spec.provider === null ? null : oidc(spec.provider),
  });
}

/** A source's next translation: paths kept by identity, copied or new as the spec says. */
function nextTranslation(
  spec: TranslationSpec,
  source: number,
  last: SourceRoutes | undefined,
): SourceRoutes {
  const hosts = spec.hosts.map((host): HostConfig => {
    const before = last?.hosts.find((item) => item.name === host.name);
    const paths = host.paths.map(({ spec: pathSpec, mode }, index) => {
      const previous = before?.paths[index];
      if (previous !== undefined && mode === 'same') return previous;
      if (previous !== undefined && mode === 'copy') return structuredClone(previous);
      return buildPath(pathSpec, source);
    });
    if (
      before !== undefined &&
      host.sameHost &&
      paths.length === before.paths.length &&
      paths.every((path, index) => path === before.paths[index])
    )
      return before;
    return { name: host.name, paths };
  });
  const lastClaims = last?.claims ?? [];
  const claims: AgedClaim[] =
    spec.claims === 'same'
      ? (lastClaims as AgedClaim[])
      : spec.claims === 'copy'
        ? structuredClone(lastClaims as AgedClaim[])
        : spec.claims.map((claim, index) => ({
            namespace: claim.namespace,
            ingress: `${claim.namespace}/claim${source}-${index}`,
            hosts: claim.hosts,
            created: claim.created,
          }));
  return { hosts, claims, certificates: [] };
}

function baseConfig(hosts: readonly string[], toHttps: boolean): UpstreamsConfig {
  return {
    ...emptyUpstreamsConfig('upstreams.yaml', `h-${hosts.join(',')}-${toHttps}`, 'kubernetes'),
    toHttps,
    hosts: hosts.map((name) => ({ name, paths: [pathConfig('/', { servers: [address('10.1.0.1')] })] })),
  };
}

describe('merge and compile by host: property', () => {
  it('after every step of translations, endpoint and upstreams.yaml changes, the incremental merge and compile equal a merge and compile from scratch', () => {
    const check = (snapshots: boolean, steps: Step[][]) => {
      let base = baseConfig(['file.test'], false);
      const world = harness(base, SOURCE_NAMES, snapshots);
      const last: SourceRoutes[] = [];
      // The merge of the inputs themselves at the step before: the reference checks and the size
      // total then start from it (the same hosts at the same positions, but those that changed).
      let direct: UpstreamsConfig | null = null;
      // Both sources translate first: nothing is merged before each did.
      for (const source of [0, 1]) {
        last[source] = nextTranslation({ hosts: [], claims: [] }, source, undefined);
        world.merge.translated(SOURCE_NAMES[source] as SourceName, last[source] as SourceRoutes);
      }
      world.merge.rebuild({ sources: new Set(SOURCE_NAMES), services: new Set() });
      // Each step: a few changes, then one rebuild (rebuilds.ts folds what waits into one).
      steps.forEach((changes, at) => {
        const cause = { sources: new Set<string>(), services: new Set<string>() };
        for (const item of changes) {
          if (item.kind === 'translate') {
            const next = nextTranslation(item.translation, item.source, last[item.source]);
            last[item.source] = next;
            const change = world.merge.translated(SOURCE_NAMES[item.source] as SourceName, next);
            if (change.served) cause.sources.add(SOURCE_NAMES[item.source] as string);
          } else if (item.kind === 'endpoints') {
            world.endpoints.set(item.service, Object.freeze(item.servers.map(address)));
            cause.services.add(keyOf({ name: item.service, namespace: NAMESPACE, port: 'http' }));
          } else {
            base = baseConfig(item.hosts, item.toHttps);
            world.merge.baseApplied(base);
            cause.sources.add('upstreams.yaml');
          }
        }
        if (cause.sources.size > 0 || cause.services.size > 0) world.merge.rebuild(cause);
        const scratch = fromScratch(base, last, world.endpointsOf);
        const label = `step ${at} (${changes.map((item) => item.kind).join(', ')})`;
        if (direct !== null) {
          mergedSize(withReferencesChecked(direct, main));
        }
        direct = mergeSources(base, last);
        const checked = withReferencesChecked(direct, main);
        assert.deepEqual(checked, scratch.config, label);
        assert.equal(mergedSize(checked), compiledSize(scratch.config), label);
        assert.deepEqual(world.merge.effective(base), scratch.config, label);
        assert.equal(shape(world.table()), shape(scratch.table), label);
        assert.deepEqual(answers(world.table()), answers(scratch.table), label);
      });
    };
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.array(fc.array(step, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 10 }),
        check,
      ),
      {
        seed: SEED,
        numRuns: RUNS,
        endOnFailure: false,
      },
    );
  });
});
