import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  checkConsistency,
  loadConfig,
  loadUpstreams,
  parseMainConfig,
  parseUpstreamsConfig,
} from '../../src/config/load.ts';
import { problems, valid } from '../fixtures/config/problems.ts';

const FIXTURES = join(import.meta.dirname, '../fixtures/config');
const ROUTES = 'upstreams:\n  DEFAULT:\n    paths:\n      /:\n        servers: ["127.0.0.1:3000"]\n';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-config-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes files into a fresh subdirectory and returns the path of its main.yaml. */
async function writeConfig(name: string, files: Record<string, string>): Promise<string> {
  const base = join(dir, name);
  await mkdir(base, { recursive: true });
  for (const [file, text] of Object.entries(files)) await writeFile(join(base, file), text);
  return join(base, 'main.yaml');
}

describe('loadConfig', () => {
  it('loads the fixture pair; upstreams_conf is relative to main.yaml', async () => {
    const { main, upstreams } = valid(await loadConfig(join(FIXTURES, 'valid/main.yaml')));
    assert.equal(main.upstreamsConf, join(FIXTURES, 'valid/routes/upstreams.yaml'));
    assert.equal(main.logLevel, 'warn');
    assert.equal(upstreams.file, main.upstreamsConf);
    assert.deepEqual(
      upstreams.hosts.map((host) => host.name),
      ['api.example.com', 'DEFAULT'],
    );
    assert.equal(upstreams.hosts[0]?.paths[0]?.authorization?.type, 'jwt');
  });

  it('finds upstreams.yaml beside main.yaml by default', async () => {
    const mainPath = await writeConfig('beside', {
      'main.yaml': 'log_level: error\n',
      'upstreams.yaml': ROUTES,
    });
    const { upstreams } = valid(await loadConfig(mainPath));
    assert.equal(upstreams.file, join(dir, 'beside/upstreams.yaml'));
  });

  it('a missing main.yaml is one clear issue without a position', async () => {
    const missing = join(dir, 'nowhere/main.yaml');
    const result = await loadConfig(missing);
    assert.deepEqual(problems(result), [`cannot read ${missing}: no such file`]);
    assert.equal(result.ok ? -1 : result.issues[0]?.line, 0);
  });

  it("a missing upstreams file is reported on main.yaml's upstreams_conf line, with the resolved path", async () => {
    const mainPath = await writeConfig('no-upstreams', {
      'main.yaml': 'log_level: info\nupstreams_conf: etc/routes.yaml\n',
    });
    assert.deepEqual(problems(await loadConfig(mainPath)), [
      `${mainPath}:2:17: upstreams_conf: cannot read 'etc/routes.yaml': no such file (a relative path is ` +
        `resolved against main.yaml's directory, giving ${join(dir, 'no-upstreams/etc/routes.yaml')})`,
    ]);
    const absolute = join(dir, 'elsewhere/routes.yaml');
    await writeFile(mainPath, `upstreams_conf: ${absolute}\n`);
    assert.deepEqual(problems(await loadConfig(mainPath)), [
      `${mainPath}:1:17: upstreams_conf: cannot read '${absolute}': no such file`,
    ]);
  });

  it('without upstreams_conf, a missing default upstreams.yaml says which default was looked for', async () => {
    const mainPath = await writeConfig('no-default', { 'main.yaml': 'log_level: info\n' });
    assert.deepEqual(problems(await loadConfig(mainPath)), [
      `${mainPath}: upstreams_conf: not set, so the default upstreams.yaml beside main.yaml is used, and ` +
        `${join(dir, 'no-default/upstreams.yaml')} cannot be read: no such file`,
    ]);
  });

  it('a directory or an unreadable file is reported as such', async () => {
    const mainPath = await writeConfig('dir', { 'main.yaml': 'upstreams_conf: sub\n' });
    await mkdir(join(dir, 'dir/sub'));
    assert.deepEqual(problems(await loadConfig(mainPath)), [
      `${mainPath}:1:17: upstreams_conf: cannot read 'sub': it is a directory (a relative path is ` +
        `resolved against main.yaml's directory, giving ${join(dir, 'dir/sub')})`,
    ]);

    const lockedPath = await writeConfig('locked', { 'main.yaml': '' });
    await chmod(lockedPath, 0o000);
    const result = await loadConfig(lockedPath);
    await chmod(lockedPath, 0o600);
    // root reads anything; the check only means something for an ordinary user.
    if (process.getuid?.() !== 0) {
      assert.deepEqual(problems(result), [`cannot read ${lockedPath}: permission denied`]);
    }
  });

  it('a file that is not UTF-8 is refused', async () => {
    const mainPath = await writeConfig('latin1', { 'main.yaml': '' });
    await writeFile(
      mainPath,
      Buffer.from([0x6c, 0x6f, 0x67, 0x5f, 0x6c, 0x65, 0x76, 0x65, 0x6c, 0x3a, 0x20, 0xe9, 0x0a]),
    );
    assert.deepEqual(problems(await loadConfig(mainPath)), [`cannot read ${mainPath}: not UTF-8 text`]);
  });

  it('reports the problems of both files in one go', async () => {
    const mainPath = await writeConfig('both-bad', {
      'main.yaml': 'log_level: loud\nhttps_port: 0\n',
      'upstreams.yaml':
        'authorisation: { type: jwt }\nupstreams:\n  a:\n    paths:\n      /:\n        servers: []\n',
    });
    const upstreamsPath = join(dir, 'both-bad/upstreams.yaml');
    assert.deepEqual(problems(await loadConfig(mainPath)), [
      `${mainPath}:1:12: log_level: unknown log level 'loud' (expected trace, debug, info, warn, error, silent)`,
      `${mainPath}:2:13: https_port: 0 is out of range (must be >= 1 and <= 65535)`,
      `${upstreamsPath}:1:1: authorisation: unknown key 'authorisation' (did you mean 'authorization'?)`,
      `${upstreamsPath}:6:18: upstreams.a.paths./.servers: is empty: a path needs at least one server`,
    ]);
  });

  it('does not guess the upstreams file when main.yaml is not even valid YAML', async () => {
    const mainPath = await writeConfig('broken-main', {
      'main.yaml': 'upstreams_conf: [\n',
      'upstreams.yaml': '{',
    });
    const issues = problems(await loadConfig(mainPath));
    assert.ok(issues.length > 0);
    assert.ok(issues.every((issue) => issue.startsWith(`${mainPath}:`)));
  });

  it('two different masterkeys are an error at the masterkey line of upstreams.yaml, without the values', async () => {
    const mainPath = await writeConfig('two-keys', {
      'main.yaml': 'masterkey: alpha-secret\n',
      'upstreams.yaml': `provider: file\nmasterkey: "beta-secret"\n${ROUTES}`,
    });
    const issues = problems(await loadConfig(mainPath));
    assert.deepEqual(issues, [
      `${join(dir, 'two-keys/upstreams.yaml')}:2:12: masterkey: this masterkey differs from the one in main.yaml`,
    ]);
    assert.ok(!/alpha-secret|beta-secret/.test(issues.join()));
  });

  it('the same masterkey in both files is fine, and master_key counts as masterkey', async () => {
    const mainPath = await writeConfig('same-key', {
      'main.yaml': 'master_key: k\n',
      'upstreams.yaml': `masterkey: k\n${ROUTES}`,
    });
    const { main, upstreams } = valid(await loadConfig(mainPath));
    assert.equal(main.masterkey, 'k');
    assert.equal(upstreams.masterkey, 'k');
  });

  it('a relative --config path gives relative file names in messages', async () => {
    const mainPath = await writeConfig('relative', {
      'main.yaml': 'log_level: info\n',
      'upstreams.yaml': 'upstreams:\n',
    });
    const shown = relative(process.cwd(), mainPath);
    const shownUpstreams = relative(process.cwd(), join(dir, 'relative/upstreams.yaml'));
    assert.deepEqual(problems(await loadConfig(shown)), [
      `${shownUpstreams}:1:1: upstreams: has no hosts: name at least one, or write \`upstreams: {}\` when Ingresses or Gateway API routes serve every host`,
    ]);
  });

  it('the upstreams hash is the sha256 of the file bytes', async () => {
    const text = `\uFEFF# with a byte order mark\n${ROUTES}`;
    const mainPath = await writeConfig('hash', { 'main.yaml': '', 'upstreams.yaml': text });
    const { upstreams } = valid(await loadConfig(mainPath));
    assert.equal(upstreams.hash, createHash('sha256').update(Buffer.from(text)).digest('hex'));
  });
});

describe('loadUpstreams (hot reload)', () => {
  it('re-reads the file named by main.yaml and applies the cross-file rules', async () => {
    const mainPath = await writeConfig('reload', { 'main.yaml': 'masterkey: k\n', 'upstreams.yaml': ROUTES });
    const { main } = valid(await loadConfig(mainPath));
    assert.equal(valid(await loadUpstreams(main)).hosts.length, 1);

    await writeFile(main.upstreamsConf, `masterkey: other\n${ROUTES}`);
    assert.deepEqual(problems(await loadUpstreams(main)), [
      `${main.upstreamsConf}:1:12: masterkey: this masterkey differs from the one in main.yaml`,
    ]);

    await writeFile(main.upstreamsConf, 'upstreams:\n  a:\n    paths:\n      /: {}\n');
    assert.deepEqual(problems(await loadUpstreams(main)), [
      `${main.upstreamsConf}:4:7: upstreams.a.paths./: missing 'servers'`,
    ]);

    await rm(main.upstreamsConf);
    assert.deepEqual(problems(await loadUpstreams(main)), [
      `cannot read ${main.upstreamsConf}: no such file`,
    ]);
  });
});

describe('checkConsistency (the masterkey resolver the running process uses)', () => {
  it('an unreadable masterkey_file is reported on its main.yaml line', async () => {
    const mainPath = await writeConfig('key-file', {
      'main.yaml': 'log_level: info\nmasterkey_file: secrets/key\n',
      'upstreams.yaml': ROUTES,
    });
    assert.deepEqual(problems(await loadConfig(mainPath)), [
      `${mainPath}:2:17: masterkey_file: cannot read ${join(dir, 'key-file/secrets/key')}: no such file`,
    ]);
    await mkdir(join(dir, 'key-file/secrets'));
    await writeFile(join(dir, 'key-file/secrets/key'), 'from-file\n');
    await writeFile(join(dir, 'key-file/upstreams.yaml'), `masterkey: other\n${ROUTES}`);
    assert.deepEqual(problems(await loadConfig(mainPath)), [
      `${join(dir, 'key-file/upstreams.yaml')}:1:12: masterkey: this masterkey differs from the one in masterkey_file (${join(dir, 'key-file/secrets/key')})`,
    ]);
  });

  it('TOLLGATE_MASTERKEY wins outright, for validation as for the running process', () => {
    const main = valid(parseMainConfig('masterkey: a\n', '/c/main.yaml'));
    const other = valid(parseUpstreamsConfig(`masterkey: b\n${ROUTES}`, '/c/upstreams.yaml'));
    assert.deepEqual(checkConsistency(main, other, { TOLLGATE_MASTERKEY: 'env' }), []);
  });

  it('only complains when both files set a masterkey and they differ', () => {
    const main = valid(parseMainConfig('masterkey: a\n', '/c/main.yaml'));
    const noKey = valid(parseMainConfig('', '/c/main.yaml'));
    const same = valid(parseUpstreamsConfig(`masterkey: a\n${ROUTES}`, '/c/upstreams.yaml'));
    const other = valid(parseUpstreamsConfig(`masterkey: b\n${ROUTES}`, '/c/upstreams.yaml'));
    const none = valid(parseUpstreamsConfig(ROUTES, '/c/upstreams.yaml'));
    assert.deepEqual(checkConsistency(main, same, {}), []);
    assert.deepEqual(checkConsistency(main, none, {}), []);
    assert.deepEqual(checkConsistency(noKey, other, {}), []);
    assert.deepEqual(checkConsistency(main, other, {}), [
      {
        file: '/c/upstreams.yaml',
        line: 1,
        column: 12,
        path: 'masterkey',
        message: 'this masterkey differs from the one in main.yaml',
      },
    ]);
  });
});
