import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  createMasterkeySource,
  MasterkeyError,
  masterkeyFromFileText,
  resolveMasterkey,
} from '../../src/sources/masterkey.ts';

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tollgate-masterkey-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const main = (masterkey: string | null, masterkeyFile: string | null = null) => ({
  masterkey,
  masterkeyFile,
});
const upstreams = (masterkey: string | null) => ({ masterkey });

test('no source at all: null (token issuance disabled)', () => {
  assert.equal(resolveMasterkey(main(null), upstreams(null), {}), null);
  assert.equal(resolveMasterkey(main(null), null, {}), null);
});

test('main.yaml, then upstreams.yaml', () => {
  assert.equal(resolveMasterkey(main('from-main'), upstreams(null), {}), 'from-main');
  assert.equal(resolveMasterkey(main(null), upstreams('from-upstreams'), {}), 'from-upstreams');
  assert.equal(resolveMasterkey(main('same'), upstreams('same'), {}), 'same');
});

test('main.yaml and upstreams.yaml disagreeing is an error that does not print either key', () => {
  assert.throws(
    () => resolveMasterkey(main('secret-one'), upstreams('secret-two'), {}),
    (error: Error) => error instanceof MasterkeyError && !/secret-one|secret-two/.test(error.message),
  );
});

test('env TOLLGATE_MASTERKEY wins over every file', () => {
  assert.equal(
    resolveMasterkey(main('from-main'), upstreams('from-upstreams'), { TOLLGATE_MASTERKEY: 'from-env' }),
    'from-env',
  );
});

test('an empty value counts as unset, never as an empty key', () => {
  assert.equal(resolveMasterkey(main(''), upstreams(''), { TOLLGATE_MASTERKEY: '' }), null);
  assert.equal(resolveMasterkey(main(null), upstreams('u'), { TOLLGATE_MASTERKEY: '' }), 'u');
});

test('masterkey_file is read and loses one trailing newline only', async () => {
  const file = join(dir, 'masterkey');
  await writeFile(file, 'from-file\n');
  assert.equal(resolveMasterkey(main(null, file), upstreams(null), {}), 'from-file');
  await writeFile(file, 'with-crlf\r\n');
  assert.equal(resolveMasterkey(main(null, file), upstreams(null), {}), 'with-crlf');
  await writeFile(file, ' spaced key \n\n');
  assert.equal(resolveMasterkey(main(null, file), upstreams(null), {}), ' spaced key \n');
  await writeFile(file, 'from-file');
  assert.equal(resolveMasterkey(main(null, file), upstreams('from-file'), {}), 'from-file');
  assert.throws(() => resolveMasterkey(main(null, file), upstreams('other'), {}), MasterkeyError);
  // Inline main.yaml masterkey takes precedence over the file.
  assert.equal(resolveMasterkey(main('inline', file), upstreams(null), {}), 'inline');
});

test('an unreadable masterkey_file is an error naming the file, not a silent null', () => {
  const missing = join(dir, 'does-not-exist');
  assert.throws(
    () => resolveMasterkey(main(null, missing), upstreams(null), {}),
    (error: Error) => error instanceof MasterkeyError && error.message.includes(missing),
  );
});

test('a masterkey source follows upstreams.yaml reloads and keeps its key on a conflicting one', () => {
  const source = createMasterkeySource(main(null), upstreams('first'), {});
  assert.equal(source.current(), 'first');
  source.reload(upstreams('second'));
  assert.equal(source.current(), 'second');
  source.reload(upstreams(null));
  assert.equal(source.current(), null);

  const pinned = createMasterkeySource(main('pinned'), upstreams(null), {});
  assert.throws(() => pinned.reload(upstreams('other')), MasterkeyError);
  assert.equal(pinned.current(), 'pinned');
});

test('a rotated masterkey_file replaces the key on its own; upstreams reloads keep using it', async () => {
  const file = join(dir, 'rotating');
  await writeFile(file, 'first-key\n');
  const source = createMasterkeySource(main(null, file), upstreams(null), {});
  assert.equal(source.file, file);
  assert.equal(source.current(), 'first-key');
  source.replaceFileKey(masterkeyFromFileText('second-key\n'));
  assert.equal(source.current(), 'second-key');
  // An upstreams.yaml reload does not go back to the file: the watcher owns it.
  await writeFile(file, 'not-applied-yet\n');
  source.reload(upstreams(null));
  assert.equal(source.current(), 'second-key');
});

test('a rotated masterkey_file that disagrees with upstreams.yaml is refused, keeping the key', async () => {
  const file = join(dir, 'pinned-by-upstreams');
  await writeFile(file, 'shared\n');
  const source = createMasterkeySource(main(null, file), upstreams('shared'), {});
  assert.throws(() => source.replaceFileKey('rotated'), MasterkeyError);
  assert.equal(source.current(), 'shared');
  // Both sides rotated: upstreams.yaml first is refused too, then file and upstreams agree again.
  assert.throws(() => source.reload(upstreams('rotated')), MasterkeyError);
  assert.equal(source.current(), 'shared');
});

test('no file to watch when the environment or an inline key wins over masterkey_file', async () => {
  const file = join(dir, 'shadowed');
  await writeFile(file, 'from-file\n');
  assert.equal(createMasterkeySource(main(null, file), null, { TOLLGATE_MASTERKEY: 'env' }).file, null);
  assert.equal(createMasterkeySource(main('inline', file), null, {}).file, null);
});

test('an empty masterkey file is refused, never an empty key', async () => {
  assert.throws(() => masterkeyFromFileText('\n'), MasterkeyError);
  const file = join(dir, 'empty');
  await writeFile(file, '\n');
  assert.throws(() => resolveMasterkey(main(null, file), null, {}), /masterkey_file: .*empty/);
});
