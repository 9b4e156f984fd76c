import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import type { AuthorizationConfig } from '../../src/config/types.ts';
import { problems, valid } from '../fixtures/config/problems.ts';

const FILE = 'upstreams.yaml';
const ROUTES = 'upstreams:\n  DEFAULT:\n    paths:\n      /:\n        servers: ["127.0.0.1:3000"]\n';

/** A file whose global `authorization` is `lines` (already indented by two spaces), starting on line 2. */
const withAuth = (...lines: string[]) =>
  `authorization:\n${lines.map((line) => `  ${line}\n`).join('')}${ROUTES}`;
const parseAuth = (...lines: string[]) => parseUpstreamsConfig(withAuth(...lines), FILE);
const authOf = (...lines: string[]): AuthorizationConfig | null => valid(parseAuth(...lines)).authorization;

describe('authorization: valid objects, normalised for consumers', () => {
  it('basic creds "user:password" becomes one user; the password may contain ":"', () => {
    assert.deepEqual(authOf('type: basic', 'creds: "alice:pa:ss"'), {
      type: 'basic',
      users: [{ username: 'alice', password: 'pa:ss', passwordHash: null }],
      keys: [],
    });
  });

  it('basic users with a password or a scrypt hash, alongside creds', () => {
    const auth = authOf(
      'type: basic',
      'creds: "alice:one"',
      'users:',
      '  - { username: bob, password: two }',
      '  - { username: carol, password_hash: "scrypt$ln=14,r=8,p=1$Ni_fL65Z-Nbq65u32SwldA$5uqHnf-Gu-BuQMnIiD453xtTBfimlJdbhChfWqU4mqU" }',
    );
    assert.deepEqual(auth?.users, [
      { username: 'alice', password: 'one', passwordHash: null },
      { username: 'bob', password: 'two', passwordHash: null },
      {
        username: 'carol',
        password: null,
        passwordHash:
          'scrypt$ln=14,r=8,p=1$Ni_fL65Z-Nbq65u32SwldA$5uqHnf-Gu-BuQMnIiD453xtTBfimlJdbhChfWqU4mqU',
      },
    ]);
  });

  it("'data' is read as 'creds' (Aralez configs) and 'api' as 'apikey'", () => {
    assert.deepEqual(authOf('type: api', 'data: k3y'), {
      type: 'apikey',
      users: [],
      keys: [{ name: 'apikey', key: 'k3y' }],
    });
    assert.deepEqual(authOf('type: basic', 'data: "u:p"')?.users, [
      { username: 'u', password: 'p', passwordHash: null },
    ]);
  });

  it('apikey creds and named keys', () => {
    assert.deepEqual(
      authOf('type: apikey', 'creds: k0', 'keys:', '  - { name: ci, key: k1 }', '  - { name: ops, key: k2 }'),
      {
        type: 'apikey',
        users: [],
        keys: [
          { name: 'apikey', key: 'k0' },
          { name: 'ci', key: 'k1' },
          { name: 'ops', key: 'k2' },
        ],
      },
    );
  });

  it('jwt needs nothing else, even without a masterkey (it may come from the environment)', () => {
    assert.deepEqual(authOf('type: jwt'), { type: 'jwt', users: [], keys: [] });
  });
});

describe('authorization: each kind of error names file:line:column and path, never a secret', () => {
  it('unknown type, with a suggestion when one is close', () => {
    assert.deepEqual(problems(parseAuth('type: basik', 'creds: "a:b"')), [
      "upstreams.yaml:2:9: authorization.type: unknown authorization type 'basik' (did you mean 'basic'?)",
    ]);
    assert.deepEqual(problems(parseAuth('type: oauth2')), [
      "upstreams.yaml:2:9: authorization.type: unknown authorization type 'oauth2' (expected basic, apikey, api, jwt, forward, oidc, client_certificate or ext_authz)",
    ]);
  });

  it('a missing type', () => {
    assert.deepEqual(problems(parseAuth('creds: "a:b"')), [
      "upstreams.yaml:1:1: authorization: missing 'type' (basic, apikey, api, jwt, forward, oidc, client_certificate or ext_authz)",
    ]);
  });

  it('creds and its alias data together', () => {
    assert.deepEqual(problems(parseAuth('type: apikey', 'creds: one', 'data: two')), [
      "upstreams.yaml:4:3: authorization.data: 'creds' and 'data' are both set; 'data' is an alias of 'creds', keep one",
    ]);
  });

  it('an authorization key with no value fails closed instead of meaning "no auth"', () => {
    assert.deepEqual(problems(parseUpstreamsConfig(`authorization:\n${ROUTES}`, FILE)), [
      'upstreams.yaml:1:1: authorization: is empty: give it a type, or remove the key to turn authentication off',
    ]);
    assert.deepEqual(problems(parseUpstreamsConfig(`authorization: basic\n${ROUTES}`, FILE)), [
      'upstreams.yaml:1:16: authorization: expected a mapping, got a string',
    ]);
  });

  it('unknown keys inside authorization', () => {
    assert.deepEqual(
      problems(parseAuth('type: basic', 'cred: "a:b"')),
      [
        "upstreams.yaml:3:3: authorization.cred: unknown key 'cred' (did you mean 'creds'?)",
        "upstreams.yaml:1:1: authorization: basic needs creds 'user:password' or a 'users' list",
      ].toSorted(),
    );
  });

  it('malformed basic creds are described without echoing the password', () => {
    const cases: [string, string][] = [
      ['"justapassword"', "must be 'user:password'"],
      ['":hunter2"', "must be 'user:password' with a non-empty user"],
      ['"alice:"', 'the password must not be empty'],
      ['12345', 'expected a string, got a number (quote the value if it is meant as text)'],
    ];
    for (const [creds, message] of cases) {
      const issues = problems(parseAuth('type: basic', `creds: ${creds}`));
      assert.deepEqual(issues, [`upstreams.yaml:3:10: authorization.creds: ${message}`]);
      assert.ok(!/justapassword|hunter2/.test(issues.join()));
    }
  });

  it('basic users: missing fields, both password kinds, a foreign hash, ":" in a name, duplicates', () => {
    const issues = problems(
      parseAuth(
        'type: basic',
        'users:',
        '  - { password: x }',
        '  - { username: a }',
        '  - { username: b, password: x, password_hash: "scrypt$x" }',
        '  - { username: c, password_hash: "$2y$10$bcrypt" }',
        '  - { username: "d:e", password: x }',
        '  - { username: f, password: x }',
        '  - { username: f, password: y }',
        '  - { username: g, password_hash: "scrypt$ln=14,r=8,p=1$truncated" }',
      ),
    );
    assert.deepEqual(issues, [
      "upstreams.yaml:4:7: authorization.users[0]: missing 'username'",
      "upstreams.yaml:5:7: authorization.users[1]: missing 'password' or 'password_hash'",
      "upstreams.yaml:6:35: authorization.users[2].password_hash: set either 'password' or 'password_hash', not both",
      "upstreams.yaml:7:37: authorization.users[3].password_hash: must be a hash from 'tollgate hash-password' (scrypt$...)",
      "upstreams.yaml:8:19: authorization.users[4].username: must not contain ':' (Basic auth cannot carry it)",
      "upstreams.yaml:10:19: authorization.users[6].username: user 'f' is defined twice",
      "upstreams.yaml:11:37: authorization.users[7].password_hash: must be a hash from 'tollgate hash-password' (scrypt$...)",
    ]);
  });

  it('basic with neither creds nor users', () => {
    assert.deepEqual(problems(parseAuth('type: basic', 'users: []')), [
      "upstreams.yaml:1:1: authorization: basic needs creds 'user:password' or a 'users' list",
    ]);
  });

  it('apikey: duplicate names, a repeated key value (not printed), a missing key, keys meant for basic', () => {
    const issues = problems(
      parseAuth(
        'type: apikey',
        'keys:',
        '  - { name: ci, key: topsecret1 }',
        '  - { name: ci, key: topsecret2 }',
        '  - { name: ops, key: topsecret1 }',
        '  - { name: nokey }',
        'users: [{ username: a, password: b }]',
      ),
    );
    assert.deepEqual(issues, [
      "upstreams.yaml:5:7: authorization.keys[1]: key name 'ci' is used twice",
      'upstreams.yaml:6:7: authorization.keys[2]: this key is the same as another key of this policy',
      "upstreams.yaml:7:7: authorization.keys[3]: missing 'key'",
      "upstreams.yaml:8:3: authorization.users: 'users' is for type basic; apikey uses 'keys'",
    ]);
    assert.ok(!issues.join().includes('topsecret'));
  });

  it('apikey with no key at all', () => {
    assert.deepEqual(problems(parseAuth('type: api')), [
      "upstreams.yaml:1:1: authorization: apikey needs creds (the key) or a 'keys' list",
    ]);
  });

  it('jwt takes no creds, users or keys', () => {
    assert.deepEqual(problems(parseAuth('type: jwt', 'creds: something', 'keys: []')), [
      'upstreams.yaml:3:3: authorization.creds: jwt takes no creds: tokens are verified with the masterkey',
      'upstreams.yaml:4:3: authorization.keys: jwt takes no keys: tokens are verified with the masterkey',
    ]);
    assert.deepEqual(problems(parseAuth('type: jwt', 'data: something')), [
      'upstreams.yaml:3:3: authorization.data: jwt takes no creds: tokens are verified with the masterkey',
    ]);
  });

  it('per-path authorization errors carry the full path', () => {
    const text = `upstreams:\n  a.example.com:\n    paths:\n      /admin:\n        servers: ["a:1"]\n        authorization: { type: bearer }\n`;
    assert.deepEqual(problems(parseUpstreamsConfig(text, FILE)), [
      "upstreams.yaml:6:32: upstreams.a.example.com.paths./admin.authorization.type: unknown authorization type 'bearer' (expected basic, apikey, api, jwt, forward, oidc, client_certificate or ext_authz)",
    ]);
  });
});
