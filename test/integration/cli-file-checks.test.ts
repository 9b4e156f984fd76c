import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasOpenssl, selfSigned } from '../helpers/certs.ts';
import { MAIN_JS } from '../helpers/tollgate.ts';

/**
 * `validate` and `start` read every file the config names with the same checks
 * (docs/configuration.md "What validate checks"): for each broken file both refuse, print the same
 * problem, and name the file and the line of the key that names it.
 */

interface Outcome {
  code: number | null;
  stderr: string;
}

function run(command: 'validate' | 'start', config: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN_JS, command, '--config', config], {
      env: { ...process.env, TOLLGATE_CONFIG: '', TOLLGATE_MASTERKEY: '' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    // A start that got past the checks would serve: it must never get that far here.
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

const tls = hasOpenssl() ? { a: selfSigned('a.test'), b: selfSigned('b.test') } : null;
const JWKS = JSON.stringify({
  keys: [{ kty: 'oct', k: 'c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA', kid: 'one', alg: 'HS256' }],
});

interface BrokenCase {
  name: string;
  /** Extra main.yaml lines (after the listeners). */
  main?: string[];
  /** The authorization of the one route (default none). */
  authorization?: string;
  /** The route's servers (default one plain server) and extra lines of its path. */
  servers?: string;
  pathLines?: string[];
  /** Files written beside main.yaml. */
  files?: Record<string, string | Buffer>;
  /** The issue both commands print: `main.yaml:LINE:` or `upstreams.yaml:LINE:` plus the rest. */
  expected: RegExp;
  /** Text that must appear in neither command's output (a credential inside a broken file). */
  absent?: string;
  needsTls?: boolean;
}

const LISTENERS = [
  'proxy_address_http: "127.0.0.1:0"',
  'config_address: "127.0.0.1:0"',
  'admin_address: "127.0.0.1:0"',
];
const TLS_LINES = ['proxy_address_tls: "127.0.0.1:0"', 'tls_certificate: cert.pem', 'tls_key_file: key.pem'];
const JWT_ISSUER = '{ type: jwt, issuer: "https://idp.test", audience: tollgate, jwks_file: keys.json }';

const CASES: BrokenCase[] = [
  {
    name: 'revoked_tokens_file missing',
    main: ['revoked_tokens_file: revoked.txt'],
    expected: /main\.yaml:4:22: revoked_tokens_file: cannot read \S+\/revoked\.txt: no such file/,
  },
  {
    name: 'revoked_tokens_file a directory',
    main: ['revoked_tokens_file: revoked'],
    files: { 'revoked/.keep': '' },
    expected: /main\.yaml:4:22: revoked_tokens_file: cannot read \S+\/revoked: it is a directory/,
  },
  {
    name: 'TLS key that is not a key',
    main: TLS_LINES,
    files: { 'cert.pem': tls?.a.cert ?? '', 'key.pem': 'not a key\n' },
    expected: /main\.yaml:6:15: tls_key_file: \S+\/key\.pem holds no PEM private key that can be parsed/,
    needsTls: true,
  },
  {
    name: 'TLS certificate that is not a certificate',
    main: TLS_LINES,
    files: {
      'cert.pem': '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n',
      'key.pem': tls?.a.key ?? '',
    },
    expected: /main\.yaml:5:18: tls_certificate: \S+\/cert\.pem holds no PEM certificate that can be parsed/,
    needsTls: true,
  },
  {
    name: 'TLS key of another certificate',
    main: TLS_LINES,
    files: { 'cert.pem': tls?.a.cert ?? '', 'key.pem': tls?.b.key ?? '' },
    expected:
      /main\.yaml:6:15: tls_key_file: the private key in \S+\/key\.pem does not match the certificate in \S+\/cert\.pem/,
    needsTls: true,
  },
  {
    name: 'TLS key file missing',
    main: TLS_LINES,
    files: { 'cert.pem': tls?.a.cert ?? '' },
    expected: /main\.yaml:6:15: tls_key_file: cannot read \S+\/key\.pem: no such file/,
    needsTls: true,
  },
  {
    name: 'tls_certificates: the second pair a key of another certificate',
    main: [
      'proxy_address_tls: "127.0.0.1:0"',
      'tls_certificates:',
      '  - {certificate: cert.pem, key: key.pem}',
      '  - certificate: cert.pem',
      '    key: other.pem',
    ],
    files: { 'cert.pem': tls?.a.cert ?? '', 'key.pem': tls?.a.key ?? '', 'other.pem': tls?.b.key ?? '' },
    expected:
      /main\.yaml:8:10: tls_certificates\[1\]\.key: the private key in \S+\/other\.pem does not match the certificate in \S+\/cert\.pem/,
    needsTls: true,
  },
  {
    name: 'tls_client_certificates: CA bundle missing',
    main: [...TLS_LINES, 'tls_client_certificates:', '  ca_file: clients-ca.pem'],
    files: { 'cert.pem': tls?.a.cert ?? '', 'key.pem': tls?.a.key ?? '' },
    expected:
      /main\.yaml:8:12: tls_client_certificates\.ca_file: cannot read \S+\/clients-ca\.pem: no such file/,
    needsTls: true,
  },
  {
    name: 'tls_certificates[].client_certificates: a CRL that is no CRL',
    main: [
      'proxy_address_tls: "127.0.0.1:0"',
      'tls_certificates:',
      '  - certificate: cert.pem',
      '    key: key.pem',
      '    client_certificates: { ca_file: ca.pem, mode: optional, crl_file: crl.pem }',
    ],
    files: {
      'cert.pem': tls?.a.cert ?? '',
      'key.pem': tls?.a.key ?? '',
      'ca.pem': tls?.b.cert ?? '',
      'crl.pem': 'not a CRL\n',
    },
    expected:
      /main\.yaml:8:71: tls_certificates\[0\]\.client_certificates\.crl_file: \S+\/crl\.pem holds no CRL OpenSSL accepts/,
    needsTls: true,
  },
  {
    name: 'masterkey_file missing',
    main: ['masterkey_file: masterkey'],
    expected: /main\.yaml:4:17: masterkey_file: cannot read \S+\/masterkey: no such file/,
  },
  {
    name: 'masterkey_file empty',
    main: ['masterkey_file: masterkey'],
    files: { masterkey: '\n' },
    expected: /main\.yaml:4:17: masterkey_file: \S+\/masterkey is empty/,
  },
  {
    name: 'upstream_ca_file missing',
    main: ['upstream_ca_file: upstream-ca.pem'],
    expected: /main\.yaml:4:19: upstream_ca_file: cannot read \S+\/upstream-ca\.pem: no such file/,
  },
  {
    name: 'upstream_ca_file without a certificate',
    main: ['upstream_ca_file: upstream-ca.pem'],
    files: { 'upstream-ca.pem': 'not a bundle\n' },
    expected: /main\.yaml:4:19: upstream_ca_file: \S+\/upstream-ca\.pem holds no PEM certificate/,
  },
  {
    // A config that talks to the API (ingress_class): start reads the kubeconfig before serving.
    name: 'kubernetes.kubeconfig missing',
    main: ['kubernetes:', '  ingress_class: tollgate', '  kubeconfig: /nonexistent/kubeconfig'],
    expected: /main\.yaml:6:15: kubernetes\.kubeconfig: kubeconfig \/nonexistent\/kubeconfig does not exist/,
  },
  {
    name: 'kubernetes.kubeconfig not YAML (its content never echoed)',
    main: ['kubernetes:', '  upstreams_configmap: routes', '  kubeconfig: kubeconfig'],
    files: { kubeconfig: 'users:\n- name: me\n  user: {token: sekret-token-value\n' },
    expected: /main\.yaml:6:15: kubernetes\.kubeconfig: kubeconfig \S+\/kubeconfig is not YAML \(line \d+/,
    absent: 'sekret-token-value',
  },
  {
    name: 'kubernetes.kubeconfig whose current context names no cluster',
    main: ['kubernetes:', '  ingress_class: tollgate', '  kubeconfig: kubeconfig'],
    files: {
      kubeconfig: [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: real, cluster: {server: "https://127.0.0.1:6443"}}]',
        'contexts: [{name: here, context: {cluster: gone, user: me}}]',
        'users: [{name: me, user: {token: sekret-token-value}}]',
        'current-context: here',
        '',
      ].join('\n'),
    },
    expected:
      /main\.yaml:6:15: kubernetes\.kubeconfig: kubeconfig \S+\/kubeconfig: the current context names no cluster/,
    absent: 'sekret-token-value',
  },
  {
    name: 'upstream_tls ca_file missing',
    servers: '"https://127.0.0.1:3443"',
    pathLines: ['upstream_tls: { ca_file: path-ca.pem }'],
    expected: /upstreams\.yaml:6:\d+: \S+upstream_tls\.ca_file: cannot read \S+\/path-ca\.pem: no such file/,
  },
  {
    name: 'upstream_tls client key of another certificate',
    servers: '"https://127.0.0.1:3443"',
    pathLines: ['upstream_tls: { certificate: client.pem, key: client.key }'],
    files: { 'client.pem': tls?.a.cert ?? '', 'client.key': tls?.b.key ?? '' },
    expected:
      /upstreams\.yaml:6:\d+: \S+upstream_tls\.key: the private key in \S+\/client\.key does not match the certificate in \S+\/client\.pem/,
    needsTls: true,
  },
  {
    name: 'jwks_file missing',
    authorization: JWT_ISSUER,
    expected: /upstreams\.yaml:6:\d+: \S+jwks_file: cannot read \S+\/keys\.json: no such file/,
  },
  {
    name: 'jwks_file not JSON',
    authorization: JWT_ISSUER,
    files: { 'keys.json': '{ nope' },
    expected: /upstreams\.yaml:6:\d+: \S+jwks_file: \S+\/keys\.json is not JSON/,
  },
  {
    name: 'jwks_file not a key set',
    authorization: JWT_ISSUER,
    files: { 'keys.json': '{"kty": "oct"}' },
    expected: /upstreams\.yaml:6:\d+: \S+jwks_file: \S+\/keys\.json is not a JSON Web Key Set/,
  },
];

describe('validate and start refuse the same broken files alike', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'tollgate-file-checks-'));
  });
  after(() => rm(root, { recursive: true, force: true }));

  for (const [index, broken] of CASES.entries()) {
    it(broken.name, { skip: broken.needsTls && tls === null ? 'no openssl' : false }, async () => {
      const dir = join(root, String(index));
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'main.yaml'), [...LISTENERS, ...(broken.main ?? []), ''].join('\n'));
      await writeFile(
        join(dir, 'upstreams.yaml'),
        [
          'upstreams:',
          '  app.test:',
          '    paths:',
          '      "/":',
          `        servers: [${broken.servers ?? '"127.0.0.1:3000"'}]`,
          ...(broken.authorization ? [`        authorization: ${broken.authorization}`] : []),
          ...(broken.pathLines ?? []).map((line) => `        ${line}`),
          '',
        ].join('\n'),
      );
      for (const [name, content] of Object.entries(broken.files ?? {})) {
        await mkdir(join(dir, name, '..'), { recursive: true });
        await writeFile(join(dir, name), content);
      }
      const config = join(dir, 'main.yaml');
      const [validated, started] = await Promise.all([run('validate', config), run('start', config)]);
      assert.equal(validated.code, 1, validated.stderr);
      assert.equal(started.code, 1, started.stderr);
      assert.match(validated.stderr, broken.expected);
      if (broken.absent !== undefined) assert.ok(!validated.stderr.includes(broken.absent), validated.stderr);
      // The same words from both: one code path (config/file-checks) decides.
      assert.equal(started.stderr, validated.stderr);
    });
  }

  it('broken files are reported in the same pass as structural errors of both files', {
    skip: tls === null,
  }, async () => {
    const dir = join(root, 'one-pass');
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, 'main.yaml'),
      [
        ...LISTENERS,
        ...TLS_LINES,
        'upstream_ca_file: upstream-ca.pem',
        'log_levle: info',
        'kubernetes:',
        '  ingress_class: tollgate',
        '  kubeconfig: /nonexistent/kubeconfig',
        'masterkey_file: missing-masterkey',
        '',
      ].join('\n'),
    );
    await writeFile(
      join(dir, 'upstreams.yaml'),
      [
        'upstreams:',
        '  app.test:',
        '    paths:',
        '      "/":',
        '        servers: []',
        '      "/tls":',
        '        servers: ["https://127.0.0.1:3443"]',
        '        upstream_tls: { ca_file: path-ca.pem }',
        '',
      ].join('\n'),
    );
    await writeFile(join(dir, 'cert.pem'), tls?.a.cert ?? '');
    await writeFile(join(dir, 'key.pem'), tls?.b.key ?? '');
    await writeFile(join(dir, 'upstream-ca.pem'), 'not a bundle\n');
    await writeFile(join(dir, 'path-ca.pem'), 'not a bundle either\n');
    const config = join(dir, 'main.yaml');
    const [validated, started] = await Promise.all([run('validate', config), run('start', config)]);
    assert.equal(validated.code, 1, validated.stderr);
    for (const expected of [
      /main\.yaml:6:15: tls_key_file: the private key in \S+\/key\.pem does not match/,
      /main\.yaml:7:19: upstream_ca_file: \S+\/upstream-ca\.pem holds no PEM certificate/,
      /main\.yaml:8:1: log_levle:/,
      /main\.yaml:11:15: kubernetes\.kubeconfig: kubeconfig \/nonexistent\/kubeconfig does not exist/,
      /main\.yaml:12:17: masterkey_file: cannot read \S+\/missing-masterkey: no such file/,
      /upstreams\.yaml:5:\d+: upstreams\.app\.test\.paths\.\/\.servers:/,
      /upstreams\.yaml:8:\d+: \S+upstream_tls\.ca_file: \S+\/path-ca\.pem holds no PEM certificate/,
    ]) {
      assert.match(validated.stderr, expected);
    }
    assert.equal(started.code, 1, started.stderr);
    assert.equal(started.stderr, validated.stderr);
  });

  it('a config whose files are all usable validates', { skip: tls === null }, async () => {
    const dir = join(root, 'good');
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, 'main.yaml'),
      [...LISTENERS, ...TLS_LINES, 'revoked_tokens_file: revoked.txt', 'masterkey_file: masterkey', ''].join(
        '\n',
      ),
    );
    await writeFile(
      join(dir, 'upstreams.yaml'),
      `upstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["127.0.0.1:3000"]\n        authorization: ${JWT_ISSUER}\n`,
    );
    await writeFile(join(dir, 'cert.pem'), tls?.a.cert ?? '');
    await writeFile(join(dir, 'key.pem'), tls?.a.key ?? '');
    await writeFile(join(dir, 'revoked.txt'), '# none yet\n');
    await writeFile(join(dir, 'masterkey'), 'a-masterkey-of-enough-length\n');
    await writeFile(join(dir, 'keys.json'), JWKS);
    const validated = await run('validate', join(dir, 'main.yaml'));
    assert.equal(validated.code, 0, validated.stderr);
  });
});
