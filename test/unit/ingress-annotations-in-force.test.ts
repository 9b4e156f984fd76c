import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Ingress, V1IngressClass, V1Secret, V1Service } from '@kubernetes/client-node';
import { ingressAnnotationsInForce } from '../../src/sources/kubernetes/ingress/annotations-in-force.ts';
import { type IngressInput, translateIngresses } from '../../src/sources/kubernetes/ingress/translate.ts';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';
import { ingress, ingressClass, secret, service } from '../helpers/fake-kube-api.ts';

/**
 * An Ingress's auth annotations reported fine are on every path it serves
 * (docs/ingress.md#when-something-is-wrong): the check that runs after each translation, on the
 * table built, against the annotations read again from the object.
 */

const json = <T>(model: { toJSON(): unknown }) => structuredClone(model.toJSON()) as T;
const NS = 'apps';

function input(ingresses: V1Ingress[]): IngressInput {
  const web = json<V1Service>(service({ name: 'web', namespace: NS, ports: [{ name: 'http', port: 80 }] }));
  const users = json<V1Secret>(
    secret({ name: 'users', namespace: NS, data: { auth: `alice:${bcryptOf('p')}\n` } }),
  );
  return {
    className: 'tollgate',
    classes: [json<V1IngressClass>(ingressClass())],
    ingresses,
    services: new Map([[`${NS}/web`, web]]),
    secrets: new Map([[`${NS}/users`, users]]),
    base: { hosts: [] },
  };
}

const shaped = (name: string, host: string, annotations: Record<string, string>) =>
  json<V1Ingress>(
    ingress({
      name,
      namespace: NS,
      annotations,
      rules: [
        {
          host,
          paths: [
            { path: '/', pathType: 'Prefix', service: 'web', port: 80 },
            { path: '/api', pathType: 'Exact', service: 'web', port: 80 },
          ],
        },
      ],
    }),
  );

describe('Ingress annotations in force', () => {
  it('every path of an Ingress whose auth annotations are fine carries them; one that cannot be honoured is closed', () => {
    const result = translateIngresses(
      input([
        shaped('basic', 'basic.test', {
          'tollgate.io/auth-type': 'basic',
          'tollgate.io/auth-secret': 'users',
          'tollgate.io/allow-subjects': 'alice',
          'tollgate.io/rate-limit': '7',
        }),
        shaped('jwt', 'jwt.test', { 'tollgate.io/auth-type': 'jwt' }),
        shaped('forward', 'forward.test', {
          'nginx.ingress.kubernetes.io/auth-url': 'http://auth.example/check',
        }),
        shaped('missing', 'missing.test', {
          'tollgate.io/auth-type': 'basic',
          'tollgate.io/auth-secret': 'no-such-secret',
        }),
        shaped('open', 'open.test', {}),
      ]),
    );
    const paths = new Map(result.hosts.map((host) => [host.name, host.paths]));
    for (const path of paths.get('basic.test') ?? []) {
      assert.equal(path.authorization?.type, 'basic');
      assert.deepEqual(path.authorization?.allow?.subjects, ['alice']);
      assert.equal(path.rateLimit, 7);
      assert.equal(path.unavailable, null);
    }
    for (const path of paths.get('jwt.test') ?? []) assert.equal(path.authorization?.type, 'jwt');
    for (const path of paths.get('forward.test') ?? []) assert.equal(path.authorization?.type, 'forward');
    for (const path of paths.get('missing.test') ?? [])
      assert.match(String(path.unavailable), /no-such-secret/);
    for (const path of paths.get('open.test') ?? []) assert.equal(path.authorization, null);
    assert.equal(paths.get('basic.test')?.length, 2);
    for (const name of ['basic', 'jwt', 'forward', 'open'])
      assert.deepEqual(result.reports.get(`${NS}/${name}`)?.problems, [], name);
    // Nothing the check found: no report names a path answering 503 for lack of its annotations.
    for (const report of result.reports.values())
      assert.ok(!report.problems.some((problem) => problem.includes('so it answers 503')));
  });

  it('a path that lost its Ingress’s authentication is closed with 503 and the Ingress is reported', () => {
    const object = shaped('basic', 'basic.test', {
      'tollgate.io/auth-type': 'basic',
      'tollgate.io/auth-secret': 'users',
    });
    const result = translateIngresses(input([object]));
    const [root, api] = result.hosts[0]?.paths ?? [];
    assert.ok(root && api);
    // As a faulty translation would leave it: one path served without the annotations' policy.
    const host = result.hosts[0] as (typeof result.hosts)[number];
    host.paths[1] = { ...api, authorization: null };
    ingressAnnotationsInForce([object], result.hosts, result.reports);
    // The path is not changed: its closed copy takes its place in the table.
    const [rootNow, apiNow] = host.paths;
    assert.match(String(apiNow?.unavailable), /annotations of ingress\/apps\/basic are not in force/);
    assert.equal(rootNow, root, 'the path that carries them stays served, the same object');
    assert.equal(root.unavailable, null);
    assert.deepEqual(result.reports.get(`${NS}/basic`)?.problems, [
      'basic.test /api (Exact): auth-type basic is not on it, so it answers 503',
    ]);
  });

  it('rate-limit and allow-* annotations count too', () => {
    const object = shaped('limited', 'limited.test', {
      'tollgate.io/auth-type': 'jwt',
      'tollgate.io/allow-subjects': 'ci',
      'tollgate.io/rate-limit': '3',
    });
    const result = translateIngresses(input([object]));
    const [root, api] = result.hosts[0]?.paths ?? [];
    assert.ok(root && api);
    const host = result.hosts[0] as (typeof result.hosts)[number];
    const { allow: _allow, ...withoutAllow } = api.authorization as NonNullable<typeof api.authorization>;
    host.paths.splice(0, 2, { ...root, rateLimit: null }, { ...api, authorization: withoutAllow });
    ingressAnnotationsInForce([object], result.hosts, result.reports);
    assert.notEqual(host.paths[0]?.unavailable, null);
    assert.notEqual(host.paths[1]?.unavailable, null);
    assert.deepEqual(result.reports.get(`${NS}/limited`)?.problems, [
      'limited.test /: rate-limit 3 is not on it, so it answers 503',
      'limited.test /api (Exact): its allow-* rules are not on it, so it answers 503',
    ]);
  });
});
