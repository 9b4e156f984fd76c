import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import type { V1Ingress, V1Secret, V1Service } from '@kubernetes/client-node';
import fc from 'fast-check';
import type { PathConfig } from '../../src/config/types.ts';
import { IngressTranslationCache } from '../../src/sources/kubernetes/ingress/cache.ts';
import {
  type IngressInput,
  type IngressTranslation,
  translateIngresses,
} from '../../src/sources/kubernetes/ingress/translate.ts';
import type { AgedClaim } from '../../src/sources/kubernetes/ownership.ts';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';
import { selfSigned } from '../helpers/certs.ts';
import { ingress, secret, service } from '../helpers/fake-kube-api.ts';

/**
 * The per-Ingress translation cache (cache.ts IngressTranslationCache, translation-cache.ts,
 * docs/benchmark.md#control-plane-at-scale): an unchanged Ingress gives the very same PathConfig
 * objects, and a change of anything a translation reads gives what a translation from nothing gives.
 * Objects are replaced, never changed, as the watch does: an unchanged object keeps its identity.
 */

const json = <T>(model: { toJSON(): unknown }) => structuredClone(model.toJSON()) as T;
const keyOf = (object: { metadata?: { namespace?: string; name?: string } }) =>
  `${object.metadata?.namespace}/${object.metadata?.name}`;
const byKey = <T extends { metadata?: { namespace?: string; name?: string } }>(objects: readonly T[]) =>
  new Map(objects.map((object) => [keyOf(object), object]));
const made = (iso: string, spec: Parameters<typeof ingress>[0]): V1Ingress => {
  const object = json<V1Ingress>(ingress({ namespace: 'apps', ...spec }));
  return { ...object, metadata: { ...object.metadata, creationTimestamp: new Date(iso) } };
};
const webService = (port = 80) =>
  json<V1Service>(
    service({ name: 'web', namespace: 'apps', ports: [{ name: 'http', port, targetPort: 8080 }] }),
  );
const users = (line: string) =>
  json<V1Secret>(secret({ name: 'users', namespace: 'apps', data: { auth: `${line}\n` } }));

const pairs = [selfSigned('a.test'), selfSigned('a.test')] as const;
const tlsSecret = (variant: 'good' | 'other' | 'mismatched') => {
  const [one, two] = pairs;
  const cert = variant === 'other' ? two.cert : one.cert;
  const key = variant === 'good' ? one.key : two.key;
  return json<V1Secret>(
    secret({
      name: 'cert',
      namespace: 'apps',
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': cert.toString(), 'tls.key': key.toString() },
    }),
  );
};

/** Every path of a translation by `host prefix` (hosts here never share a prefix). */
function pathsOf(result: IngressTranslation): Map<string, PathConfig> {
  const paths = new Map<string, PathConfig>();
  for (const host of result.hosts)
    for (const path of host.paths) paths.set(`${host.name} ${path.exact ? '=' : ''}${path.prefix}`, path);
  return paths;
}

/** The translation from nothing and the cached one agree on everything, reports included. */
function assertSameAsFresh(cached: IngressTranslation, input: IngressInput): void {
  assert.deepStrictEqual(cached, translateIngresses(input));
}

describe('the Ingress translation cache', () => {
  const auth = made('2026-01-01T00:00:00Z', {
    name: 'auth',
    annotations: { 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'users' },
    tls: [{ hosts: ['a.test'], secretName: 'cert' }],
    rules: [{ host: 'a.test', paths: [{ path: '/', service: 'web', port: 80 }] }],
  });
  const web = made('2026-01-02T00:00:00Z', {
    name: 'web',
    rules: [{ host: 'b.test', paths: [{ path: '/shop', service: 'web', port: 'http' }] }],
  });
  const forward = made('2026-01-03T00:00:00Z', {
    name: 'forward',
    annotations: { 'nginx.ingress.kubernetes.io/auth-url': 'http://10.0.0.1:4180/check' },
    rules: [{ host: 'c.test', paths: [{ path: '/', service: 'other', port: 80 }] }],
  });
  const plain = made('2026-01-04T00:00:00Z', {
    name: 'plain',
    rules: [
      {
        host: 'd.test',
        paths: [{ path: '/', pathType: 'ImplementationSpecific', service: 'other', port: 80 }],
      },
    ],
  });
  const start: IngressInput = {
    className: 'tollgate',
    classes: [],
    ingresses: [auth, web, forward, plain],
    services: byKey([webService()]),
    secrets: byKey([users(`u:${bcryptOf('p')}`), tlsSecret('good')]),
    base: { hosts: [] },
    otherClaims: [],
    reachesTollgate: () => false,
    oidcProviders: [],
  };

  it('the same input twice gives the same path objects and the same reports', () => {
    const cache = new IngressTranslationCache();
    const first = translateIngresses(start, cache);
    const second = translateIngresses({ ...start, ingresses: [...start.ingresses] }, cache);
    const before = pathsOf(first);
    assert.equal(before.size, 4);
    for (const [key, path] of pathsOf(second)) assert.equal(path, before.get(key), key);
    assert.deepStrictEqual(second, first);
    assertSameAsFresh(second, start);
  });

  /** Translates `start`, then `changed`: the paths of `moved` are new and right, all others the same objects. */
  function changes(changed: IngressInput, moved: readonly string[]): IngressTranslation {
    const cache = new IngressTranslationCache();
    const before = pathsOf(translateIngresses(start, cache));
    const after = translateIngresses(changed, cache);
    assertSameAsFresh(after, changed);
    const now = pathsOf(after);
    for (const [key, path] of before) {
      if (moved.includes(key)) assert.notEqual(now.get(key), path, `${key}: new content, a new object`);
      else assert.equal(now.get(key), path, `${key}: untouched, the same object`);
    }
    return after;
  }

  it('a Service changed: the paths reading it are new, the others kept', () => {
    const after = changes({ ...start, services: byKey([webService(81)]) }, ['a.test /', 'b.test /shop']);
    assert.equal(pathsOf(after).get('a.test /')?.service, null, 'port 80 is gone: 503 until it returns');
    assert.deepEqual(pathsOf(after).get('b.test /shop')?.service, {
      name: 'web',
      namespace: 'apps',
      port: 'http',
    });
  });

  it("the auth Secret changed: the Ingress's paths are new, the others kept", () => {
    const after = changes({ ...start, secrets: byKey([users(`v:${bcryptOf('x')}`), tlsSecret('good')]) }, [
      'a.test /',
    ]);
    assert.deepEqual(
      pathsOf(after)
        .get('a.test /')
        ?.authorization?.users?.map((user) => user.username),
      ['v'],
    );
  });

  it('the auth Secret deleted: the path closes (503), the others kept', () => {
    const after = changes({ ...start, secrets: byKey([tlsSecret('good')]) }, ['a.test /']);
    assert.ok(pathsOf(after).get('a.test /')?.unavailable);
  });

  it("the TLS Secret changed: the certificate and the Ingress's report follow, the paths of others kept", () => {
    const cache = new IngressTranslationCache();
    const before = translateIngresses(start, cache);
    assert.equal(before.certificates.length, 1);
    const broken = { ...start, secrets: byKey([users(`u:${bcryptOf('p')}`), tlsSecret('mismatched')]) };
    const after = translateIngresses(broken, cache);
    assertSameAsFresh(after, broken);
    assert.equal(after.certificates.length, 0);
    assert.match(after.reports.get('apps/auth')?.problems[0] ?? '', /TLS Secret apps\/cert/);
    const now = pathsOf(after);
    for (const [key, path] of pathsOf(before)) if (key !== 'a.test /') assert.equal(now.get(key), path, key);
    const other = { ...start, secrets: byKey([users(`u:${bcryptOf('p')}`), tlsSecret('other')]) };
    assertSameAsFresh(translateIngresses(other, cache), other);
  });

  it('an annotation changed: a new Ingress object, new paths for it alone', () => {
    const limited = made('2026-01-02T00:00:00Z', {
      name: 'web',
      annotations: { 'tollgate.io/rate-limit': '5' },
      rules: [{ host: 'b.test', paths: [{ path: '/shop', service: 'web', port: 'http' }] }],
    });
    const after = changes({ ...start, ingresses: [auth, limited, forward, plain] }, ['b.test /shop']);
    assert.equal(pathsOf(after).get('b.test /shop')?.rateLimit, 5);
  });

  it('the base hosts changed: an Ingress on a host upstreams.yaml now names is left out, the others kept', () => {
    const after = changes({ ...start, base: { hosts: [{ name: 'd.test', paths: [] }] } }, ['d.test /']);
    assert.equal(pathsOf(after).has('d.test /'), false);
    assert.match(after.reports.get('apps/plain')?.problems[0] ?? '', /served by upstreams.yaml/);
  });

  it("the other source's claims changed: an older route's host is no longer the Ingress's, the others kept", () => {
    const route: AgedClaim = {
      namespace: 'team',
      ingress: 'HTTPRoute team/r',
      hosts: ['d.test'],
      created: Date.parse('2025-12-31T00:00:00Z'),
    };
    const after = changes({ ...start, otherClaims: [route] }, ['d.test /']);
    assert.match(after.reports.get('apps/plain')?.problems[0] ?? '', /belongs to namespace team/);
  });

  it("Tollgate's own listeners changed: an auth-url now reaching one closes its paths, the others kept", () => {
    const own = (host: string, port: number) => host === '10.0.0.1' && port === 4180;
    const after = changes({ ...start, reachesTollgate: own }, ['c.test /']);
    assert.ok(pathsOf(after).get('c.test /')?.unavailable);
    assert.match(after.reports.get('apps/forward')?.problems.join() ?? '', /own listener/);
  });

  it("a status write (a newer object, the same uid and generation) keeps the paths; a spec change doesn't", () => {
    const versioned = (object: V1Ingress, generation: number, ip?: string): V1Ingress => ({
      ...object,
      metadata: { ...object.metadata, uid: `uid-${object.metadata?.name}`, generation },
      ...(ip ? { status: { loadBalancer: { ingress: [{ ip }] } } } : {}),
    });
    const cache = new IngressTranslationCache();
    const first = { ...start, ingresses: [versioned(auth, 1), versioned(web, 1), forward, plain] };
    const before = pathsOf(translateIngresses(first, cache));
    const written = {
      ...start,
      ingresses: [versioned(auth, 1, '10.9.9.9'), versioned(web, 1, '10.9.9.9'), forward, plain],
    };
    const after = translateIngresses(written, cache);
    assertSameAsFresh(after, written);
    for (const [key, path] of pathsOf(after)) assert.equal(path, before.get(key), key);
    const moved = made('2026-01-02T00:00:00Z', {
      name: 'web',
      rules: [{ host: 'b.test', paths: [{ path: '/shop', service: 'web', port: 80 }] }],
    });
    const edited = {
      ...written,
      ingresses: [written.ingresses[0] as V1Ingress, versioned(moved, 2), forward, plain],
    };
    const now = pathsOf(translateIngresses(edited, cache));
    assertSameAsFresh(translateIngresses(edited, cache), edited);
    assert.notEqual(now.get('b.test /shop'), before.get('b.test /shop'));
    assert.equal(now.get('a.test /'), before.get('a.test /'));
  });

  it('keeps only the builds of live Ingresses', () => {
    const cache = new IngressTranslationCache();
    translateIngresses(start, cache);
    assert.equal(cache.mains.size, 4);
    for (let round = 0; round < 3; round++) {
      const renamed = made('2026-01-02T00:00:00Z', {
        name: 'web',
        rules: [{ host: 'b.test', paths: [{ path: `/shop${round}`, service: 'web', port: 'http' }] }],
      });
      translateIngresses({ ...start, ingresses: [auth, renamed, forward] }, cache);
      assert.equal(cache.mains.size, 3, 'a replaced object and a deleted Ingress leave no build behind');
    }
  });
});

/**
 * A model cluster and edits to it: a few Ingresses (in two namespaces), Services and Secrets, the
 * base hosts, the Gateway API routes' claims, the own listeners and the OpenID providers. After every
 * edit the cached translation must equal one from nothing: this is the test that catches a read the
 * cache does not record.
 */
describe('the cached translation equals one from nothing, after any sequence of edits', () => {
  const NAMES = ['a', 'b', 'c', 'd'] as const;
  const namespaceOf = (name: string) => (name === 'd' ? 'team' : 'apps');
  const hosts = fc.constantFrom('a.test', 'b.test', '', 'A.Test.');
  const pathItem = fc.record({
    path: fc.constantFrom('/', '/api', '/api/', '/app'),
    pathType: fc.constantFrom('Prefix', 'Exact', 'ImplementationSpecific', undefined),
    service: fc.constantFrom('web', 'api', 'gone'),
    port: fc.constantFrom<number | string>(80, 'http', 8080),
  });
  const annotationSets = fc.constantFrom<Record<string, string> | undefined>(
    undefined,
    { 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'users' },
    { 'nginx.ingress.kubernetes.io/auth-type': 'basic', 'nginx.ingress.kubernetes.io/auth-secret': 'users' },
    { 'nginx.ingress.kubernetes.io/auth-url': 'http://10.0.0.1:4180/check' },
    { 'tollgate.io/auth-type': 'oidc', 'tollgate.io/auth-oidc-provider': 'corp' },
    { 'tollgate.io/rate-limit': '7', 'nginx.ingress.kubernetes.io/ssl-redirect': 'false' },
    { 'nginx.ingress.kubernetes.io/canary': 'true', 'nginx.ingress.kubernetes.io/canary-weight': '20' },
    {
      'nginx.ingress.kubernetes.io/canary': 'true',
      'nginx.ingress.kubernetes.io/canary-by-header': 'X-Canary',
      'nginx.ingress.kubernetes.io/rate-limit': '3',
    },
    { 'nginx.ingress.kubernetes.io/configuration-snippet': 'return 200;' },
  );
  const ingressSpec = fc.record({
    rules: fc.array(fc.record({ host: hosts, paths: fc.array(pathItem, { minLength: 1, maxLength: 2 }) }), {
      minLength: 0,
      maxLength: 2,
    }),
    tls: fc.constantFrom<Array<{ hosts: string[]; secretName: string }> | undefined>(
      undefined,
      [{ hosts: ['a.test'], secretName: 'cert' }],
      [{ hosts: [], secretName: 'cert' }],
    ),
    annotations: annotationSets,
    defaultBackend: fc.constantFrom(undefined, { service: 'web', port: 80 }),
  });
  const sha = `{SHA}${createHash('sha1').update('shapw').digest('base64')}`;
  const edit = fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({
        kind: fc.constant('ingress' as const),
        name: fc.constantFrom(...NAMES),
        spec: ingressSpec,
      }),
    },
    fc.record({ kind: fc.constant('delete-ingress' as const), name: fc.constantFrom(...NAMES) }),
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('annotate' as const),
        name: fc.constantFrom(...NAMES),
        annotations: annotationSets,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant('status' as const), name: fc.constantFrom(...NAMES) }),
    },
    fc.record({
      kind: fc.constant('service' as const),
      name: fc.constantFrom('web', 'api'),
      variant: fc.constantFrom('named', 'unnamed', 'external', 'gone'),
    }),
    fc.record({
      kind: fc.constant('users' as const),
      variant: fc.constantFrom(`u:${bcryptOf('p')}`, `v:${bcryptOf('x')}`, `s:${sha}`, 'nonsense', 'gone'),
    }),
    fc.record({
      kind: fc.constant('cert' as const),
      variant: fc.constantFrom('good', 'other', 'mismatched', 'gone'),
    }),
    fc.record({ kind: fc.constant('base' as const), hosts: fc.subarray(['b.test', 'zz.test']) }),
    fc.record({
      kind: fc.constant('claims' as const),
      hosts: fc.subarray(['a.test', 'b.test']),
      older: fc.boolean(),
    }),
    fc.record({
      kind: fc.constant('listeners' as const),
      reaches: fc.constantFrom('none', 'auth', 'absent'),
    }),
    // Another answer from the same function: the listeners it reads changed.
    fc.record({ kind: fc.constant('rebind' as const) }),
    fc.record({ kind: fc.constant('providers' as const), names: fc.subarray(['corp', 'other']) }),
    // The same content in a new map (a source re-listing): nothing may change.
    fc.record({ kind: fc.constant('relist' as const) }),
  );

  const serviceOf = (name: string, variant: string): V1Service | undefined => {
    if (variant === 'gone') return undefined;
    const object = json<V1Service>(
      service({
        name,
        namespace: 'apps',
        ports: [
          variant === 'unnamed'
            ? { port: 80, targetPort: 8080 }
            : { name: 'http', port: 80, targetPort: 8080 },
        ],
      }),
    );
    if (variant === 'external') return { ...object, spec: { ...object.spec, type: 'ExternalName' } };
    return object;
  };

  it('holds for generated edits (Ingresses, Services, Secrets, base hosts, claims, listeners, providers)', () => {
    fc.assert(
      fc.property(fc.array(edit, { minLength: 1, maxLength: 25 }), (edits) => {
        const cache = new IngressTranslationCache();
        const ingresses = new Map<string, V1Ingress>();
        let created = 0;
        let uids = 0;
        let services = byKey([serviceOf('web', 'named') as V1Service]);
        let secrets = byKey([users(`u:${bcryptOf('p')}`), tlsSecret('good')]);
        let base: IngressInput['base'] = { hosts: [] };
        let otherClaims: AgedClaim[] = [];
        let reachesTollgate: IngressInput['reachesTollgate'] = () => false;
        let oidcProviders: readonly string[] = ['corp'];
        let listening = false;
        const own = (host: string, port: number) => listening && host === '10.0.0.1' && port === 4180;
        const replaced = <T>(map: ReadonlyMap<string, T>, key: string, value: T | undefined) => {
          const next = new Map(map);
          if (value === undefined) next.delete(key);
          else next.set(key, value);
          return next;
        };
        for (const step of edits) {
          switch (step.kind) {
            case 'ingress': {
              const namespace = namespaceOf(step.name);
              const before = ingresses.get(step.name);
              // An edit keeps the creation time; a new Ingress gets the next one (some share it).
              const time =
                before?.metadata?.creationTimestamp ??
                new Date(Date.UTC(2026, 0, 1 + Math.floor(created++ / 2)));
              const object = json<V1Ingress>(
                ingress({
                  name: step.name,
                  namespace,
                  ...(step.spec.annotations ? { annotations: step.spec.annotations } : {}),
                  ...(step.spec.tls ? { tls: step.spec.tls } : {}),
                  ...(step.spec.defaultBackend ? { defaultBackend: step.spec.defaultBackend } : {}),
                  rules: step.spec.rules.map((rule) => ({
                    host: rule.host,
                    paths: rule.paths.map((item) => ({
                      ...item,
                      pathType: item.pathType as 'Prefix' | 'Exact' | 'ImplementationSpecific' | undefined,
                    })),
                  })),
                }),
              );
              // A rule path left out (ImplementationSpecific may leave it out).
              const rules = object.spec?.rules ?? [];
              const first = rules[0]?.http?.paths[0];
              if (first?.pathType === 'ImplementationSpecific' && first.path === '/') delete first.path;
              // As the API server: the same uid while it lives, the generation bumped by a spec change.
              const spec = JSON.stringify(object.spec);
              const generation =
                before === undefined
                  ? 1
                  : (before.metadata?.generation ?? 0) + (JSON.stringify(before.spec) === spec ? 0 : 1);
              ingresses.set(step.name, {
                ...object,
                metadata: {
                  ...object.metadata,
                  creationTimestamp: time,
                  uid: before?.metadata?.uid ?? `uid-${step.name}-${uids++}`,
                  generation,
                },
              });
              break;
            }
            case 'annotate': {
              // Annotations are metadata: the API server keeps the generation.
              const before = ingresses.get(step.name);
              if (before !== undefined)
                ingresses.set(step.name, {
                  ...before,
                  metadata: { ...before.metadata, annotations: step.annotations ?? {} },
                });
              break;
            }
            case 'status': {
              // Tollgate's own status write: a new object, nothing a translation reads changed.
              const before = ingresses.get(step.name);
              if (before !== undefined)
                ingresses.set(step.name, {
                  ...before,
                  metadata: { ...before.metadata, resourceVersion: String(uids++) },
                  status: { loadBalancer: { ingress: [{ ip: `10.9.9.${uids % 250}` }] } },
                });
              break;
            }
            case 'delete-ingress':
              ingresses.delete(step.name);
              break;
            case 'service':
              services = replaced(services, `apps/${step.name}`, serviceOf(step.name, step.variant));
              break;
            case 'users':
              secrets = replaced(
                secrets,
                'apps/users',
                step.variant === 'gone' ? undefined : users(step.variant),
              );
              break;
            case 'cert':
              secrets = replaced(
                secrets,
                'apps/cert',
                step.variant === 'gone' ? undefined : tlsSecret(step.variant),
              );
              break;
            case 'base':
              base = { hosts: step.hosts.map((name) => ({ name, paths: [] })) };
              break;
            case 'claims':
              otherClaims =
                step.hosts.length === 0
                  ? []
                  : [
                      {
                        namespace: 'team',
                        ingress: 'HTTPRoute team/r',
                        hosts: step.hosts,
                        created: Date.UTC(step.older ? 2025 : 2027, 0, 1),
                      },
                    ];
              break;
            case 'listeners':
              reachesTollgate =
                step.reaches === 'absent'
                  ? undefined
                  : step.reaches === 'auth'
                    ? (host, port) => host === '10.0.0.1' && port === 4180
                    : own;
              break;
            case 'rebind':
              listening = !listening;
              break;
            case 'providers':
              oidcProviders = step.names;
              break;
            case 'relist':
              services = new Map(services);
              secrets = new Map(secrets);
              break;
          }
          const input: IngressInput = {
            className: 'tollgate',
            classes: [],
            ingresses: [...ingresses.values()],
            services,
            secrets,
            base,
            otherClaims,
            reachesTollgate,
            oidcProviders,
          };
          assert.deepStrictEqual(translateIngresses(input, cache), translateIngresses(input));
        }
      }),
      { numRuns: 400 },
    );
  });
});
