import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import type { V1Ingress, V1IngressClass, V1Secret, V1Service } from '@kubernetes/client-node';
import { verifyPassword } from '../../src/auth/password.ts';
import { pathConfig } from '../../src/config/path-config.ts';
import { emptyUpstreamsConfig } from '../../src/config/validate-upstreams.ts';
import { parseApiKeys, parseAuthMap, parseHtpasswd } from '../../src/policy/credentials.ts';
import { readAnnotations } from '../../src/sources/kubernetes/ingress/annotations.ts';
import {
  type IngressInput,
  secretsOf,
  translateIngresses,
} from '../../src/sources/kubernetes/ingress/translate.ts';
import { withSourceHosts } from '../../src/sources/kubernetes/merge.ts';
import { bcryptOf } from '../helpers/bcrypt-hashes.ts';
import { selfSigned } from '../helpers/certs.ts';
import { ingress, ingressClass, secret, service } from '../helpers/fake-kube-api.ts';

const json = <T>(model: { toJSON(): unknown }) => structuredClone(model.toJSON()) as T;
const withTime = (object: V1Ingress, iso: string): V1Ingress => ({
  ...object,
  metadata: { ...object.metadata, creationTimestamp: new Date(iso) },
});

function input(
  ingresses: V1Ingress[],
  extra: { secrets?: V1Secret[]; classes?: V1IngressClass[]; base?: IngressInput['base'] } = {},
): IngressInput {
  const services = [
    json<V1Service>(
      service({ name: 'web', namespace: 'apps', ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
    ),
    json<V1Service>(service({ name: 'bare', namespace: 'apps', ports: [{ port: 80, targetPort: 9000 }] })),
  ];
  return {
    className: 'tollgate',
    classes: extra.classes ?? [json<V1IngressClass>(ingressClass())],
    ingresses,
    services: new Map(services.map((s) => [`${s.metadata?.namespace}/${s.metadata?.name}`, s])),
    secrets: new Map((extra.secrets ?? []).map((s) => [`${s.metadata?.namespace}/${s.metadata?.name}`, s])),
    base: extra.base ?? { hosts: [] },
  };
}
const one = (spec: Parameters<typeof ingress>[0]) => json<V1Ingress>(ingress({ namespace: 'apps', ...spec }));

describe('translating Ingresses into routes', () => {
  it('hosts, path types and the Service port mapped to the EndpointSlice port name', () => {
    const result = translateIngresses(
      input([
        one({
          name: 'a',
          rules: [
            {
              host: 'Web.Example.com',
              paths: [
                { path: '/api/', service: 'web', port: 80 },
                { path: '/exact/', pathType: 'Exact', service: 'web', port: 'http' },
                { path: '/impl', pathType: 'ImplementationSpecific', service: 'bare', port: 80 },
              ],
            },
            { paths: [{ service: 'web', port: 80 }] },
          ],
        }),
      ]),
    );
    const [web, fallback] = result.hosts;
    assert.equal(web?.name, 'web.example.com');
    assert.deepEqual(
      web?.paths.map((p) => [p.prefix, p.exact, p.service]),
      [
        ['/api', false, { name: 'web', namespace: 'apps', port: 'http' }],
        ['/exact/', true, { name: 'web', namespace: 'apps', port: 'http' }],
        ['/impl', false, { name: 'bare', namespace: 'apps', port: '' }],
      ],
    );
    assert.equal(fallback?.name, 'DEFAULT');
    assert.deepEqual(result.reports.get('apps/a')?.problems, []);
  });

  it('a missing Service or port answers 503 (no servers) and warns; resource backends are refused', () => {
    const result = translateIngresses(
      input([
        one({
          name: 'a',
          rules: [
            {
              host: 'x.test',
              paths: [
                { service: 'nobody', port: 80 },
                { path: '/p', service: 'web', port: 81 },
              ],
            },
          ],
        }),
      ]),
    );
    assert.deepEqual(
      result.hosts[0]?.paths.map((p) => p.service),
      [null, null],
    );
    assert.deepEqual(
      result.reports.get('apps/a')?.notices.map((notice) => notice.reason),
      ['BackendNotFound', 'BackendNotFound'],
    );
    assert.deepEqual(result.reports.get('apps/a')?.problems, []);
    const resource = one({ name: 'r', rules: [] });
    resource.spec = {
      ingressClassName: 'tollgate',
      rules: [
        {
          host: 'r.test',
          http: {
            paths: [
              {
                path: '/',
                pathType: 'Prefix',
                backend: { resource: { kind: 'Bucket', name: 'b', apiGroup: 'x' } },
              },
            ],
          },
        },
      ],
    };
    const refused = translateIngresses(input([resource]));
    assert.equal(refused.hosts.length, 0);
    assert.match(refused.reports.get('apps/r')?.problems[0] ?? '', /resource backends are not supported/);
  });

  it('the oldest Ingress wins a host+path; a host upstreams.yaml names takes no Ingress path', () => {
    const base = {
      hosts: [
        {
          name: 'file.test',
          paths: [pathConfig('/file')],
        },
      ],
    };
    const newer = withTime(
      one({
        name: 'a-newer',
        rules: [
          {
            host: 'x.test',
            paths: [
              { service: 'web', port: 80 },
              { path: '/own', service: 'web', port: 80 },
            ],
          },
        ],
      }),
      '2026-01-02T00:00:00Z',
    );
    // Even an Ingress older than every other, naming a host of upstreams.yaml, is left out whole.
    const onFileHost = withTime(
      one({
        name: 'on-file',
        rules: [
          { host: 'file.test', paths: [{ path: '/other', service: 'web', port: 80 }] },
          { host: 'mine.test', paths: [{ service: 'web', port: 80 }] },
        ],
      }),
      '2025-01-01T00:00:00Z',
    );
    const older = withTime(
      one({ name: 'z-older', rules: [{ host: 'x.test', paths: [{ service: 'bare', port: 80 }] }] }),
      '2026-01-01T00:00:00Z',
    );
    const result = translateIngresses(input([newer, older, onFileHost], { base }));
    assert.deepEqual(
      result.hosts.map((h) => [h.name, h.paths.map((p) => [p.prefix, p.origin])]),
      [
        [
          'x.test',
          [
            ['/', 'ingress/apps/z-older'],
            ['/own', 'ingress/apps/a-newer'],
          ],
        ],
      ],
    );
    const problems = result.reports.get('apps/a-newer')?.problems ?? [];
    assert.deepEqual(problems.length, 1);
    assert.match(problems[0] ?? '', /already served by the older Ingress apps\/z-older/);
    assert.equal(result.reports.get('apps/on-file')?.served, false);
    assert.deepEqual(result.reports.get('apps/on-file')?.problems, [
      'host file.test is served by upstreams.yaml; an Ingress adds no path to it',
    ]);
    // Same creation time: namespace/name decides.
    const tie = translateIngresses(
      input([withTime(newer, '2026-01-01T00:00:00Z'), withTime(older, '2026-01-01T00:00:00Z')]),
    );
    assert.equal(tie.hosts[0]?.paths[0]?.origin, 'ingress/apps/a-newer');
    const merged = withSourceHosts({ ...emptyUpstreamsConfig('', '', 'file'), hosts: base.hosts }, [
      ...result.hosts,
      { name: 'file.test', paths: tie.hosts[0]?.paths ?? [] },
    ]);
    // A translation made before upstreams.yaml took a host loses that host whole at the merge.
    assert.deepEqual(
      merged.hosts.map((h) => [h.name, h.paths.map((p) => p.prefix)]),
      [
        ['file.test', ['/file']],
        ['x.test', ['/', '/own']],
      ],
    );
  });

  it('classes: the configured name, classes of our controller, unclassed only with a default class', () => {
    const unclassed = one({
      name: 'u',
      className: null,
      rules: [{ host: 'u.test', paths: [{ service: 'web', port: 80 }] }],
    });
    const other = one({
      name: 'o',
      className: 'nginx',
      rules: [{ host: 'o.test', paths: [{ service: 'web', port: 80 }] }],
    });
    assert.deepEqual([...translateIngresses(input([unclassed, other])).reports.keys()], []);
    const defaultClass = json<V1IngressClass>(ingressClass({ name: 'tg', isDefault: true }));
    assert.deepEqual(
      [...translateIngresses(input([unclassed, other], { classes: [defaultClass] })).reports.keys()],
      ['apps/u'],
    );
    const theirs = json<V1IngressClass>(
      ingressClass({ name: 'tollgate', controller: 'k8s.io/ingress-nginx' }),
    );
    const mine = one({ name: 'm', rules: [{ host: 'm.test', paths: [{ service: 'web', port: 80 }] }] });
    assert.deepEqual([...translateIngresses(input([mine], { classes: [theirs] })).reports.keys()], []);
  });

  it('auth annotations: Secrets read from the Ingress namespace only; missing or bad ones close the paths', () => {
    const annotated = (annotations: Record<string, string>) =>
      one({ name: 'a', annotations, rules: [{ host: 'a.test', paths: [{ service: 'web', port: 80 }] }] });
    const users = json<V1Secret>(
      secret({ name: 'users', namespace: 'apps', data: { auth: `u:${bcryptOf('p')}` } }),
    );
    const ok = translateIngresses(
      input([annotated({ 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'users' })], {
        secrets: [users],
      }),
    );
    const path = ok.hosts[0]?.paths[0];
    assert.equal(path?.unavailable, null);
    assert.equal(path?.authorization?.type, 'basic');
    assert.equal(path?.authorization?.users[0]?.username, 'u');

    for (const [annotations, message] of [
      [
        { 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'missing' },
        /auth Secret apps\/missing does not exist/,
      ],
      [{ 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'other/users' }, /another namespace/],
      [{ 'tollgate.io/auth-type': 'basic' }, /needs an auth-secret/],
      [{ 'nginx.ingress.kubernetes.io/auth-type': 'digest' }, /digest authentication is not supported/],
      [{ 'tollgate.io/auth-tpye': 'basic' }, /unknown annotation tollgate.io\/auth-tpye/],
      [{ 'nginx.ingress.kubernetes.io/auth-proxy-set-headers': 'apps/h' }, /paths stay closed/],
      [{ 'nginx.ingress.kubernetes.io/auth-tls-verify-client': 'on' }, /need auth-tls-secret/],
      [{ 'nginx.ingress.kubernetes.io/auth-tls-secret': 'other/ca' }, /another namespace/],
      [{ 'nginx.ingress.kubernetes.io/auth-tls-secret': 'apps/missing' }, /apps\/missing does not exist/],
      [{ 'nginx.ingress.kubernetes.io/auth-tls-secret': 'users' }, /has no 'ca.crt' key/],
      [{ 'nginx.ingress.kubernetes.io/auth-tls-verify-client': 'sometimes' }, /not one of on, off/],
      [{ 'nginx.ingress.kubernetes.io/auth-tls-match-cn': 'payments' }, /must start with CN=/],
      [{ 'nginx.ingress.kubernetes.io/auth-tls-match-cn': 'CN=(a' }, /not an RE2 expression/],
      [
        {
          'nginx.ingress.kubernetes.io/auth-tls-secret': 'users',
          'tollgate.io/auth-type': 'basic',
          'tollgate.io/auth-secret': 'users',
        },
        /has no 'ca.crt' key/,
      ],
      [
        { 'tollgate.io/auth-type': 'basic', 'nginx.ingress.kubernetes.io/auth-type': 'jwt' },
        /conflicts with/,
      ],
    ] as const) {
      const result = translateIngresses(input([annotated(annotations)], { secrets: [users] }));
      const closed = result.hosts[0]?.paths[0];
      assert.ok(closed?.unavailable, JSON.stringify(annotations));
      assert.match(result.reports.get('apps/a')?.problems.join('; ') ?? '', message);
    }
    assert.deepEqual(
      secretsOf(annotated({ 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'other/users' })),
      [],
    );
  });

  it('TLS: a kubernetes.io/tls Secret per host list, and plain HTTP redirected unless annotated otherwise', () => {
    const pair = selfSigned('a.test');
    const other = selfSigned('a.test');
    const pem = { 'tls.crt': pair.cert.toString(), 'tls.key': pair.key.toString() };
    const tls = json<V1Secret>(
      secret({ name: 'cert', namespace: 'apps', type: 'kubernetes.io/tls', data: pem }),
    );
    const spec = {
      name: 'a',
      tls: [{ hosts: ['a.test'], secretName: 'cert' }],
      rules: [
        { host: 'a.test', paths: [{ service: 'web', port: 80 }] },
        { host: 'b.test', paths: [{ service: 'web', port: 80 }] },
      ],
    };
    const result = translateIngresses(input([one(spec)], { secrets: [tls] }));
    assert.deepEqual(
      result.certificates.map((c) => [c.secret, c.hosts]),
      [['apps/cert', ['a.test']]],
    );
    assert.deepEqual(
      result.hosts.map((h) => [h.name, h.paths[0]?.toHttps]),
      [
        ['a.test', true],
        ['b.test', false],
      ],
    );
    const off = translateIngresses(
      input([one({ ...spec, annotations: { 'nginx.ingress.kubernetes.io/ssl-redirect': 'false' } })], {
        secrets: [tls],
      }),
    );
    assert.equal(off.hosts[0]?.paths[0]?.toHttps, false);
    const forced = translateIngresses(
      input([one({ ...spec, annotations: { 'nginx.ingress.kubernetes.io/force-ssl-redirect': 'true' } })], {
        secrets: [tls],
      }),
    );
    assert.equal(forced.hosts[1]?.paths[0]?.toHttps, true);
    const mismatched = json<V1Secret>(
      secret({
        name: 'cert',
        namespace: 'apps',
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': pair.cert.toString(), 'tls.key': other.key.toString() },
      }),
    );
    assert.match(
      translateIngresses(input([one(spec)], { secrets: [mismatched] })).reports.get('apps/a')?.problems[0] ??
        '',
      /'tls.key' is not the key of 'tls.crt'/,
    );
    const noHosts = translateIngresses(
      input([one({ ...spec, tls: [{ hosts: [], secretName: 'cert' }] })], { secrets: [tls] }),
    );
    assert.deepEqual(
      noHosts.certificates[0]?.hosts,
      ['a.test'],
      "no hosts listed: the certificate's own names",
    );
    const missing = translateIngresses(input([one(spec)]));
    assert.equal(missing.hosts.length, 0, 'a missing TLS Secret leaves the Ingress out');
    assert.match(missing.reports.get('apps/a')?.problems[0] ?? '', /TLS Secret apps\/cert does not exist/);
  });
});

describe('annotations', () => {
  it('traffic annotations in both spellings; bad values reported; unknown nginx ones ignored with a warning', () => {
    const read = readAnnotations({
      'nginx.ingress.kubernetes.io/limit-rps': '5',
      'nginx.ingress.kubernetes.io/affinity': 'cookie',
      'nginx.ingress.kubernetes.io/proxy-body-size': '8m',
      'nginx.ingress.kubernetes.io/proxy-buffering': 'on',
      'nginx.ingress.kubernetes.io/server-snippet': 'x',
      'kubectl.kubernetes.io/last-applied-configuration': '{}',
    });
    assert.deepEqual(read.settings, { rateLimit: 5, sticky: null, proxyBodySize: 8 * 1024 * 1024 });
    assert.deepEqual(read.warnings, [
      'nginx.ingress.kubernetes.io/proxy-buffering ignored: not supported by Tollgate',
      'nginx.ingress.kubernetes.io/server-snippet ignored: snippets are never executed',
    ]);
    assert.deepEqual(readAnnotations({ 'tollgate.io/rate-limit': 'lots' }).problems, [
      'tollgate.io/rate-limit: expected a whole number of requests per second',
    ]);
    assert.deepEqual(readAnnotations({ 'tollgate.io/sticky-sessions': '3600' }).settings, { sticky: 3600 });
    assert.equal(
      readAnnotations({ 'tollgate.io/auth-url': 'http://auth.svc/check' }).settings.authType,
      'forward',
    );
    assert.match(
      readAnnotations({ 'tollgate.io/auth-url': 'http://x/$(id)' }).authProblems[0] ?? '',
      /characters/,
    );
    assert.match(readAnnotations({ 'tollgate.io/auth-realm': 'a"b' }).authProblems[0] ?? '', /without "/);
    assert.deepEqual(
      readAnnotations({ 'tollgate.io/request-headers': '{"set":{"X-A":"1"},"remove":["X-B"]}' }).settings
        .requestHeaders,
      { set: [{ name: 'x-a', value: '1' }], add: [], remove: ['x-b'] },
    );
    assert.match(
      readAnnotations({ 'tollgate.io/request-headers': '{"set":{"X-Tollgate-Subject":"admin"}}' })
        .problems[0] ?? '',
      /written or guarded by Tollgate/,
    );
    assert.match(
      readAnnotations({ 'tollgate.io/auth-response-headers': 'X-User, X-Forwarded-For' }).authProblems[0] ??
        '',
      /written or guarded by Tollgate/,
    );
  });
});

describe('credentials from Secrets', () => {
  it('htpasswd: bcrypt and scrypt accepted, $apr1$ and {SHA} with a warning, plain text refused', async () => {
    const sha = `{SHA}${createHash('sha1').update('shapw').digest('base64')}`;
    const apr = execFileSync('openssl', ['passwd', '-apr1', 'aprpw'], { encoding: 'utf8' }).trim();
    const parsed = parseHtpasswd(`# users\nb:${bcryptOf('bpw')}\na:${apr}\ns:${sha}\n`);
    assert.deepEqual(parsed.problems, []);
    assert.equal(parsed.warnings.length, 2);
    const hashOf = (name: string) => parsed.entries.find((u) => u.username === name)?.passwordHash as string;
    const { parseStoredHash } = await import('../../src/auth/password.ts');
    for (const [user, password] of [
      ['b', 'bpw'],
      ['a', 'aprpw'],
      ['s', 'shapw'],
    ]) {
      const hash = parseStoredHash(hashOf(user as string));
      assert.ok(hash, user);
      assert.equal(await verifyPassword(password as string, hash), true, user);
      assert.equal(await verifyPassword(`${password}x`, hash), false, user);
    }
    assert.match(parseHtpasswd('eve:plaintext').problems[0] ?? '', /plain text is refused/);
    assert.match(parseHtpasswd('').problems[0] ?? '', /no user/);
    assert.deepEqual(
      parseAuthMap({ u: bcryptOf('x') }).entries.map((e) => e.username),
      ['u'],
    );
    assert.deepEqual(parseApiKeys('ci:abc\n\nbad line\n').problems, ["line 3 is not 'name:key'"]);
  });
});

describe('request policy annotations (docs/ingress.md#request-policies)', () => {
  const NGINX = 'nginx.ingress.kubernetes.io/';
  const translated = (annotations: Record<string, string>, path = '/app') =>
    translateIngresses(
      input([
        one({
          name: 'p',
          annotations,
          rules: [{ host: 'p.test', paths: [{ path, service: 'web', port: 80 }] }],
        }),
      ]),
    );

  it('fill the same PathPolicies as upstreams.yaml, with ingress-nginx units and CORS defaults', () => {
    const result = translated({
      [`${NGINX}proxy-body-size`]: '1g',
      [`${NGINX}enable-cors`]: 'true',
      [`${NGINX}cors-allow-origin`]: 'https://App.example.com, https://*.example.org',
      [`${NGINX}whitelist-source-range`]: '10.0.0.0/8, 192.0.2.7',
      [`${NGINX}denylist-source-range`]: '10.6.0.0/16',
      [`${NGINX}x-forwarded-prefix`]: '/app',
      [`${NGINX}app-root`]: '/app/home',
    });
    const path = result.hosts[0]?.paths[0];
    assert.equal(path?.prefix, '/app');
    assert.deepEqual(path?.policies, {
      maxBodyBytes: 1024 ** 3,
      cors: {
        allowOrigins: ['https://app.example.com', 'https://*.example.org'],
        allowMethods: ['GET', 'PUT', 'POST', 'DELETE', 'PATCH', 'OPTIONS'],
        allowHeaders: [
          'DNT',
          'Keep-Alive',
          'User-Agent',
          'X-Requested-With',
          'If-Modified-Since',
          'Cache-Control',
          'Content-Type',
          'Range',
          'Authorization',
        ],
        exposeHeaders: [],
        allowCredentials: true,
        maxAgeSeconds: 1728000,
      },
      sourceRanges: ['10.0.0.0/8', '192.0.2.7'],
      denyRanges: ['10.6.0.0/16'],
      forwardedPrefix: '/app',
      appRoot: '/app/home',
    });
    assert.deepEqual(translated({ [`${NGINX}proxy-body-size`]: '0' }).hosts[0]?.paths[0]?.policies, {
      maxBodyBytes: 0,
    });
    // The default origin * goes without credentials (browsers refuse the pair anyway).
    const any = translated({ [`${NGINX}enable-cors`]: 'true' }).hosts[0]?.paths[0]?.policies?.cors;
    assert.deepEqual([any?.allowOrigins, any?.allowCredentials], [['*'], false]);
  });

  it('rewrite-target makes the paths regexes, routed by their literal start', () => {
    const result = translated({ [`${NGINX}rewrite-target`]: '/$2' }, '/api(/|$)(.*)');
    const path = result.hosts[0]?.paths[0];
    assert.equal(path?.prefix, '/api');
    assert.deepEqual(path?.policies, {
      pathRegex: '^/api(/|$)(.*)',
      rewrite: { kind: 'regex', regex: '^/api(/|$)(.*)', replacement: '/$2', caseInsensitive: true },
    });
    assert.equal(
      translated({ [`${NGINX}use-regex`]: 'true' }, '/files/.+\\.txt').hosts[0]?.paths[0]?.prefix,
      '/files',
    );
    assert.equal(translated({ [`${NGINX}use-regex`]: 'true' }, '/v[0-9]+/x').hosts[0]?.paths[0]?.prefix, '/');
    // Without use-regex or rewrite-target, a path is a plain prefix.
    assert.equal(translated({}, '/app').hosts[0]?.paths[0]?.policies, null);
  });

  it('a value that cannot be honoured leaves the Ingress out, naming the annotation', () => {
    const problems = (annotations: Record<string, string>, path?: string) =>
      translated(annotations, path).reports.get('apps/p')?.problems ?? [];
    assert.match(
      problems({ [`${NGINX}proxy-body-size`]: '8q' }).join(),
      /proxy-body-size: '8q' is not a size/,
    );
    assert.match(
      problems({ [`${NGINX}whitelist-source-range`]: '10.0.0.0/33' }).join(),
      /whitelist-source-range: '10.0.0.0\/33'/,
    );
    assert.match(
      problems({
        [`${NGINX}enable-cors`]: 'true',
        [`${NGINX}cors-allow-origin`]: '*',
        [`${NGINX}cors-allow-credentials`]: 'true',
      }).join(),
      /cors-\*: '\*' with allow_credentials/,
    );
    assert.match(
      problems({ [`${NGINX}use-regex`]: 'true' }, '/(a)\\1').join(),
      /use-regex .*not a linear-time \(RE2\) regular expression/,
    );
    assert.match(
      problems({ [`${NGINX}rewrite-target`]: '/$3' }, '/api/(.*)').join(),
      /rewrite-target: names group \$3/,
    );
    assert.equal(translated({ [`${NGINX}proxy-body-size`]: '8q' }).hosts.length, 0);
  });

  it('an address range that cannot be honoured closes the paths (503) instead, like an auth rule', () => {
    const result = translated({
      [`${NGINX}denylist-source-range`]: '10.0.0.0/8, bad',
      [`${NGINX}enable-cors`]: 'true',
    });
    const path = result.hosts[0]?.paths[0];
    assert.match(path?.unavailable ?? '', /denylist-source-range: 'bad' is not an IP address/);
    assert.equal(path?.policies, null);
    assert.match(result.reports.get('apps/p')?.problems.join() ?? '', /denylist-source-range/);
  });

  it('auth-tls-*: the check goes with the Ingress own TLS certificates, its paths carry on / match-cn / pass-certificate', () => {
    const ca = selfSigned('Clients CA');
    const serving = selfSigned('m.test');
    const secrets = [
      json<V1Secret>(
        secret({ name: 'clients-ca', namespace: 'apps', data: { 'ca.crt': ca.cert.toString() } }),
      ),
      json<V1Secret>(
        secret({
          name: 'm-tls',
          namespace: 'apps',
          type: 'kubernetes.io/tls',
          data: { 'tls.crt': serving.cert.toString(), 'tls.key': serving.key.toString() },
        }),
      ),
      json<V1Secret>(secret({ name: 'users', namespace: 'apps', data: { auth: `u:${bcryptOf('p')}` } })),
    ];
    const mtls = (annotations: Record<string, string>) =>
      one({
        name: 'm',
        annotations: { 'nginx.ingress.kubernetes.io/auth-tls-secret': 'apps/clients-ca', ...annotations },
        tls: [{ hosts: ['m.test'], secretName: 'm-tls' }],
        rules: [{ host: 'm.test', paths: [{ service: 'web', port: 80 }] }],
      });
    const required = translateIngresses(
      input([mtls({ 'nginx.ingress.kubernetes.io/auth-tls-match-cn': 'CN=(a|b)' })], { secrets }),
    );
    const check = required.certificates[0]?.clientCertificates;
    assert.equal(check?.mode, 'require');
    assert.equal(check?.verifyDepth, 1);
    assert.equal(check?.ca, ca.cert.toString());
    assert.equal(check?.key, 'ingress apps/m');
    const path = required.hosts[0]?.paths[0];
    assert.equal(path?.unavailable, null);
    assert.equal(path?.authorization?.type, 'client_certificate');
    assert.equal(path?.authorization?.clientCertificate?.forward, 'none');
    assert.equal(path?.authorization?.clientCertificate?.anonymous, undefined);
    assert.equal(path?.authorization?.allow?.commonNames, '(a|b)');
    assert.deepEqual(secretsOf(mtls({})).sort(), ['apps/clients-ca', 'apps/m-tls']);

    const optional = translateIngresses(
      input(
        [
          mtls({
            'nginx.ingress.kubernetes.io/auth-tls-verify-client': 'optional_no_ca',
            'nginx.ingress.kubernetes.io/auth-tls-verify-depth': '2',
            'nginx.ingress.kubernetes.io/auth-tls-pass-certificate-to-upstream': 'true',
          }),
        ],
        { secrets },
      ),
    );
    assert.equal(optional.certificates[0]?.clientCertificates?.mode, 'optional');
    assert.equal(optional.certificates[0]?.clientCertificates?.verifyDepth, 2);
    const passing = optional.hosts[0]?.paths[0]?.authorization;
    assert.equal(passing?.clientCertificate?.forward, 'pem');
    assert.equal(passing?.clientCertificate?.anonymous, true);
    // optional_no_ca is still verified, and the Ingress is told so.
    assert.match(optional.reports.get('apps/m')?.warnings.join() ?? '', /still verified/);

    // optional alone: the handshake asks, the paths need no policy.
    const plain = translateIngresses(
      input([mtls({ 'nginx.ingress.kubernetes.io/auth-tls-verify-client': 'optional' })], { secrets }),
    );
    assert.equal(plain.hosts[0]?.paths[0]?.authorization, null);
    assert.equal(plain.certificates[0]?.clientCertificates?.mode, 'optional');

    // on + error-page: the handshake completes without a certificate, the paths redirect.
    const paged = translateIngresses(
      input([mtls({ 'nginx.ingress.kubernetes.io/auth-tls-error-page': 'https://help.test/mtls' })], {
        secrets,
      }),
    );
    assert.equal(paged.certificates[0]?.clientCertificates?.mode, 'optional');
    const pagedPolicy = paged.hosts[0]?.paths[0]?.authorization?.clientCertificate;
    assert.equal(pagedPolicy?.errorPage, 'https://help.test/mtls');
    assert.equal(pagedPolicy?.anonymous, undefined);

    // off: no check at all.
    const off = translateIngresses(
      input([mtls({ 'nginx.ingress.kubernetes.io/auth-tls-verify-client': 'off' })], { secrets }),
    );
    assert.equal(off.certificates[0]?.clientCertificates, undefined);
    assert.equal(off.hosts[0]?.paths[0]?.unavailable, null);

    // With another auth-type, `on` cannot be carried by the paths: closed, never open.
    const both = translateIngresses(
      input([mtls({ 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'users' })], { secrets }),
    );
    assert.match(both.hosts[0]?.paths[0]?.unavailable ?? '', /cannot be combined with auth-type/);
  });
});
