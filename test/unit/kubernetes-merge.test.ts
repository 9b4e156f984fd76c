import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type PathFields, pathConfig } from '../../src/config/path-config.ts';
import type { MainConfig, PathConfig, UpstreamsConfig } from '../../src/config/types.ts';
import { emptyUpstreamsConfig, MAX_COMPILED_SIZE } from '../../src/config/validate-upstreams.ts';
import { createLogger } from '../../src/log.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import type { RoutingTable } from '../../src/routing/types.ts';
import type { Runtime } from '../../src/runtime.ts';
import {
  contentKey,
  createKubernetesMerge,
  mergedConfigProblem,
  type SourceRoutes,
  withReferencesChecked,
} from '../../src/sources/kubernetes/merge.ts';

const path = (prefix: string, extra: Partial<PathFields> = {}): PathConfig =>
  pathConfig(prefix, { service: { name: 'app', namespace: 'apps', port: 'http' }, ...extra });

const oidc = (provider: string) => ({ type: 'oidc' as const, users: [], keys: [], oidc: { provider } });

const main = {
  oidcProviders: { corp: { redirectUrl: null }, hosted: { redirectUrl: 'https://login.test/cb' } },
} as unknown as MainConfig;

/** `count` paths of an Ingress on `host`, each counting one route server. */
const ingressRoutes = (host: string, count: number): SourceRoutes => ({
  hosts: [
    {
      name: host,
      paths: Array.from({ length: count }, (_, i) => path(`/p${i}`, { origin: `ingress/apps/${host}` })),
    },
  ],
  claims: [{ namespace: 'apps', ingress: `apps/${host}`, hosts: [host], created: 1 }],
  certificates: [],
});

/** upstreams.yaml with one `service:` path per route server wanted. */
const base = (paths: number): UpstreamsConfig => ({
  ...emptyUpstreamsConfig('upstreams.yaml', 'h', 'kubernetes'),
  hosts: [{ name: 'file.test', paths: Array.from({ length: paths }, (_, i) => path(`/f${i}`)) }],
});

describe('merge.ts validates the merged config as upstreams.yaml is validated', () => {
  it('the compiled-size cap counts every source', () => {
    const config = base(MAX_COMPILED_SIZE);
    assert.equal(mergedConfigProblem(config), null);
    const over = { ...config, hosts: [...config.hosts, ...ingressRoutes('a.test', 1).hosts] };
    assert.match(mergedConfigProblem(over) ?? '', /would hold 50001 route servers .*more than 50000/);
  });

  it("a source's path naming an unknown OpenID provider, or one without redirect_url on the default host, is closed saying why", () => {
    const config: UpstreamsConfig = {
      ...base(0),
      hosts: [
        { name: 'file.test', paths: [path('/', { authorization: oidc('nowhere') })] },
        {
          name: 'a.test',
          paths: [
            path('/known', { origin: 'ingress/apps/a', authorization: oidc('corp') }),
            path('/unknown', { origin: 'ingress/apps/a', authorization: oidc('nowhere') }),
          ],
        },
        {
          name: 'DEFAULT',
          paths: [
            path('/corp', { origin: 'httproute/apps/r', authorization: oidc('corp') }),
            path('/hosted', { origin: 'httproute/apps/r', authorization: oidc('hosted') }),
          ],
        },
      ],
    };
    const checked = withReferencesChecked(config, main);
    const unavailable = checked.hosts.flatMap((host) =>
      host.paths.map((item) => [host.name, item.prefix, item.unavailable ?? null]),
    );
    assert.deepEqual(unavailable, [
      // upstreams.yaml's own paths were checked at load (and refused there).
      ['file.test', '/', null],
      ['a.test', '/known', null],
      ['a.test', '/unknown', "unknown OpenID provider 'nowhere' (main.yaml defines corp, hosted)"],
      [
        'DEFAULT',
        '/corp',
        'a route under DEFAULT needs oidc_providers.corp.redirect_url: it has no host of its own',
      ],
      ['DEFAULT', '/hosted', null],
    ]);
    // Nothing to close: the very same config object (the merge stays cached between endpoint changes).
    const known = path('/known', { origin: 'ingress/apps/a', authorization: oidc('corp') });
    const clean: UpstreamsConfig = { ...base(0), hosts: [{ name: 'a.test', paths: [known] }] };
    assert.equal(withReferencesChecked(clean, main), clean);
  });
});

describe('createKubernetesMerge: a refused merge keeps the last table that passed', () => {
  const setup = (initial: UpstreamsConfig) => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line)) });
    let table: RoutingTable = compileRoutingTable(initial, () => []);
    let swaps = 0;
    const runtime = {
      table: () => table,
      swapTable: (next: RoutingTable) => {
        table = next;
        swaps++;
      },
    } as unknown as Runtime;
    const merge = createKubernetesMerge({
      main,
      runtime,
      logger,
      namespace: 'apps',
      initial,
      sources: ['ingresses'],
      endpointsOf: () => [],
    });
    return { merge, lines, swaps: () => swaps, table: () => table };
  };
  const cause = (source: string) => ({ sources: new Set([source]), services: new Set<string>() });
  const hostsOf = (config: UpstreamsConfig) => config.hosts.map((host) => host.name);

  it('a translation past the cap: no swap, one error line, the previous routes stay effective', () => {
    const live = base(MAX_COMPILED_SIZE - 2);
    const { merge, lines, swaps } = setup(live);
    merge.translated('ingresses', ingressRoutes('a.test', 2));
    assert.notEqual(merge.rebuild(cause('ingresses')), null);
    assert.deepEqual(hostsOf(merge.effective(live)), ['file.test', 'a.test']);
    assert.equal(swaps(), 1);

    merge.translated('ingresses', ingressRoutes('a.test', 3));
    assert.equal(merge.rebuild(cause('ingresses')), null);
    assert.equal(swaps(), 1);
    assert.equal(merge.effective(live).hosts[1]?.paths.length, 2);
    merge.effective(live);
    const errors = lines.filter((line) => line.level === 'error');
    assert.equal(errors.length, 1);
    assert.match(String(errors[0]?.msg), /^kubernetes routes refused: .*50001 route servers/);

    // A new upstreams.yaml that leaves no room for the routes serving is refused as a reload.
    assert.throws(() => merge.compile(base(MAX_COMPILED_SIZE - 1)), /would hold 50001 route servers/);
    // One that makes room takes the waiting translation with it.
    const smaller = base(10);
    assert.equal(merge.compile(smaller).routes.length, 13);
    // Said about the config serving only: once it went live (the provider's configApplied).
    assert.equal(lines.filter((line) => line.level === 'error').length, 1);
    merge.baseApplied(smaller);
    assert.equal(merge.effective(smaller).hosts[1]?.paths.length, 3);
    assert.ok(lines.some((line) => line.msg === 'kubernetes routes accepted again'));
  });

  it('refused from the first translation: upstreams.yaml alone keeps serving', () => {
    const live = base(MAX_COMPILED_SIZE);
    const { merge, swaps } = setup(live);
    merge.translated('ingresses', ingressRoutes('a.test', 1));
    assert.equal(merge.rebuild(cause('ingresses')), null);
    assert.equal(swaps(), 0);
    assert.equal(merge.effective(live), live);
  });
});

describe('createKubernetesMerge: an edit keeps the routes of the paths it left alone', () => {
  const setup = () => {
    const initial = base(1);
    let table: RoutingTable = compileRoutingTable(initial, () => []);
    const runtime = {
      table: () => table,
      swapTable: (next: RoutingTable) => {
        table = next;
      },
    } as unknown as Runtime;
    const logger = createLogger('error', { write: () => {} });
    const none = Object.freeze([]);
    const merge = createKubernetesMerge({
      main,
      runtime,
      logger,
      namespace: 'apps',
      initial,
      sources: ['ingresses'],
      endpointsOf: () => none,
    });
    return { merge, table: () => table };
  };
  const cause = { sources: new Set(['ingresses']), services: new Set<string>() };
  /** A translation as the Ingress source makes it: new objects every time, `/p1`'s backend as given. */
  const translation = (p1: Partial<PathConfig>): SourceRoutes => ({
    hosts: [
      {
        name: 'a.test',
        paths: [path('/p0', { origin: 'ingress/apps/a' }), path('/p1', { origin: 'ingress/apps/a', ...p1 })],
      },
    ],
    claims: [{ namespace: 'apps', ingress: 'apps/a', hosts: ['a.test'], created: 1 }],
    certificates: [],
  });
  const route = (table: RoutingTable, prefix: string) =>
    table.routes.find((item) => item.hostKey === 'a.test' && item.prefix === prefix);

  it('a translation equal in content is no change; an edit of the Service a path reads gives that path a new route', () => {
    const { merge, table } = setup();
    merge.translated('ingresses', translation({}));
    merge.rebuild(cause);
    const first = table();
    // The same objects again (a status write, an unrelated Service): nothing to rebuild.
    assert.deepEqual(merge.translated('ingresses', translation({})), { claims: false, served: false });
    // The Service behind /p1 renamed its port (the translation resolves the port by the Service).
    const change = merge.translated(
      'ingresses',
      translation({ service: { name: 'app', namespace: 'apps', port: 'web' } }),
    );
    assert.deepEqual(change, { claims: false, served: true });
    merge.rebuild(cause);
    const second = table();
    assert.equal(route(second, '/p0'), route(first, '/p0'));
    assert.notEqual(route(second, '/p1'), route(first, '/p1'));
    assert.equal(route(second, '/p1')?.service, 'app.apps:web');
    // A Secret edit that closes the path (an auth Secret gone) is a change too.
    merge.translated(
      'ingresses',
      translation({
        service: { name: 'app', namespace: 'apps', port: 'web' },
        unavailable: 'auth Secret apps/x does not exist',
      }),
    );
    merge.rebuild(cause);
    assert.equal(route(table(), '/p1')?.unavailable, 'auth Secret apps/x does not exist');
    assert.equal(route(table(), '/p0'), route(first, '/p0'));
  });

  it('content keys tell apart what JSON alone would not', () => {
    const plain = path('/');
    assert.notEqual(contentKey(plain), contentKey({ ...plain, exact: undefined as unknown as boolean }));
    assert.notEqual(
      contentKey({ ...plain, rateLimit: Number.POSITIVE_INFINITY }),
      contentKey({ ...plain, rateLimit: null }),
    );
    assert.notEqual(
      contentKey({ ...plain, policies: new Map() as never }),
      contentKey({ ...plain, policies: new Map() as never }),
    );
    assert.equal(contentKey(path('/')), contentKey(path('/')));
  });
});
