import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAIN_JS, ROOT } from '../helpers/tollgate.ts';

function tollgate(...args: string[]) {
  const result = spawnSync(process.execPath, [MAIN_JS, ...args], {
    encoding: 'utf8',
    env: { ...process.env, TOLLGATE_CONFIG: '' },
    // Generous: a loaded machine starts node slowly, and a kill here would read as a wrong answer.
    timeout: 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('tollgate validate', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-cli-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('accepts the bundled example and prints a one-line summary', () => {
    const result = tollgate('validate', '--config', join(ROOT, 'examples', 'main.yaml'));
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      /^valid: .*main\.yaml and .*upstreams\.yaml: 1 hosts, 4 routes, 2 servers\n$/,
    );
  });

  it('names the line of a misspelt authorization and exits 1', async () => {
    await writeFile(join(dir, 'main.yaml'), 'proxy_address_http: "127.0.0.1:0"\n');
    await writeFile(
      join(dir, 'upstreams.yaml'),
      [
        'upstreams:',
        '  app.test:',
        '    paths:',
        '      "/":',
        '        servers: ["127.0.0.1:3000"]',
        '        authorisation:',
        '          type: basic',
        '          creds: "a:b"',
        '',
      ].join('\n'),
    );
    const result = tollgate('validate', '--config', join(dir, 'main.yaml'));
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /upstreams\.yaml:6:9: upstreams\.app\.test\.paths\.\/\.authorisation: .*authorisation.*authorization/,
    );
    assert.equal(result.stdout, '');
  });

  it('prints every problem of both files, not just the first', async () => {
    await writeFile(join(dir, 'main.yaml'), 'proxy_address_http: "nonsense"\nlog_levle: info\n');
    await writeFile(
      join(dir, 'upstreams.yaml'),
      'provider: consul\nupstreams:\n  app.test:\n    paths:\n      "/":\n        servers: []\n',
    );
    const result = tollgate('validate', '--config', join(dir, 'main.yaml'));
    assert.equal(result.code, 1);
    assert.match(result.stderr, /main\.yaml:1:\d+: proxy_address_http:/);
    assert.match(result.stderr, /main\.yaml:2:1: log_levle:/);
    assert.match(result.stderr, /upstreams\.yaml:1:\d+: provider:/);
    assert.match(result.stderr, /upstreams\.yaml:6:\d+: upstreams\.app\.test\.paths\.\/\.servers:/);
  });

  it('warns when jwt routes exist but no masterkey is configured, and fails on an unreadable masterkey_file', async () => {
    await writeFile(join(dir, 'main.yaml'), 'proxy_address_http: "127.0.0.1:0"\n');
    await writeFile(
      join(dir, 'upstreams.yaml'),
      'upstreams:\n  app.test:\n    paths:\n      "/private":\n        servers: ["127.0.0.1:3000"]\n        authorization: { type: jwt }\n',
    );
    const warned = tollgate('validate', '--config', join(dir, 'main.yaml'));
    assert.equal(warned.code, 0);
    assert.match(
      warned.stderr,
      /warning: no masterkey is configured, so every request to the jwt routes \(app\.test\/private\)/,
    );

    await writeFile(join(dir, 'main.yaml'), `masterkey_file: ${join(dir, 'missing-secret')}\n`);
    const failed = tollgate('validate', '--config', join(dir, 'main.yaml'));
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /missing-secret/);
  });

  it('says clearly when the config file is missing', () => {
    const result = tollgate('validate', '--config', join(dir, 'nope.yaml'));
    assert.equal(result.code, 1);
    assert.match(result.stderr, /nope\.yaml.*(no such file|not found|does not exist)/i);
  });

  it('refuses to start with an invalid config', async () => {
    await writeFile(join(dir, 'main.yaml'), 'proxy_address_http: "127.0.0.1:0"\nbogus: 1\n');
    await writeFile(
      join(dir, 'upstreams.yaml'),
      'upstreams:\n  a.test:\n    paths:\n      "/":\n        servers: ["127.0.0.1:1"]\n',
    );
    const result = tollgate('start', '--config', join(dir, 'main.yaml'));
    assert.equal(result.code, 1);
    assert.match(result.stderr, /main\.yaml:2:1: bogus:/);
  });

  it('rejects an unknown command with usage and exit 2', () => {
    const result = tollgate('frobnicate');
    assert.equal(result.code, 2);
    assert.match(result.stderr, /unknown command 'frobnicate'/);
    assert.match(result.stderr, /usage: tollgate/);
  });
});
