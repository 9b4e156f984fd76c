import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';
import { test } from 'node:test';
import { runHashPassword } from '../../src/auth/hash-password-cli.ts';
import { verifyPassword } from '../../src/auth/password.ts';

async function run(argv: string[], input: string) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d: Buffer) => {
    out += d;
  });
  stderr.on('data', (d: Buffer) => {
    err += d;
  });
  const stdin = Readable.from([Buffer.from(input)]) as unknown as NodeJS.ReadStream;
  const code = await runHashPassword(argv, { stdin, stdout, stderr });
  return { code, out, err };
}

test('prints a scrypt hash of the password on stdin, without its trailing newline', async () => {
  const { code, out, err } = await run(['--log-n', '10'], 'pipe password\n');
  assert.equal(code, 0);
  assert.equal(err, '');
  assert.match(out, /^scrypt\$ln=10,r=8,p=1\$\S+\n$/);
  assert.equal(await verifyPassword('pipe password', out.trim()), true);
  assert.equal(await verifyPassword('pipe password\n', out.trim()), false);
});

test('--log-n=N form, and only one trailing newline is removed', async () => {
  const { code, out } = await run(['--log-n=10'], 'two\n\n');
  assert.equal(code, 0);
  assert.equal(await verifyPassword('two\n', out.trim()), true);
});

test('an empty password is refused with exit 1 and no output', async () => {
  const { code, out, err } = await run(['--log-n', '10'], '\n');
  assert.equal(code, 1);
  assert.equal(out, '');
  assert.match(err, /no password/);
});

test('bad arguments exit 2 with usage; --help exits 0', async () => {
  for (const argv of [['--log-n', '99'], ['--log-n'], ['--cost', '5'], ['extra']]) {
    const { code, err } = await run(argv, 'pw');
    assert.equal(code, 2, argv.join(' '));
    assert.match(err, /Usage: tollgate hash-password/);
  }
  const help = await run(['--help'], '');
  assert.equal(help.code, 0);
  assert.match(help.out, /password_hash/);
});
