import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import type { V1Ingress, V1IngressClass, V1Secret, V1Service } from '@kubernetes/client-node';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import type { AuthorizationConfig } from '../../src/config/types.ts';
import { readAuthorization } from '../../src/policy/authorization.ts';
import type { PolicyContext } from '../../src/policy/context.ts';
import { DEFAULT_FORWARD_TIMEOUT_SECONDS } from '../../src/policy/forward.ts';
import { PlainReader } from '../../src/policy/plain-reader.ts';
import {
  ALLOW_BESIDE,
  buildPolicy,
  type TollgatePolicy,
} from '../../src/sources/kubernetes/gateway/policy-keys.ts';
import { readAnnotations } from '../../src/sources/kubernetes/ingress/annotations.ts';
import { type IngressInput, translateIngresses } from '../../src/sources/kubernetes/ingress/translate.ts';
import { problems, valid } from '../fixtures/config/problems.ts';
import { selfSigned } from '../helpers/certs.ts';
import { ingress, ingressClass, service } from '../helpers/fake-kube-api.ts';

/**
 * One policy model (docs/architecture.md): upstreams.yaml, an Ingress's auth annotations and a
 * TollgatePolicy's spec.authorization are read by the one reader (policy/authorization), so the same
 * intent gives the same domain authorization, and each rule that used to be written per source holds
 * in all three.
 */

const NS = 'apps';
const HASH = 'scrypt$ln=14,r=8,p=1$Ni_fL65Z-Nbq65u32SwldA$5uqHnf-Gu-BuQMnIiD453xtTBfimlJdbhChfWqU4mqU';
const AUTH_URL = 'https://auth.example.com/check';
const json = <T>(model: { toJSON(): unknown }) => structuredClone(model.toJSON()) as T;
const base64 = (text: string) => Buffer.from(text).toString('base64');
const SECRETS = new Map<string, V1Secret>([
  [`${NS}/users`, { metadata: { name: 'users', namespace: NS }, data: { auth: base64(`alice:${HASH}\n`) } }],
  [`${NS}/keys`, { metadata: { name: 'keys', namespace: NS }, data: { keys: base64('ci:key-of-ci\n') } }],
]);

/** upstreams.yaml's global authorization for `lines`. */
function fromFile(...lines: string[]): AuthorizationConfig | null {
  const text = `authorization:\n${lines.map((line) => `  ${line}\n`).join('')}upstreams:\n  DEFAULT:\n    paths:\n      /:\n        servers: ["127.0.0.1:3000"]\n`;
  return valid(parseUpstreamsConfig(text, 'upstreams.yaml')).authorization;
}

function ingressInput(annotations: Record<string, string>, extra: Partial<IngressInput> = {}): IngressInput {
  const web = json<V1Service>(
    service({ name: 'web', namespace: NS, ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
  );
  return {
    className: 'tollgate',
    classes: [json<V1IngressClass>(ingressClass())],
    ingresses: [
      json<V1Ingress>(
        ingress({
          name: 'a',
          namespace: NS,
          annotations,
          rules: [{ host: 'a.test', paths: [{ service: 'web', port: 80 }] }],
        }),
      ),
    ],
    services: new Map([[`${NS}/web`, web]]),
    secrets: SECRETS,
    base: { hosts: [] },
    ...extra,
  };
}

/** The path an Ingress with `annotations` serves, and what it was told. */
function fromIngress(annotations: Record<string, string>, extra: Partial<IngressInput> = {}) {
  const result = translateIngresses(ingressInput(annotations, extra));
  const path = result.hosts[0]?.paths[0];
  return { path, report: result.reports.get(`${NS}/a`) };
}

function fromPolicy(spec: Record<string, unknown>, oidcProviders: string[] = []) {
  const policy: TollgatePolicy = {
    metadata: { name: 'p', namespace: NS },
    spec: { targetRefs: [], ...spec },
  };
  return buildPolicy(policy, { secrets: SECRETS, grants: [], oidcProviders });
}

describe('one policy model: the three sources give the same domain authorization', () => {
  it('basic users: inline in upstreams.yaml, from a Secret for an Ingress and a TollgatePolicy', () => {
    const file = fromFile('type: basic', 'users:', `  - { username: alice, password_hash: "${HASH}" }`);
    const annotated = fromIngress({ 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'users' });
    const policy = fromPolicy({ authorization: { type: 'basic', basic: { secretRef: { name: 'users' } } } });
    const expected: AuthorizationConfig = {
      type: 'basic',
      users: [{ username: 'alice', password: null, passwordHash: HASH }],
      keys: [],
    };
    assert.deepEqual(file, expected);
    assert.deepEqual(annotated.path?.authorization, expected);
    assert.equal(policy.broken, null);
    assert.deepEqual(policy.patch.authorization, expected);
  });

  it('API keys: inline in upstreams.yaml, from a Secret for an Ingress and a TollgatePolicy', () => {
    const expected: AuthorizationConfig = {
      type: 'apikey',
      users: [],
      keys: [{ name: 'ci', key: 'key-of-ci' }],
    };
    assert.deepEqual(fromFile('type: apikey', 'keys:', '  - { name: ci, key: key-of-ci }'), expected);
    assert.deepEqual(
      fromIngress({ 'tollgate.io/auth-type': 'apikey', 'tollgate.io/auth-secret': 'keys' }).path
        ?.authorization,
      expected,
    );
    assert.deepEqual(
      fromPolicy({ authorization: { type: 'apikey', apikey: { secretRef: { name: 'keys' } } } }).patch
        .authorization,
      expected,
    );
  });

  it('forward auth, with the one timeout default (5 s) and the default request headers', () => {
    const file = fromFile('type: forward', `url: ${AUTH_URL}`);
    const annotated = fromIngress({ 'nginx.ingress.kubernetes.io/auth-url': AUTH_URL });
    const policy = fromPolicy({ authorization: { type: 'forward', url: AUTH_URL } });
    const expected: AuthorizationConfig = {
      type: 'forward',
      users: [],
      keys: [],
      forward: {
        url: AUTH_URL,
        authRequestHeaders: ['cookie', 'authorization'],
        authResponseHeaders: [],
        subjectHeader: null,
        timeoutMs: DEFAULT_FORWARD_TIMEOUT_SECONDS * 1000,
        signinUrl: null,
      },
    };
    assert.equal(DEFAULT_FORWARD_TIMEOUT_SECONDS, 5);
    assert.deepEqual(file, expected);
    assert.deepEqual(annotated.path?.authorization, expected);
    assert.deepEqual(policy.patch.authorization, expected);
  });

  it("jwt: Tollgate's own tokens", () => {
    const expected: AuthorizationConfig = { type: 'jwt', users: [], keys: [] };
    assert.deepEqual(fromFile('type: jwt'), expected);
    assert.deepEqual(fromIngress({ 'tollgate.io/auth-type': 'jwt' }).path?.authorization, expected);
    assert.deepEqual(fromPolicy({ authorization: { type: 'jwt' } }).patch.authorization, expected);
  });

  it('the Secret is parsed by one reader: a bad htpasswd line is the same problem for an Ingress and a policy', () => {
    const bad = new Map(SECRETS);
    bad.set(`${NS}/users`, {
      metadata: { name: 'users', namespace: NS },
      data: { auth: base64('alice:plaintext\n') },
    });
    const annotated = fromIngress(
      { 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'users' },
      { secrets: bad },
    );
    const policy = buildPolicy(
      {
        metadata: { name: 'p', namespace: NS },
        spec: { targetRefs: [], authorization: { type: 'basic', basic: { secretRef: { name: 'users' } } } },
      },
      { secrets: bad, grants: [] },
    );
    const problem = "line 1: the password of 'alice' is not a bcrypt ($2y$), scrypt, $apr1$ or {SHA} hash";
    assert.match(
      annotated.report?.problems.join() ?? '',
      new RegExp(`auth Secret apps/users: ${escapeRegex(problem)}`),
    );
    assert.match(policy.broken ?? '', new RegExp(`Secret apps/users: ${escapeRegex(problem)}`));
    assert.match(String(annotated.path?.unavailable), /plain text is refused/);
  });
});

describe('one policy model: a weak hash in a Secret is a warning from every Kubernetes source', () => {
  it("an Ingress's WeakPasswordHash notice; a TollgatePolicy's warning (before: not reported at all)", () => {
    const sha = `{SHA}${createHash('sha1').update('pw').digest('base64')}`;
    const secrets = new Map(SECRETS);
    secrets.set(`${NS}/users`, {
      metadata: { name: 'users', namespace: NS },
      data: { auth: base64(`carol:${sha}\n`) },
    });
    const weak = "{SHA} hashes are weak: rehash with 'htpasswd -B' (bcrypt) or 'tollgate hash-password'";
    const annotated = fromIngress(
      { 'tollgate.io/auth-type': 'basic', 'tollgate.io/auth-secret': 'users' },
      { secrets },
    );
    assert.deepEqual(annotated.report?.notices, [
      { reason: 'WeakPasswordHash', message: `auth Secret apps/users: ${weak}` },
    ]);
    const policy = buildPolicy(
      {
        metadata: { name: 'p', namespace: NS },
        spec: { targetRefs: [], authorization: { type: 'basic', basic: { secretRef: { name: 'users' } } } },
      },
      { secrets, grants: [] },
    );
    assert.equal(policy.broken, null);
    assert.deepEqual(policy.warnings, [`spec.authorization.basic.secretRef: Secret apps/users: ${weak}`]);
    assert.deepEqual(policy.patch.authorization, annotated.path?.authorization);
  });
});

describe('one policy model: each rule holds for every source', () => {
  const kubernetes: PolicyContext = { kubernetes: { secret: () => ({ problem: 'no Secrets here' }) } };
  const read = (value: unknown, context: PolicyContext = kubernetes) => {
    const r = new PlainReader();
    const result = readAuthorization(r, r.root('authorization', value), context);
    return { result, issues: r.issues.map((issue) => `${issue.path}: ${issue.message}`) };
  };

  it('the realm: one check, one message, for an annotation and a policy', () => {
    const message = 'must be 1-64 printable characters without " or \\';
    assert.deepEqual(read({ type: 'jwt', realm: 'a"b' }).issues, [`authorization.realm: ${message}`]);
    assert.equal(
      readAnnotations({ 'tollgate.io/auth-realm': 'a"b' }).authProblems[0],
      `tollgate.io/auth-realm: ${message}`,
    );
    assert.match(
      fromPolicy({ authorization: { type: 'jwt', realm: 'x'.repeat(65) } }).broken ?? '',
      /1-64 printable/,
    );
    assert.equal(read({ type: 'jwt', realm: 'Staff only' }).result?.realm, 'Staff only');
  });

  it("a policy's forward url is checked as a URL before the auth-url guard (it used to reach the guard unchecked)", () => {
    // Before: new URL() threw inside the guard ("the policy cannot be read: Invalid URL"), and an
    // ftp:// URL was judged by its host alone.
    assert.deepEqual(read({ type: 'forward', url: 'auth.example.com/check' }).issues, [
      'authorization.url: must be an absolute http:// or https:// URL',
    ]);
    assert.deepEqual(read({ type: 'forward', url: 'ftp://127.0.0.1/' }).issues, [
      'authorization.url: must be an http:// or https:// URL, not ftp:',
    ]);
    assert.match(
      fromPolicy({ authorization: { type: 'forward', url: 'auth.example.com/check' } }).broken ?? '',
      /^spec\.authorization\.url: must be an absolute http/,
    );
    // A valid URL to loopback is still refused by the guard, in every Kubernetes source.
    assert.match(
      read({ type: 'forward', url: 'http://127.0.0.1:9/' }).issues.join(),
      /loopback address 127\.0\.0\.1/,
    );
    // upstreams.yaml's url is the operator's: not guarded.
    assert.equal(read({ type: 'forward', url: 'http://127.0.0.1:9/' }, {}).issues.length, 0);
  });

  it("a policy's subject_header is a header name Tollgate lets a config name (it used to be taken as written)", () => {
    const policy = fromPolicy({
      authorization: { type: 'forward', url: AUTH_URL, subject_header: 'X-Forwarded-User' },
    });
    assert.match(policy.broken ?? '', /^spec\.authorization\.subject_header: /);
    assert.equal(policy.patch.authorization, undefined);
    const ok = fromPolicy({
      authorization: { type: 'forward', url: AUTH_URL, subject_header: 'X-Auth-User' },
    });
    assert.equal(ok.patch.authorization?.forward?.subjectHeader, 'x-auth-user');
  });

  it("an Ingress's auth-oidc-provider must be one of main.yaml's oidc_providers: else its paths are closed", () => {
    const annotations = { 'tollgate.io/auth-type': 'oidc', 'tollgate.io/auth-oidc-provider': 'nobody' };
    const refused = fromIngress(annotations, { oidcProviders: ['corp'] });
    const message = "auth-oidc-provider unknown OpenID provider 'nobody' (main.yaml defines corp)";
    assert.ok(
      refused.report?.problems.some((problem) => problem.endsWith(message)),
      String(refused.report?.problems),
    );
    assert.match(String(refused.path?.unavailable), /unknown OpenID provider 'nobody'/);
    assert.equal(refused.path?.authorization, null);
    const known = fromIngress(
      { ...annotations, 'tollgate.io/auth-oidc-provider': 'corp' },
      { oidcProviders: ['corp'] },
    );
    assert.equal(known.path?.unavailable, null);
    assert.deepEqual(known.path?.authorization?.oidc, { provider: 'corp' });
    // The policy says the same of the same name.
    assert.match(
      fromPolicy({ authorization: { type: 'oidc', provider: 'nobody' } }, ['corp']).broken ?? '',
      /unknown OpenID provider 'nobody' \(main\.yaml defines corp\)/,
    );
  });

  it('allow sits inside authorization; spec.allow beside it is read the same, with a warning naming the place', () => {
    const auth = { type: 'basic', basic: { secretRef: { name: 'users' } } };
    const inside = fromPolicy({ authorization: { ...auth, allow: { subjects: ['bob'] } } });
    const beside = fromPolicy({ authorization: auth, allow: { subjects: ['bob'] } });
    assert.equal(inside.broken, null);
    assert.deepEqual(inside.warnings ?? [], []);
    assert.deepEqual(inside.patch.authorization?.allow?.subjects, ['bob']);
    assert.deepEqual(beside.patch, inside.patch);
    assert.deepEqual(beside.warnings, [ALLOW_BESIDE]);
    assert.match(ALLOW_BESIDE, /spec\.authorization\.allow/);
    const both = fromPolicy({
      authorization: { ...auth, allow: { subjects: ['bob'] } },
      allow: { subjects: ['eve'] },
    });
    assert.match(both.broken ?? '', /both set: keep spec\.authorization\.allow/);
    // The rules are the file's: basic knows only the subject.
    assert.match(
      fromPolicy({ authorization: { ...auth, allow: { groups: ['admins'] } } }).broken ?? '',
      /^spec\.authorization\.allow\.groups: basic knows only the subject/,
    );
  });

  it("an Ingress's allow-* annotations are read by the one allow reader: a client certificate knows only the subject", () => {
    const ca = selfSigned('Clients CA');
    const serving = selfSigned('a.test');
    const secrets = new Map(SECRETS);
    secrets.set(`${NS}/clients-ca`, {
      metadata: { name: 'clients-ca', namespace: NS },
      data: { 'ca.crt': base64(ca.cert.toString()) },
    });
    secrets.set(`${NS}/a-tls`, {
      metadata: { name: 'a-tls', namespace: NS },
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': base64(serving.cert.toString()), 'tls.key': base64(serving.key.toString()) },
    });
    const mtls = (allow: Record<string, string>) => {
      const built = ingressInput(
        {
          'nginx.ingress.kubernetes.io/auth-tls-secret': 'clients-ca',
          'nginx.ingress.kubernetes.io/auth-tls-match-cn': 'CN=(a|b)',
          ...allow,
        },
        { secrets },
      );
      const [only] = built.ingresses as V1Ingress[];
      (only as V1Ingress).spec = { ...only?.spec, tls: [{ hosts: ['a.test'], secretName: 'a-tls' }] };
      return translateIngresses(built).hosts[0]?.paths[0];
    };
    // Before: the rule was kept and nobody could ever pass it (a certificate's identity has no email).
    const emails = mtls({ 'tollgate.io/allow-emails': 'boss@example.com' });
    assert.match(
      String(emails?.unavailable),
      /tollgate\.io\/allow-emails: client_certificate knows only the subject/,
    );
    const subjects = mtls({ 'tollgate.io/allow-subjects': 'spiffe://cluster.local/ns/a/sa/b' });
    assert.equal(subjects?.unavailable, null);
    assert.deepEqual(subjects?.authorization?.allow?.subjects, ['spiffe://cluster.local/ns/a/sa/b']);
    assert.equal(subjects?.authorization?.allow?.commonNames, '(a|b)');
  });

  it('a Kubernetes object names a Secret, never inline credentials or a file of the pod', () => {
    assert.match(read({ type: 'basic', creds: 'alice:pw' }).issues.join(), /read from a Secret here/);
    assert.match(
      read({
        type: 'jwt',
        issuer: 'https://idp.test',
        audience: 'a',
        jwks_file: '/etc/passwd',
      }).issues.join(),
      /jwks_file: names a file of the Tollgate pod/,
    );
  });

  it('upstreams.yaml keeps its file:line:column messages through the plain reader', () => {
    const text = `authorization:\n  type: forward\n  url: ${AUTH_URL}\n  timeout_seconds: 0\n  subject_header: X-Forwarded-User\nupstreams:\n  DEFAULT:\n    paths:\n      /:\n        servers: ["127.0.0.1:3000"]\n`;
    assert.deepEqual(
      problems(parseUpstreamsConfig(text, 'upstreams.yaml')),
      [
        'upstreams.yaml:4:20: authorization.timeout_seconds: 0 is out of range (must be > 0 and <= 60)',
        "upstreams.yaml:5:19: authorization.subject_header: 'X-Forwarded-User' is written or guarded by Tollgate itself and cannot be configured",
      ].toSorted(),
    );
  });
});

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
