import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Ingress, V1IngressClass, V1Secret, V1Service } from '@kubernetes/client-node';
import { pathConfig } from '../../src/config/path-config.ts';
import type { PathConfig } from '../../src/config/types.ts';
import { authUrlTargetProblem } from '../../src/policy/auth-url-guard.ts';
import { readAnnotations } from '../../src/sources/kubernetes/ingress/annotations.ts';
import { type IngressInput, translateIngresses } from '../../src/sources/kubernetes/ingress/translate.ts';
import {
  certificateHosts,
  hostOwners,
  hostOwnershipProblem,
  mayServeHost,
} from '../../src/sources/kubernetes/ownership.ts';
import { selfSigned } from '../helpers/certs.ts';
import { ingress, ingressClass, secret, service } from '../helpers/fake-kube-api.ts';

const json = <T>(model: { toJSON(): unknown }) => structuredClone(model.toJSON()) as T;

/** An Ingress of `namespace` created at `iso`, its backends the Service `web` of that namespace. */
function made(iso: string, spec: Parameters<typeof ingress>[0]): V1Ingress {
  const object = json<V1Ingress>(ingress(spec));
  return { ...object, metadata: { ...object.metadata, creationTimestamp: new Date(iso) } };
}

function input(ingresses: V1Ingress[], extra: Partial<IngressInput> = {}): IngressInput {
  const services = ['team-a', 'team-b', 'team-c'].map((namespace) =>
    json<V1Service>(
      service({ name: 'web', namespace, ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
    ),
  );
  return {
    className: 'tollgate',
    classes: [json<V1IngressClass>(ingressClass())],
    ingresses,
    services: new Map(services.map((s) => [`${s.metadata?.namespace}/${s.metadata?.name}`, s])),
    secrets: new Map(),
    base: { hosts: [] },
    ...extra,
  };
}

const filePath = (prefix: string): PathConfig => pathConfig(prefix);

const served = (result: ReturnType<typeof translateIngresses>) =>
  result.hosts.flatMap((host) =>
    host.paths.map((path) => `${host.name}${path.prefix}${path.exact ? '$' : ''} ${path.origin}`),
  );

describe('host ownership', () => {
  it('upstreams.yaml owns its hosts; else the first claim (oldest first) owns a host for its namespace', () => {
    const owners = hostOwners(
      ['file.test'],
      [
        { namespace: 'team-a', ingress: 'team-a/old', hosts: ['a.test', 'file.test'] },
        { namespace: 'team-b', ingress: 'team-b/new', hosts: ['a.test', 'b.test'] },
      ],
    );
    assert.deepEqual(owners.get('file.test'), { kind: 'file' });
    assert.deepEqual(owners.get('a.test'), { kind: 'namespace', namespace: 'team-a', ingress: 'team-a/old' });
    assert.equal(mayServeHost(owners.get('a.test'), 'team-a'), true);
    assert.equal(mayServeHost(owners.get('a.test'), 'team-b'), false);
    assert.equal(mayServeHost(owners.get('file.test'), 'team-a'), false);
    assert.equal(mayServeHost(undefined, 'team-c'), true);
    assert.equal(hostOwnershipProblem('b.test', owners.get('b.test'), 'team-b'), null);
    assert.match(
      hostOwnershipProblem('a.test', owners.get('a.test'), 'team-b') ?? '',
      /host a\.test belongs to namespace team-a \(claimed first by the Ingress team-a\/old\)/,
    );
  });

  it('an Ingress of another namespace is left out whole, whatever its paths; the owner namespace shares', () => {
    const owner = made('2026-01-01T00:00:00Z', {
      name: 'web',
      namespace: 'team-a',
      rules: [{ host: 'app.test', paths: [{ path: '/', service: 'web', port: 80 }] }],
    });
    const intruder = made('2026-01-02T00:00:00Z', {
      name: 'takeover',
      namespace: 'team-b',
      rules: [
        {
          host: 'app.test',
          paths: [
            { path: '/', pathType: 'Exact', service: 'web', port: 80 },
            { path: '/api', service: 'web', port: 80 },
          ],
        },
        { host: 'b.test', paths: [{ service: 'web', port: 80 }] },
      ],
    });
    const sibling = made('2026-01-03T00:00:00Z', {
      name: 'api',
      namespace: 'team-a',
      rules: [{ host: 'app.test', paths: [{ path: '/api', service: 'web', port: 80 }] }],
    });
    // Given in any order: age decides, not the list.
    const result = translateIngresses(input([sibling, intruder, owner]));
    assert.deepEqual(served(result), ['app.test/ ingress/team-a/web', 'app.test/api ingress/team-a/api']);
    const report = result.reports.get('team-b/takeover');
    assert.equal(report?.served, false);
    assert.equal(report?.problems.length, 1);
    assert.match(report?.problems[0] ?? '', /host app\.test belongs to namespace team-a/);
    assert.deepEqual(result.reports.get('team-a/api')?.problems, []);
  });

  it('a claim is made by naming the host: a broken owner keeps it; a rule without host and defaultBackend claim DEFAULT', () => {
    const broken = made('2026-01-01T00:00:00Z', {
      name: 'broken',
      namespace: 'team-a',
      rules: [{ host: 'app.test', paths: [{ path: 'no-slash', service: 'web', port: 80 }] }],
    });
    const catchAll = made('2026-01-01T00:00:01Z', {
      name: 'catch-all',
      namespace: 'team-a',
      defaultBackend: { service: 'web', port: 80 },
      rules: [{ host: 'a2.test', paths: [{ service: 'web', port: 80 }] }],
    });
    const later = made('2026-01-02T00:00:00Z', {
      name: 'later',
      namespace: 'team-b',
      rules: [{ host: 'app.test', paths: [{ service: 'web', port: 80 }] }],
    });
    const hostless = made('2026-01-02T00:00:00Z', {
      name: 'hostless',
      namespace: 'team-c',
      rules: [{ paths: [{ path: '/c', service: 'web', port: 80 }] }],
    });
    const result = translateIngresses(input([broken, catchAll, later, hostless]));
    assert.deepEqual(served(result), [
      'a2.test/ ingress/team-a/catch-all',
      'DEFAULT/ ingress/team-a/catch-all',
    ]);
    assert.match(result.reports.get('team-b/later')?.problems[0] ?? '', /belongs to namespace team-a/);
    assert.match(result.reports.get('team-c/hostless')?.problems[0] ?? '', /the default host/);

    // upstreams.yaml's DEFAULT is the file's: no defaultBackend is added to it.
    const withFileDefault = translateIngresses(
      input([catchAll], { base: { hosts: [{ name: 'DEFAULT', paths: [filePath('/')] }] } }),
    );
    assert.deepEqual(served(withFileDefault), []);
    assert.match(
      withFileDefault.reports.get('team-a/catch-all')?.problems[0] ?? '',
      /the default host .* is served by upstreams\.yaml/,
    );
  });

  it('a host upstreams.yaml names takes no Ingress path, however old the Ingress', () => {
    const old = made('2020-01-01T00:00:00Z', {
      name: 'old',
      namespace: 'team-a',
      rules: [{ host: 'file.test', paths: [{ path: '/public', service: 'web', port: 80 }] }],
    });
    const result = translateIngresses(
      input([old], { base: { hosts: [{ name: 'file.test', paths: [filePath('/admin')] }] } }),
    );
    assert.deepEqual(result.hosts, []);
    assert.deepEqual(result.reports.get('team-a/old')?.problems, [
      'host file.test is served by upstreams.yaml; an Ingress adds no path to it',
    ]);
  });
});

describe('TLS certificates by SNI follow host ownership', () => {
  const tlsSecret = (namespace: string, name: string) => {
    const pair = selfSigned('app.test');
    return json<V1Secret>(
      secret({
        name,
        namespace,
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': pair.cert.toString(), 'tls.key': pair.key.toString() },
      }),
    );
  };

  it('certificateHosts: only served hosts a name or a one-label wildcard covers, never DEFAULT', () => {
    const hosts = new Set(['a.example.com', 'x.a.example.com', 'other.test', 'DEFAULT']);
    assert.deepEqual(certificateHosts(['*.example.com', 'other.test'], hosts), [
      'a.example.com',
      'other.test',
    ]);
    assert.deepEqual(certificateHosts(['nobody.test'], hosts), []);
  });

  it("a Secret is served only for its own Ingress's hosts; listed hosts it does not serve are reported", () => {
    const older = made('2026-01-01T00:00:00Z', {
      name: 'c',
      namespace: 'team-c',
      tls: [{ hosts: ['c.test', 'app.test'], secretName: 'c-tls' }],
      rules: [{ host: 'c.test', paths: [{ service: 'web', port: 80 }] }],
    });
    const owner = made('2026-01-02T00:00:00Z', {
      name: 'app',
      namespace: 'team-a',
      tls: [{ hosts: ['app.test'], secretName: 'a-tls' }],
      rules: [{ host: 'app.test', paths: [{ service: 'web', port: 80 }] }],
    });
    const newer = made('2026-01-03T00:00:00Z', {
      name: 'b2',
      namespace: 'team-b',
      tls: [{ hosts: ['app.test', 'file.test'], secretName: 'b-tls' }],
      rules: [{ host: 'b2.test', paths: [{ service: 'web', port: 80 }] }],
    });
    const secrets = [
      tlsSecret('team-c', 'c-tls'),
      tlsSecret('team-a', 'a-tls'),
      tlsSecret('team-b', 'b-tls'),
    ];
    const result = translateIngresses(
      input([older, owner, newer], {
        secrets: new Map(secrets.map((s) => [`${s.metadata?.namespace}/${s.metadata?.name}`, s])),
        base: { hosts: [{ name: 'file.test', paths: [filePath('/')] }] },
      }),
    );
    assert.deepEqual(
      result.certificates.map((c) => [c.secret, c.hosts]),
      [
        ['team-c/c-tls', ['c.test']],
        ['team-a/a-tls', ['app.test']],
      ],
    );
    assert.deepEqual(
      result.reports.get('team-b/b2')?.notices.map((n) => n.reason),
      ['TLSHostNotServed', 'TLSHostNotServed'],
    );
    assert.deepEqual(result.reports.get('team-b/b2')?.problems, []);
    // No host listed: the certificate's names, narrowed to the hosts this Ingress serves, no notice.
    const unlisted = made('2026-01-02T00:00:00Z', {
      name: 'app',
      namespace: 'team-a',
      tls: [{ hosts: [], secretName: 'a-tls' }],
      rules: [{ host: 'other.test', paths: [{ service: 'web', port: 80 }] }],
    });
    const narrowed = translateIngresses(
      input([unlisted], { secrets: new Map([['team-a/a-tls', secrets[1] as V1Secret]]) }),
    );
    assert.deepEqual(narrowed.certificates, []);
    assert.deepEqual(narrowed.reports.get('team-a/app')?.notices, []);
  });
});

describe("an Ingress's auth-url target", () => {
  const own = (host: string, port: number) => host === '10.1.2.3' && port === 8081;

  it("refuses loopback, link-local, unspecified, localhost and Tollgate's own listeners; allows the rest", () => {
    for (const [url, why] of [
      ['http://127.0.0.1:8081/healthz', /loopback address 127\.0\.0\.1/],
      ['http://127.1/', /loopback address 127\.0\.0\.1/],
      ['http://2130706433/', /loopback address 127\.0\.0\.1/],
      ['http://0x7f000001/', /loopback address 127\.0\.0\.1/],
      ['http://[::1]/', /loopback address ::1/],
      ['http://[::ffff:127.0.0.1]:9/', /loopback address 127\.0\.0\.1/],
      ['http://localhost:4180/', /names localhost/],
      ['http://LOCALHOST./', /names localhost/],
      ['http://auth.localhost/', /names localhost/],
      ['http://169.254.169.254/latest/meta-data/', /link-local address 169\.254\.169\.254/],
      ['http://[fe80::1]/', /link-local address fe80::1/],
      ['http://0.0.0.0:8081/', /unspecified address 0\.0\.0\.0/],
      ['http://0/', /unspecified address 0\.0\.0\.0/],
      ['http://[::]/', /unspecified address ::/],
      ['http://10.1.2.3:8081/healthz', /Tollgate's own listener \(port 8081\)/],
    ] as const) {
      assert.match(authUrlTargetProblem(new URL(url).href, own) ?? 'allowed', why, url);
    }
    for (const url of [
      'http://10.1.2.3:4180/oauth2/auth',
      'http://10.9.9.9:8081/',
      'https://oauth2-proxy.auth.svc/oauth2/auth',
      'http://[fd00::2]/',
    ])
      assert.equal(authUrlTargetProblem(url, own), null, url);
  });

  it('closes the paths of an Ingress naming one, with the reason; upstreams.yaml is not checked here', () => {
    const result = translateIngresses(
      input([
        made('2026-01-01T00:00:00Z', {
          name: 'ssrf',
          namespace: 'team-a',
          annotations: { 'nginx.ingress.kubernetes.io/auth-url': 'http://169.254.169.254/' },
          rules: [{ host: 'ssrf.test', paths: [{ service: 'web', port: 80 }] }],
        }),
      ]),
    );
    assert.ok(result.hosts[0]?.paths[0]?.unavailable);
    assert.match(result.reports.get('team-a/ssrf')?.problems[0] ?? '', /auth-url .* link-local/);
  });
});

describe('auth-type digest', () => {
  it('is reported as unsupported by name, not as an auth-secret without auth-type', () => {
    const read = readAnnotations({
      'nginx.ingress.kubernetes.io/auth-type': 'digest',
      'nginx.ingress.kubernetes.io/auth-secret': 'users',
    });
    assert.deepEqual(read.authProblems, [
      'nginx.ingress.kubernetes.io/auth-type: digest authentication is not supported (use basic over TLS)',
    ]);
    // Without any auth-type, a dangling auth-secret is still named.
    assert.match(
      readAnnotations({ 'tollgate.io/auth-secret': 'users' }).authProblems[0] ?? '',
      /tollgate\.io\/auth-secret is set without an auth-type/,
    );
  });
});
