import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import type { AuthorizationConfig } from '../../src/config/types.ts';
import { problems, valid } from '../fixtures/config/problems.ts';

const ROUTES = 'upstreams:\n  DEFAULT:\n    paths:\n      /:\n        servers: ["127.0.0.1:3000"]\n';
const withAuth = (...lines: string[]) =>
  `authorization:\n${lines.map((line) => `  ${line}\n`).join('')}${ROUTES}`;
const parseAuth = (file: string, ...lines: string[]) => parseUpstreamsConfig(withAuth(...lines), file);
const authOf = (...lines: string[]): AuthorizationConfig | null =>
  valid(parseAuth('upstreams.yaml', ...lines)).authorization;
const problemsOf = (...lines: string[]) => problems(parseAuth('upstreams.yaml', ...lines));

describe('jwt authorization: issuers and browser links', () => {
  it('plain type jwt keeps its old shape (Tollgate tokens, links on)', () => {
    assert.deepEqual(authOf('type: jwt'), { type: 'jwt', users: [], keys: [] });
  });

  it('the shorthand is one external issuer and refuses Tollgate tokens', () => {
    assert.deepEqual(
      authOf(
        'type: jwt',
        'issuer: https://idp.example',
        'audience: tollgate',
        'jwks_uri: https://idp.example/keys',
      )?.jwt,
      {
        acceptTollgate: false,
        external: [
          {
            issuer: 'https://idp.example',
            audience: ['tollgate'],
            jwksUri: 'https://idp.example/keys',
            jwksFile: null,
            subjectClaim: 'sub',
          },
        ],
        browserLinks: true,
      },
    );
  });

  it('issuers lists tollgate and external issuers; audiences may be a list; browser_links may be off', () => {
    const auth = authOf(
      'type: jwt',
      'browser_links: false',
      'issuers:',
      '  - tollgate',
      '  - { issuer: "https://dex", audience: [a, b], jwks_uri: "http://dex.auth.svc:5556/keys", subject_claim: email }',
    );
    assert.deepEqual(auth?.jwt, {
      acceptTollgate: true,
      external: [
        {
          issuer: 'https://dex',
          audience: ['a', 'b'],
          jwksUri: 'http://dex.auth.svc:5556/keys',
          jwksFile: null,
          subjectClaim: 'email',
        },
      ],
      browserLinks: false,
    });
  });

  it('jwks_file is resolved beside upstreams.yaml and must be a key set', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-jwks-config-'));
    await writeFile(join(dir, 'keys.json'), JSON.stringify({ keys: [] }));
    await writeFile(join(dir, 'bad.json'), '{"nokeys": 1}');
    const file = join(dir, 'upstreams.yaml');
    const ok = valid(
      parseAuth(file, 'type: jwt', 'issuer: https://k8s', 'audience: tollgate', 'jwks_file: keys.json'),
    );
    assert.equal(ok.authorization?.jwt?.external[0]?.jwksFile, join(dir, 'keys.json'));
    assert.match(
      problems(
        parseAuth(file, 'type: jwt', 'issuer: https://k8s', 'audience: t', 'jwks_file: bad.json'),
      )[0] ?? '',
      /authorization\.jwks_file: .*bad\.json is not a JSON Web Key Set/,
    );
    assert.match(
      problems(
        parseAuth(file, 'type: jwt', 'issuer: https://k8s', 'audience: t', 'jwks_file: missing.json'),
      )[0] ?? '',
      /authorization\.jwks_file: cannot read .*missing\.json: no such file/,
    );
  });

  it('strict: every mistake is reported with its line and path', () => {
    assert.deepEqual(problemsOf('type: jwt', 'issuer: https://idp'), [
      "upstreams.yaml:3:3: authorization.issuer: an external issuer needs 'audience'",
      "upstreams.yaml:3:3: authorization.issuer: an external issuer needs exactly one of 'jwks_uri' and 'jwks_file'",
    ]);
    assert.deepEqual(
      problemsOf('type: jwt', 'issuer: i', 'audience: a', 'jwks_uri: https://x/k', 'jwks_file: /k.json'),
      [
        "upstreams.yaml:3:3: authorization.issuer: an external issuer needs exactly one of 'jwks_uri' and 'jwks_file'",
      ],
    );
    assert.deepEqual(problemsOf('type: jwt', 'issuer: i', 'audience: a', 'jwks_uri: ftp://x/k'), [
      'upstreams.yaml:5:13: authorization.jwks_uri: must be an https:// (or http://) URL',
    ]);
    assert.deepEqual(problemsOf('type: jwt', 'issuers: [tollgate]', 'audience: a'), [
      "upstreams.yaml:4:3: authorization.audience: 'audience' belongs inside an 'issuers' entry when 'issuers' is set",
    ]);
    assert.deepEqual(problemsOf('type: jwt', 'issuers: [tolgate]'), [
      "upstreams.yaml:3:13: authorization.issuers[0]: 'tolgate' is not an issuer: write 'tollgate' or a mapping with issuer, audience and jwks_uri or jwks_file",
    ]);
    assert.deepEqual(problemsOf('type: jwt', 'issuers: []'), [
      'upstreams.yaml:3:12: authorization.issuers: must list 1 to 16 issuers',
    ]);
    assert.deepEqual(
      problemsOf('type: jwt', 'issuers: [{issuer: tollgate, audience: a, jwks_uri: "https://x"}]'),
      [
        "upstreams.yaml:3:22: authorization.issuers[0].issuer: 'tollgate' is the issuer of Tollgate's own tokens: list it as the plain string 'tollgate' in issuers",
      ],
    );
    assert.deepEqual(
      problemsOf('type: jwt', 'issuers: [{issuer: i, audience: a, jwks_uri: "https://x", subjet_claim: e}]'),
      [
        "upstreams.yaml:3:61: authorization.issuers[0].subjet_claim: unknown key 'subjet_claim' (did you mean 'subject_claim'?)",
      ],
    );
    assert.deepEqual(problemsOf('type: basic', 'creds: "a:b"', 'browser_links: true'), [
      "upstreams.yaml:4:3: authorization.browser_links: 'browser_links' is for type jwt",
    ]);
    assert.deepEqual(problemsOf('type: jwt', 'browser_links: "no"'), [
      'upstreams.yaml:3:18: authorization.browser_links: expected true or false, got a string',
    ]);
  });
});
