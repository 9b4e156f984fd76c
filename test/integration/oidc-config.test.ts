import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAIN_JS } from '../helpers/tollgate.ts';

/**
 * OpenID and allow-rule config that cannot work is refused by `validate` and by `start` alike, with
 * one line naming the file and the line (docs/authentication.md#openid-connect, #who-may-pass).
 */

function run(
  command: 'validate' | 'start',
  config: string,
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN_JS, command, '--config', config], {
      env: { ...process.env, TOLLGATE_CONFIG: '', TOLLGATE_MASTERKEY: '' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

const LISTENERS = [
  'proxy_address_http: "127.0.0.1:0"',
  'config_address: "127.0.0.1:0"',
  'admin_address: "127.0.0.1:0"',
];
const PROVIDER = [
  'oidc_providers:',
  '  corp:',
  '    issuer: https://login.example.com',
  '    client_id: tollgate',
  '    client_secret_file: client-secret',
];
const GOOD_FILES = {
  'client-secret': 'a-client-secret\n',
  secrets: 'a-session-secret-that-is-long-enough-0123456789\n',
};
const OIDC_ROUTE = '{ type: oidc, provider: corp }';

interface BrokenCase {
  name: string;
  main: string[];
  authorization: string;
  files?: Record<string, string>;
  host?: string;
  expected: RegExp;
}

const CASES: BrokenCase[] = [
  {
    name: 'a provider without client_secret_file',
    main: [...PROVIDER.slice(0, 4), 'session_secret_file: secrets'],
    authorization: OIDC_ROUTE,
    files: GOOD_FILES,
    expected: /main\.yaml:5:3: oidc_providers\.corp: missing 'client_secret_file'/,
  },
  {
    name: 'an unreadable session secret file',
    main: [...PROVIDER, 'session_secret_file: nowhere'],
    authorization: OIDC_ROUTE,
    files: { 'client-secret': 'x\n' },
    expected: /main\.yaml:9:22: session_secret_file: cannot read \S+\/nowhere: no such file/,
  },
  {
    name: 'a session secret shorter than 32 bytes',
    main: [...PROVIDER, 'session_secret_file: secrets'],
    authorization: OIDC_ROUTE,
    files: { 'client-secret': 'x\n', secrets: 'long-enough-secret-0123456789-abcdefgh\nshort\n' },
    expected: /main\.yaml:9:22: session_secret_file: secret 2 in \S+\/secrets is shorter than 32 bytes/,
  },
  {
    name: 'an empty client secret file',
    main: [...PROVIDER, 'session_secret_file: secrets'],
    authorization: OIDC_ROUTE,
    files: { ...GOOD_FILES, 'client-secret': '\n' },
    expected: /main\.yaml:8:25: oidc_providers\.corp\.client_secret_file: \S+\/client-secret is empty/,
  },
  {
    name: 'providers without session_secret_file',
    main: PROVIDER,
    authorization: OIDC_ROUTE,
    files: GOOD_FILES,
    expected: /main\.yaml:4:1: oidc_providers: needs session_secret_file as well/,
  },
  {
    name: 'an http issuer off loopback',
    main: [
      ...PROVIDER.slice(0, 2),
      '    issuer: http://login.example.com',
      ...PROVIDER.slice(3),
      'session_secret_file: secrets',
    ],
    authorization: OIDC_ROUTE,
    files: GOOD_FILES,
    expected: /main\.yaml:6:13: oidc_providers\.corp\.issuer: must be https:\/\//,
  },
  {
    name: 'an unknown provider name',
    main: [...PROVIDER, 'session_secret_file: secrets'],
    authorization: '{ type: oidc, provider: crop }',
    files: GOOD_FILES,
    expected:
      /upstreams\.yaml:5:\d+: authorization\.provider: unknown OpenID provider 'crop' \(main\.yaml defines corp\)/,
  },
  {
    name: 'an oidc route under DEFAULT without redirect_url',
    main: [...PROVIDER, 'session_secret_file: secrets'],
    authorization: OIDC_ROUTE,
    files: GOOD_FILES,
    host: 'DEFAULT',
    expected:
      /upstreams\.yaml:5:\d+: authorization\.provider: a route under DEFAULT needs oidc_providers\.corp\.redirect_url/,
  },
  {
    name: 'require_verified_email that is not a boolean',
    main: [...PROVIDER, '    require_verified_email: "yes"', 'session_secret_file: secrets'],
    authorization: OIDC_ROUTE,
    files: GOOD_FILES,
    expected: /main\.yaml:9:29: oidc_providers\.corp\.require_verified_email: expected true or false/,
  },
  {
    name: 'a ca_file that holds no certificate',
    main: [...PROVIDER, '    ca_file: client-secret', 'session_secret_file: secrets'],
    authorization: OIDC_ROUTE,
    files: GOOD_FILES,
    expected: /main\.yaml:9:14: oidc_providers\.corp\.ca_file: \S+\/client-secret holds no PEM certificate/,
  },
  {
    name: 'a cookie_domain that is not a domain of two labels',
    main: [...PROVIDER, '    cookie_domain: .localhost', 'session_secret_file: secrets'],
    authorization: OIDC_ROUTE,
    files: GOOD_FILES,
    expected: /main\.yaml:9:20: oidc_providers\.corp\.cookie_domain: '\.localhost' is not a domain name/,
  },
  {
    name: 'an allow rule on groups for a basic route',
    main: [],
    authorization: '{ type: basic, creds: "alice:secret", allow: { groups: [admins] } }',
    expected: /upstreams\.yaml:5:\d+: \S+authorization\.allow\.groups: basic knows only the subject/,
  },
  {
    name: 'an allow email with two @',
    main: [],
    authorization: '{ type: jwt, allow: { emails: ["a@b.com@evil.com"] } }',
    expected: /upstreams\.yaml:5:\d+: \S+allow\.emails\[0\]: 'a@b\.com@evil\.com' is not an email address/,
  },
];

describe('OpenID and allow-rule config: validate and start refuse alike, at the line', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'tollgate-oidc-config-'));
  });
  after(() => rm(root, { recursive: true, force: true }));

  for (const [index, broken] of CASES.entries()) {
    it(broken.name, async () => {
      const dir = join(root, String(index));
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'main.yaml'), [...LISTENERS, ...broken.main, ''].join('\n'));
      await writeFile(
        join(dir, 'upstreams.yaml'),
        [
          'upstreams:',
          `  ${broken.host ?? 'app.test'}:`,
          '    paths:',
          '      "/":',
          `        authorization: ${broken.authorization}`,
          '        servers: ["127.0.0.1:3000"]',
          '',
        ].join('\n'),
      );
      for (const [name, content] of Object.entries(broken.files ?? {}))
        await writeFile(join(dir, name), content);
      const config = join(dir, 'main.yaml');
      const [validated, started] = await Promise.all([run('validate', config), run('start', config)]);
      assert.equal(validated.code, 1, validated.stderr);
      assert.equal(started.code, 1, started.stderr);
      assert.match(validated.stderr, broken.expected);
      assert.equal(started.stderr, validated.stderr);
    });
  }

  it('a complete OpenID config validates', async () => {
    const dir = join(root, 'good');
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, 'main.yaml'),
      [
        ...LISTENERS,
        ...PROVIDER,
        '    require_verified_email: true',
        'session_secret_file: secrets',
        '',
      ].join('\n'),
    );
    await writeFile(
      join(dir, 'upstreams.yaml'),
      `upstreams:\n  app.test:\n    paths:\n      "/":\n        authorization: { type: oidc, provider: corp, allow: { groups: [a], claims: { dept: [x] } } }\n        servers: ["127.0.0.1:3000"]\n      "/b":\n        authorization: { type: basic, creds: "u:p", allow: { subjects: [u] } }\n        servers: ["127.0.0.1:3000"]\n`,
    );
    for (const [name, content] of Object.entries(GOOD_FILES)) await writeFile(join(dir, name), content);
    const validated = await run('validate', join(dir, 'main.yaml'));
    assert.equal(validated.code, 0, validated.stderr);
  });
});
