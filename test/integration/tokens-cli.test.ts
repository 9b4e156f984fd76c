import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { stringify } from 'yaml';
import { testScope } from '../helpers/scope.ts';
import { MAIN_JS, request, type Tollgate } from '../helpers/tollgate.ts';

const MASTERKEY = 'cli-test-masterkey-3e21';

function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN_JS, 'token', ...args],
      { env: { ...process.env, TOLLGATE_CONFIG: '', TOLLGATE_MASTERKEY: '', ...env } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

describe('tollgate token (CLI)', () => {
  const scope = testScope();
  let dir: string;
  let config: string;
  let tollgate: Tollgate;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-token-cli-'));
    const upstream = await scope.upstream({ name: 'app' });
    tollgate = await scope.tollgate({
      main: { masterkey: MASTERKEY, max_token_minutes: 120 },
      upstreams: {
        upstreams: {
          DEFAULT: { paths: { '/': { servers: [upstream.address], authorization: { type: 'jwt' } } } },
        },
      },
    });
    config = join(tollgate.dir, 'main.yaml');
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const get = (path: string, token: string) =>
    request(tollgate.proxyUrl, { path, headers: { host: 'x', authorization: `Bearer ${token}` } });

  it('prints only the token, which the proxy with the same masterkey accepts, scope included', async () => {
    const result = await runCli([
      '--config',
      config,
      '--owner',
      'break-glass',
      '--valid',
      '15',
      '--scope',
      '/ops',
      '--scope',
      '/status/',
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, '');
    assert.match(result.stdout, /^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    const token = result.stdout.trim();
    const claims = decodeJwt(token);
    assert.equal(claims.owner, 'break-glass');
    assert.equal((claims.exp as number) - (claims.iat as number), 15 * 60);
    assert.deepEqual(claims.scope, ['/ops', '/status']);
    assert.equal((await get('/ops/restart', token)).status, 200);
    assert.equal((await get('/status', token)).status, 200);
    assert.equal((await get('/other', token)).status, 403);
  });

  it('an unscoped token, masterkey from the environment, config from TOLLGATE_CONFIG', async () => {
    const noKey = join(dir, 'main.yaml');
    await writeFile(noKey, stringify({ upstreams_conf: join(tollgate.dir, 'upstreams.yaml') }));
    const result = await runCli(['--owner', 'ci', '--valid', '5'], {
      TOLLGATE_CONFIG: noKey,
      TOLLGATE_MASTERKEY: MASTERKEY,
    });
    assert.equal(result.code, 0, result.stderr);
    assert.equal((await get('/anything', result.stdout.trim())).status, 200);
  });

  it('errors go to stderr with exit 1 and nothing on stdout', async () => {
    const noKey = join(dir, 'main.yaml');
    const cases: Array<[string[], RegExp]> = [
      [['--config', config, '--valid', '5'], /--owner is required/],
      [['--config', config, '--owner', 'a'], /--valid is required/],
      [
        ['--config', config, '--owner', 'a', '--valid', '0'],
        /--valid must be an integer number of minutes from 1 to 120/,
      ],
      [['--config', config, '--owner', 'a', '--valid', '121'], /from 1 to 120/],
      [['--config', config, '--owner', 'a', '--valid', '5x'], /--valid must be/],
      [['--config', config, '--owner', 'a\u0007', '--valid', '5'], /--owner must be/],
      [
        ['--config', config, '--owner', 'a', '--valid', '5', '--scope', '/a/../b'],
        /--scope\[0\] '\/a\/\.\.\/b' must not contain/,
      ],
      [['--config', config, '--owner', 'a', '--valid', '5', '--bogus'], /Unknown option '--bogus'/],
      [['--config', join(dir, 'missing.yaml'), '--owner', 'a', '--valid', '5'], /configuration is not valid/],
      [['--config', noKey, '--owner', 'a', '--valid', '5'], /no masterkey is configured/],
    ];
    for (const [args, message] of cases) {
      const result = await runCli(args);
      assert.equal(result.code, 1, args.join(' '));
      assert.equal(result.stdout, '', args.join(' '));
      assert.match(result.stderr, message, args.join(' '));
    }
  });
});
