import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Secret } from '@kubernetes/client-node';
import fc from 'fast-check';
import type { PathConfig } from '../../src/config/types.ts';
import type { Gateway, HttpRoute } from '../../src/sources/kubernetes/gateway/objects.ts';
import {
  type PolicyAttachment,
  policiesInForce,
  type TollgatePolicy,
} from '../../src/sources/kubernetes/gateway/policy.ts';
import {
  type GatewayInput,
  type PathEntry,
  translateGateways,
} from '../../src/sources/kubernetes/gateway/translate.ts';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';

/**
 * What a TollgatePolicy reports is what the table enforces (docs/gateway-api.md#tollgatepolicy),
 * checked on the pure translation over generated Gateways, HTTPRoutes, GRPCRoutes and policies:
 * named and unnamed rules, with and without matches, one or several rules and parentRefs,
 * sectionName targets on rules and listeners, policies that build and policies that cannot.
 *
 * The oracle is this file's own reading of the contract, from the objects as written: of the
 * policies whose targetRefs cover a served path, the most specific (rule > route > listener >
 * Gateway), then the oldest, governs it. If that policy is reported Accepted the path carries its
 * settings (every policy has its own rate_limit, so the path says whose it carries); otherwise the
 * path is closed (503). A path no policy covers carries none.
 *
 * Seeded: TOLLGATE_PROPERTY_SEED=<n> replays a run (fast-check prints the seed and the
 * counterexample of a failure); TOLLGATE_PROPERTY_RUNS=<n> runs more cases.
 */

const NS = 'apps';
const SEED = Number(process.env.TOLLGATE_PROPERTY_SEED ?? 36_001);
const RUNS = Number(process.env.TOLLGATE_PROPERTY_RUNS ?? 200);

const base64 = (text: string) => Buffer.from(text).toString('base64');
const SECRETS = new Map<string, V1Secret>([
  [
    `${NS}/users`,
    { metadata: { name: 'users', namespace: NS }, data: { auth: base64(`alice:${bcryptOf('p')}\n`) } },
  ],
  [`${NS}/keys`, { metadata: { name: 'keys', namespace: NS }, data: { keys: base64('ci:key-of-ci\n') } }],
]);
const AUTHS = [
  null,
  { type: 'basic', basic: { secretRef: { name: 'users' } } },
  { type: 'basic', basic: { secretRef: { name: 'missing' } } },
  { type: 'apikey', apikey: { secretRef: { name: 'keys' } } },
  { type: 'jwt' },
] as const;

const LISTENER_HOSTS = [undefined, 'a.test', '*.test'] as const;
const ROUTE_HOSTS = ['a.test', 'b.test', 'x.a.test'] as const;
const PATHS = ['/', '/admin', '/api/v1'] as const;

const time = (second: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString();

const listenerArb = fc.record({
  host: fc.constantFrom(...LISTENER_HOSTS),
  https: fc.boolean(),
});
const gatewayArb = fc.array(listenerArb, { minLength: 1, maxLength: 3 });

const httpMatchArb = fc.record({
  path: fc.option(
    fc.record({ type: fc.constantFrom('PathPrefix', 'Exact'), value: fc.constantFrom(...PATHS) }),
    { nil: undefined },
  ),
  method: fc.option(fc.constantFrom('GET', 'POST'), { nil: undefined }),
});
const grpcMatchArb = fc.record({
  method: fc.option(
    fc.record({
      service: fc.constantFrom('pkg.Echo', 'pkg.Admin'),
      method: fc.option(fc.constantFrom('Ping', 'Drop'), { nil: undefined }),
    }),
    { nil: undefined },
  ),
});
const ruleArb = fc.record({
  named: fc.boolean(),
  // undefined: no `matches` key at all (match everything), [] the same written out.
  matches: fc.option(fc.array(fc.nat(), { minLength: 0, maxLength: 2 }), { nil: undefined }),
});
const parentArb = fc.record({
  gateway: fc.nat({ max: 1 }),
  section: fc.option(fc.nat({ max: 3 }), { nil: undefined }),
});
const routeArb = fc.record({
  grpc: fc.boolean(),
  hostnames: fc.subarray([...ROUTE_HOSTS]),
  parents: fc.array(parentArb, { minLength: 1, maxLength: 2 }),
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 3 }),
  matchSeeds: fc.array(fc.tuple(httpMatchArb, grpcMatchArb), { minLength: 2, maxLength: 2 }),
});
const targetArb = fc.oneof(
  fc.record({
    kind: fc.constant('Gateway' as const),
    index: fc.nat({ max: 1 }),
    section: fc.option(fc.nat({ max: 3 }), { nil: undefined }),
  }),
  fc.record({
    kind: fc.constant('Route' as const),
    index: fc.nat({ max: 3 }),
    section: fc.option(fc.nat({ max: 3 }), { nil: undefined }),
  }),
);
const policyArb = fc.record({
  targets: fc.array(targetArb, { minLength: 1, maxLength: 2 }),
  auth: fc.nat({ max: AUTHS.length - 1 }),
  // Ties on creationTimestamp are decided by name.
  created: fc.nat({ max: 3 }),
});
const worldArb = fc.record({
  gateways: fc.array(gatewayArb, { minLength: 1, maxLength: 2 }),
  routes: fc.array(routeArb, { minLength: 1, maxLength: 4 }),
  policies: fc.array(policyArb, { minLength: 0, maxLength: 5 }),
});
type World = typeof worldArb extends fc.Arbitrary<infer T> ? T : never;

interface Objects {
  gateways: Gateway[];
  httpRoutes: HttpRoute[];
  grpcRoutes: HttpRoute[];
  policies: TollgatePolicy[];
}

/** The world as Kubernetes objects; route i is HTTPRoute or GRPCRoute `route-i`, rule j named `rule-j` or not. */
function objectsOf(world: World): Objects {
  const gateways: Gateway[] = world.gateways.map((listeners, g) => ({
    metadata: { name: `gw-${g}`, namespace: NS, creationTimestamp: time(0) },
    spec: {
      gatewayClassName: 'tollgate',
      listeners: listeners.map((listener, l) => ({
        name: `l-${l}`,
        port: listener.https ? 443 + l : 80 + l,
        protocol: listener.https ? 'HTTPS' : 'HTTP',
        ...(listener.host === undefined ? {} : { hostname: listener.host }),
        // An HTTPS listener's certificate is missing: it is not served (routes still attach).
        ...(listener.https ? { tls: { certificateRefs: [{ name: 'no-such-certificate' }] } } : {}),
      })),
    },
  })) as Gateway[];
  const httpRoutes: HttpRoute[] = [];
  const grpcRoutes: HttpRoute[] = [];
  for (const [r, route] of world.routes.entries()) {
    const object = {
      metadata: { name: `route-${r}`, namespace: NS, creationTimestamp: time(r) },
      spec: {
        parentRefs: route.parents.map((parent) => ({
          name: `gw-${parent.gateway}`,
          ...(parent.section === undefined ? {} : { sectionName: `l-${parent.section}` }),
        })),
        ...(route.hostnames.length === 0 ? {} : { hostnames: route.hostnames }),
        rules: route.rules.map((rule, j) => ({
          ...(rule.named ? { name: `rule-${j}` } : {}),
          ...(rule.matches === undefined
            ? {}
            : {
                matches: rule.matches.map((seed) => {
                  const [http, grpc] = route.matchSeeds[seed % route.matchSeeds.length] as [
                    Record<string, unknown>,
                    Record<string, unknown>,
                  ];
                  return route.grpc ? grpc : http;
                }),
              }),
          backendRefs: [{ name: 'web', port: 80 }],
        })),
      },
    } as HttpRoute;
    (route.grpc ? grpcRoutes : httpRoutes).push(object);
  }
  const policies: TollgatePolicy[] = world.policies.map((policy, p) => ({
    metadata: { name: `policy-${p}`, namespace: NS, creationTimestamp: time(policy.created) },
    spec: {
      targetRefs: policy.targets.map((target) => ({
        group: 'gateway.networking.k8s.io',
        kind:
          target.kind === 'Gateway'
            ? 'Gateway'
            : world.routes[target.index]?.grpc
              ? 'GRPCRoute'
              : 'HTTPRoute',
        name: target.kind === 'Gateway' ? `gw-${target.index}` : `route-${target.index}`,
        ...(target.section === undefined
          ? {}
          : { sectionName: target.kind === 'Gateway' ? `l-${target.section}` : `rule-${target.section}` }),
      })),
      // Every policy's own rate: the path tells whose settings it carries.
      rate_limit: 100 + p,
      ...(AUTHS[policy.auth] === null ? {} : { authorization: AUTHS[policy.auth] }),
    },
  }));
  return { gateways, httpRoutes, grpcRoutes, policies };
}

function inputOf(objects: Objects): GatewayInput {
  return {
    className: 'tollgate',
    classes: [{ metadata: { name: 'tollgate' }, spec: { controllerName: 'tollgate.io/gateway-controller' } }],
    ...objects,
    grants: [],
    namespaces: new Map([[NS, {}]]),
    services: new Map(),
    secrets: SECRETS,
    fileHosts: [],
    ingressClaims: [],
    addresses: null,
  };
}

const LEVEL = { rule: 3, route: 2, listener: 1, gateway: 0 } as const;

/** How specifically `policy` names the path's entry (-1: it does not cover it), read from its spec. */
function coverage(policy: TollgatePolicy, entry: PathEntry): number {
  let best = -1;
  for (const ref of policy.spec?.targetRefs ?? []) {
    const id = `${NS}/${ref.name}`;
    if (ref.kind === 'Gateway') {
      const through = entry.gateways.filter((via) => via.gateway === id);
      if (ref.sectionName === undefined && through.length > 0) best = Math.max(best, LEVEL.gateway);
      if (ref.sectionName !== undefined && through.some((via) => via.listener === ref.sectionName))
        best = Math.max(best, LEVEL.listener);
    } else if (ref.kind === entry.kind && id === entry.route) {
      if (ref.sectionName === undefined) best = Math.max(best, LEVEL.route);
      else if (ref.sectionName === entry.rule.name) best = Math.max(best, LEVEL.rule);
    }
  }
  return best;
}

/** The oracle: the governing policy of a path, or null when no policy covers it. */
function governingPolicy(policies: readonly TollgatePolicy[], entry: PathEntry): TollgatePolicy | null {
  const byAge = [...policies].sort((a, b) => {
    const at = (p: TollgatePolicy) => Date.parse(String(p.metadata?.creationTimestamp));
    return at(a) - at(b) || String(a.metadata?.name).localeCompare(String(b.metadata?.name));
  });
  let winner: TollgatePolicy | null = null;
  let level = -1;
  for (const policy of byAge) {
    const covered = coverage(policy, entry);
    if (covered > level) {
      winner = policy;
      level = covered;
    }
  }
  return winner;
}

function check(world: World): void {
  const objects = objectsOf(world);
  const translation = translateGateways(inputOf(objects));
  const entryOf = new Map<PathConfig, PathEntry>(
    (translation.served ?? []).map((entry) => [entry.path, entry] as const),
  );
  const accepted = new Set(
    translation.statuses
      .filter((status) => status.resource === 'tollgatepolicies')
      .filter((status) =>
        ((status.status.conditions ?? []) as Array<{ type: string; status: string }>).some(
          (item) => item.type === 'Accepted' && item.status === 'True',
        ),
      )
      .map((status) => status.name),
  );
  for (const host of translation.hosts) {
    for (const path of host.paths) {
      const entry = entryOf.get(path);
      assert.ok(entry, `${host.name} ${path.prefix}: a path of the table that no route entry asked for`);
      const where = `${host.name} ${path.exact ? '=' : ''}${path.prefix} of ${entry.kind} ${entry.route} rule ${entry.rule.name ?? entry.rule.index}`;
      const winner = governingPolicy(objects.policies, entry);
      if (winner === null) {
        assert.equal(path.rateLimit, null, `${where}: no policy covers it, yet it has a rate limit`);
        assert.equal(path.authorization, null, `${where}: no policy covers it, yet it has authorization`);
        assert.equal(path.unavailable, null, `${where}: no policy covers it, yet it is closed`);
        continue;
      }
      const name = winner.metadata?.name as string;
      // Liveness: a policy that can be built governs its paths (the check never has to step in).
      const buildable =
        (winner.spec?.authorization as { basic?: { secretRef?: { name?: string } } } | undefined)?.basic
          ?.secretRef?.name !== 'missing';
      if (buildable)
        assert.ok(accepted.has(name), `${where}: governed by ${name}, which builds, yet not Accepted`);
      assert.doesNotMatch(
        String(path.unavailable),
        /is not in force/,
        `${where}: the production check had to close it`,
      );
      if (!accepted.has(name)) {
        assert.notEqual(
          path.unavailable ?? null,
          null,
          `${where}: governed by ${name}, not Accepted, yet open`,
        );
        continue;
      }
      assert.equal(path.unavailable, null, `${where}: governed by the Accepted ${name}, yet closed`);
      assert.equal(path.rateLimit, winner.spec?.rate_limit, `${where}: does not carry the Accepted ${name}`);
      const auth = winner.spec?.authorization as { type: string } | undefined;
      assert.equal(path.authorization?.type, auth?.type, `${where}: not the authorization of ${name}`);
    }
  }
  // A policy is never Accepted while one of its targets' paths is served without it (the above),
  // and one that cannot be built (a missing Secret) is never Accepted.
  for (const policy of objects.policies) {
    const auth = policy.spec?.authorization as { basic?: { secretRef?: { name?: string } } } | undefined;
    if (auth?.basic?.secretRef?.name === 'missing')
      assert.ok(!accepted.has(policy.metadata?.name as string), `${policy.metadata?.name} cannot be built`);
  }
}

describe('TollgatePolicy: what is reported Accepted is in force (property)', () => {
  it(`holds over generated Gateways, routes and policies (seed ${SEED}, ${RUNS} runs)`, () => {
    fc.assert(fc.property(worldArb, check), { seed: SEED, numRuns: RUNS, endOnFailure: false });
  });

  it('an unnamed rule under a route policy carries it (the shape most routes have)', () => {
    const world: World = {
      gateways: [[{ host: undefined, https: false }]],
      routes: [
        {
          grpc: false,
          hostnames: ['a.test'],
          parents: [{ gateway: 0, section: undefined }],
          rules: [{ named: false, matches: undefined }],
          matchSeeds: [
            [{ path: undefined, method: undefined }, { method: undefined }],
            [{ path: undefined, method: undefined }, { method: undefined }],
          ],
        },
      ],
      policies: [{ targets: [{ kind: 'Route', index: 0, section: undefined }], auth: 1, created: 0 }],
    };
    check(world);
    const translation = translateGateways(inputOf(objectsOf(world)));
    assert.equal(translation.hosts[0]?.paths[0]?.authorization?.type, 'basic');
  });

  it('the check that runs on every translation closes a path its governing policy is not on, and says so', () => {
    // A table as a faulty attachment would leave it: the route's policy is held, its path lacks it.
    const world = objectsOf({
      gateways: [[{ host: undefined, https: false }]],
      routes: [
        {
          grpc: false,
          hostnames: ['a.test'],
          parents: [{ gateway: 0, section: undefined }],
          rules: [{ named: false, matches: undefined }],
          matchSeeds: [
            [{ path: undefined, method: undefined }, { method: undefined }],
            [{ path: undefined, method: undefined }, { method: undefined }],
          ],
        },
      ],
      policies: [],
    });
    const translation = translateGateways(inputOf(world));
    const entries = translation.served ?? [];
    const path = translation.hosts[0]?.paths[0] as PathConfig;
    assert.equal(path.unavailable, null);
    const draft = {
      namespace: NS,
      name: 'web-auth',
      generation: 1,
      order: 0,
      built: { patch: { rateLimit: 5 }, broken: null },
      held: 1,
      missing: [],
      conflicted: [],
      shapeless: false,
    };
    const attachment: PolicyAttachment = {
      drafts: [draft],
      holders: [{ draft, target: { level: 'route', kind: 'HTTPRoute', route: `${NS}/route-0` } }],
    };
    const checked = policiesInForce(attachment, translation.hosts, entries);
    const [outcome] = checked.policies;
    // A copy of the table, the path closed in it; the table given is left as it was.
    assert.match(String(checked.hosts[0]?.paths[0]?.unavailable), /web-auth is not in force/);
    assert.equal(path.unavailable, null);
    const accepted = outcome?.conditions.find((item) => item.type === 'Accepted');
    assert.equal(accepted?.status, 'False');
    assert.match(
      String(accepted?.message),
      /not in force on a\.test \/ \(HTTPRoute apps\/route-0 rule 0\): it answers 503/,
    );
    assert.ok(outcome?.problems.some((problem) => problem.includes('not in force')));
  });

  it('a path of the table that cannot be traced to its route entry is closed, not served unchecked', () => {
    const world = objectsOf({
      gateways: [[{ host: undefined, https: false }]],
      routes: [
        {
          grpc: false,
          hostnames: ['a.test'],
          parents: [{ gateway: 0, section: undefined }],
          rules: [{ named: false, matches: undefined }],
          matchSeeds: [
            [{ path: undefined, method: undefined }, { method: undefined }],
            [{ path: undefined, method: undefined }, { method: undefined }],
          ],
        },
      ],
      policies: [],
    });
    const translation = translateGateways(inputOf(world));
    const host = translation.hosts[0];
    assert.ok(host);
    // A copy, as a later step that cloned the table would leave it.
    const copy = structuredClone(host.paths[0]) as PathConfig;
    const checked = policiesInForce({ drafts: [], holders: [] }, [{ ...host, paths: [copy] }], []);
    assert.equal(checked.policies[0], undefined);
    assert.match(String(checked.hosts[0]?.paths[0]?.unavailable), /cannot be traced/);
  });
});
