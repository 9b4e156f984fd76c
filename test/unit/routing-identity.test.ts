import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { SECRET_FIELDS } from '../../src/routing/identity.ts';
import { valid } from '../fixtures/config/problems.ts';

/**
 * The published config identity (tollgate_config_info{hash}, /readyz, logs): equal for equal
 * configs, and no oracle for the secrets in upstreams.yaml.
 */

function upstreams(password: string, server = '10.0.0.1:80', apiKey = 'k-123', masterkey = 'mk-1'): string {
  return [
    `masterkey: "${masterkey}"`,
    'upstreams:',
    '  app.example.com:',
    '    paths:',
    '      /admin:',
    `        servers: ["${server}"]`,
    `        authorization: { type: basic, creds: "admin:${password}" }`,
    '      /api:',
    `        servers: ["${server}"]`,
    `        authorization: { type: apikey, keys: [{ name: ci, key: "${apiKey}" }] }`,
    '      /hashed:',
    `        servers: ["${server}"]`,
    `        authorization: { type: basic, users: [{ username: bob, password_hash: "${HASHES[password === 's3cret' ? 0 : 1]}" }] }`,
    '',
  ].join('\n');
}

const HASHES = [
  `scrypt$ln=15,r=8,p=1$${Buffer.alloc(16, 1).toString('base64url')}$${Buffer.alloc(32, 2).toString('base64url')}`,
  `scrypt$ln=15,r=8,p=1$${Buffer.alloc(16, 3).toString('base64url')}$${Buffer.alloc(32, 4).toString('base64url')}`,
];

const identity = (text: string) =>
  compileRoutingTable(valid(parseUpstreamsConfig(text, 'upstreams.yaml'))).hash;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('config identity', () => {
  it('is the same for the same config, whatever the comments, formatting or key order', () => {
    const text = upstreams('s3cret');
    const reformatted = `# edited by hand\n${text.replace('{ type: basic, creds: "admin:s3cret" }', '\n          creds: "admin:s3cret"\n          type: basic')}`;
    assert.notEqual(reformatted, text);
    assert.equal(identity(text), identity(text), 'deterministic: replicas and workers agree');
    assert.equal(identity(reformatted), identity(text));
    assert.match(identity(text), /^[0-9a-f]{64}$/);
  });

  it('changes with anything that changes routing', () => {
    const live = identity(upstreams('s3cret'));
    assert.notEqual(identity(upstreams('s3cret', '10.0.0.2:80')), live);
    assert.notEqual(identity(upstreams('s3cret').replace('name: ci', 'name: deploy')), live);
    assert.notEqual(identity(upstreams('s3cret').replace('admin:', 'root:')), live);
  });

  it('is no oracle for secrets: passwords, hashes, API keys and the masterkey do not enter it', () => {
    const published = identity(upstreams('s3cret'));
    assert.notEqual(published, sha256(upstreams('s3cret')));
    // Every guess, right or wrong, gives the same identity: there is nothing to test guesses against.
    for (const guess of ['s3cret', 'password', 'admin', '123456']) {
      assert.equal(identity(upstreams(guess)), published, guess);
    }
    assert.equal(identity(upstreams('s3cret', undefined, 'k-456')), published, 'API key');
    assert.equal(identity(upstreams('other', undefined, undefined, 'mk-2')), published, 'masterkey and hash');
  });

  it('redacts exactly the secret fields the config types hold', () => {
    assert.deepEqual([...SECRET_FIELDS].toSorted(), [
      'key',
      'masterkey',
      'password',
      'passwordHash',
      'value',
    ]);
  });

  it('header rule values do not enter it, their names do', () => {
    const withHeader = (value: string, name = 'Authorization') =>
      `${upstreams('s3cret')}request_headers:\n  set:\n    ${name}: "${value}"\n`;
    assert.equal(identity(withHeader('Bearer a')), identity(withHeader('Bearer b')));
    assert.notEqual(identity(withHeader('Bearer a')), identity(withHeader('Bearer a', 'X-Api-Key')));
  });
});
