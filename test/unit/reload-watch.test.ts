import assert from 'node:assert/strict';
import {
  appendFile,
  mkdir,
  mkdtemp,
  rename,
  rm,
  symlink,
  truncate,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { sha256Hex } from '../../src/config/load.ts';
import { createLogger } from '../../src/log.ts';
import { configReloadsTotal } from '../../src/observe/metrics.ts';
import {
  createFileWatcher,
  type FileSnapshot,
  type FileWatcher,
  type FileWatcherOptions,
  readSnapshot,
} from '../../src/sources/files.ts';
import { createConfigMapVolume } from '../helpers/configmap.ts';

const logger = createLogger('silent');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'tollgate-watch-'));
  dirs.push(dir);
  return dir;
}

/** Starts a watcher on one file and records what its handler is told. */
async function watchOne(
  path: string,
  options: { liveHash?: string } & Partial<Omit<FileWatcherOptions, 'logger'>> = {},
) {
  const seen: FileSnapshot[] = [];
  const watcher = await createFileWatcher({
    logger,
    quietMs: options.quietMs ?? 50,
    maxWaitMs: options.maxWaitMs,
    pollIntervalMs: options.pollIntervalMs ?? 60_000,
  });
  await watcher.watch({
    name: 'test',
    paths: [path],
    liveHashes: options.liveHash === undefined ? undefined : [options.liveHash],
    onChange: ([snapshot]) => void seen.push(snapshot as FileSnapshot),
  });
  return { seen, watcher };
}

/** Waits until `count` changes were reported (fails after 3 s), then for the watcher to be idle. */
async function changes(seen: FileSnapshot[], watcher: FileWatcher, count: number): Promise<void> {
  const deadline = Date.now() + 3_000;
  while (seen.length < count) {
    if (Date.now() > deadline) assert.fail(`expected ${count} change(s), saw ${seen.length}`);
    await sleep(10);
  }
  await watcher.settled();
}

const textOf = (snapshot: FileSnapshot | undefined) =>
  snapshot?.kind === 'content' ? snapshot.text : snapshot?.kind;

describe('readSnapshot', () => {
  it('hashes the bytes and follows symlinks', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'real.yaml'), 'a: 1\n');
    await symlink('real.yaml', join(dir, 'link.yaml'));
    assert.deepEqual(await readSnapshot(join(dir, 'link.yaml')), {
      kind: 'content',
      text: 'a: 1\n',
      hash: sha256Hex('a: 1\n'),
    });
  });

  it('reports a missing, empty, whitespace-only or non-UTF-8 file as unavailable', async () => {
    const dir = await tempDir();
    assert.equal((await readSnapshot(join(dir, 'nope.yaml'))).kind, 'unavailable');
    await writeFile(join(dir, 'empty.yaml'), '');
    assert.deepEqual(await readSnapshot(join(dir, 'empty.yaml')), {
      kind: 'unavailable',
      reason: 'the file is empty',
    });
    await writeFile(join(dir, 'blank.yaml'), ' \n\n');
    assert.equal((await readSnapshot(join(dir, 'blank.yaml'))).kind, 'unavailable');
    await writeFile(join(dir, 'latin1.yaml'), Buffer.from([0x61, 0x3a, 0x20, 0xe9, 0x0a]));
    assert.deepEqual(await readSnapshot(join(dir, 'latin1.yaml')), {
      kind: 'unavailable',
      reason: 'the file is not UTF-8 text',
    });
  });
});

describe('createFileWatcher', () => {
  it('reports an in-place write, and nothing when the same content is written again', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    const { seen, watcher } = await watchOne(file);
    await writeFile(file, 'v: 2\n');
    await changes(seen, watcher, 1);
    assert.equal(textOf(seen[0]), 'v: 2\n');

    await writeFile(file, 'v: 2\n');
    watcher.trigger('test');
    await sleep(150);
    await watcher.settled();
    assert.equal(seen.length, 1, 'same content: no change reported');
    await watcher.close();
  });

  it('uses the live hash as the baseline, so a change made before watching is reported', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'written after the first load\n');
    const { seen, watcher } = await watchOne(file, { liveHash: sha256Hex('what was loaded\n') });
    watcher.trigger('SIGHUP');
    await changes(seen, watcher, 1);
    assert.equal(textOf(seen[0]), 'written after the first load\n');
    await watcher.close();
  });

  it('coalesces a burst of writes, always ending with the last content', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 0\n');
    // The exact timing is the check scheduler's (tested with mock timers); here, with real files,
    // a burst must be read far fewer times than it was written, and its end must be what is reported.
    const { seen, watcher } = await watchOne(file, { quietMs: 300, maxWaitMs: 10_000 });
    for (let i = 1; i <= 20; i++) {
      await writeFile(file, `v: ${i}\n`);
      await sleep(5);
    }
    const deadline = Date.now() + 5_000;
    while (textOf(seen.at(-1)) !== 'v: 20\n' && Date.now() < deadline) await sleep(10);
    await watcher.settled();
    assert.equal(textOf(seen.at(-1)), 'v: 20\n');
    assert.ok(seen.length < 10, `${seen.length} changes reported for 20 writes`);
    await watcher.close();
  });

  it('sees every kubelet ..data swap of a ConfigMap volume', async () => {
    const volume = await createConfigMapVolume({ 'upstreams.yaml': 'v: 1\n' });
    dirs.push(volume.dir);
    const { seen, watcher } = await watchOne(volume.path('upstreams.yaml'));
    for (let v = 2; v <= 5; v++) {
      await volume.update({ 'upstreams.yaml': `v: ${v}\n` });
      await changes(seen, watcher, v - 1);
      assert.equal(textOf(seen.at(-1)), `v: ${v}\n`);
    }
    await watcher.close();
  });

  it('sees a temp file renamed over the original (editors, `kubectl cp`, atomic writers)', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    const { seen, watcher } = await watchOne(file);
    await writeFile(join(dir, '.upstreams.yaml.tmp'), 'v: 2\n');
    await rename(join(dir, '.upstreams.yaml.tmp'), file);
    await changes(seen, watcher, 1);
    assert.equal(textOf(seen[0]), 'v: 2\n');
    await watcher.close();
  });

  it('reports deletion and truncation as unavailable, then the content that follows', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    const { seen, watcher } = await watchOne(file);
    await unlink(file);
    await changes(seen, watcher, 1);
    assert.deepEqual(seen[0], { kind: 'unavailable', reason: 'the file does not exist' });

    await writeFile(file, 'v: 2\n');
    await changes(seen, watcher, 2);
    assert.equal(textOf(seen[1]), 'v: 2\n');

    await truncate(file, 0);
    await changes(seen, watcher, 3);
    assert.deepEqual(seen[2], { kind: 'unavailable', reason: 'the file is empty' });
    await watcher.close();
  });

  it('a truncate immediately followed by the write is one change to the new content', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    const { seen, watcher } = await watchOne(file, { quietMs: 300, maxWaitMs: 10_000 });
    await truncate(file, 0);
    await sleep(20);
    await writeFile(file, 'v: 2\n', { flag: 'r+' });
    await changes(seen, watcher, 1);
    await sleep(150);
    assert.deepEqual(seen.map(textOf), ['v: 2\n']);
    await watcher.close();
  });

  it('takes a second look before reporting a file missing or empty, so a slow writer is not a failure', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    // The second look comes a quiet period (1 s here) after the check that found the file empty.
    const { seen, watcher } = await watchOne(file, { quietMs: 1_000, maxWaitMs: 1_000 });
    await truncate(file, 0);
    watcher.trigger('SIGHUP'); // checks at once: finds the file empty
    await writeFile(file, 'v: 2\n', { flag: 'r+' });
    await changes(seen, watcher, 1);
    assert.deepEqual(seen.map(textOf), ['v: 2\n'], 'the empty moment was never reported');
    await watcher.close();
  });

  it('falls back to polling for changes fs.watch cannot see (a symlink into another directory)', async () => {
    const dir = await tempDir();
    const elsewhere = await tempDir();
    await writeFile(join(elsewhere, 'real.yaml'), 'v: 1\n');
    await symlink(join(elsewhere, 'real.yaml'), join(dir, 'upstreams.yaml'));
    const { seen, watcher } = await watchOne(join(dir, 'upstreams.yaml'), { pollIntervalMs: 200 });
    await writeFile(join(elsewhere, 'real.yaml'), 'v: 2\n');
    await changes(seen, watcher, 1);
    assert.equal(textOf(seen[0]), 'v: 2\n');
    await watcher.close();
  });

  it('watches a directory again after it was removed and created again', async () => {
    const parent = await tempDir();
    const dir = join(parent, 'config');
    await mkdir(dir);
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    const triggers: string[] = [];
    const seen: FileSnapshot[] = [];
    const watcher = await createFileWatcher({ logger, quietMs: 50, pollIntervalMs: 300 });
    await watcher.watch({
      name: 'test',
      paths: [file],
      onChange: ([snapshot], trigger) => {
        seen.push(snapshot as FileSnapshot);
        triggers.push(trigger);
      },
    });
    await rm(dir, { recursive: true });
    await changes(seen, watcher, 1);
    assert.equal(seen[0]?.kind, 'unavailable');
    await mkdir(dir);
    await writeFile(file, 'v: 2\n');
    await changes(seen, watcher, 2);
    assert.equal(textOf(seen[1]), 'v: 2\n');
    // inotify went silent when the directory was deleted; the poll must re-watch the new one, after
    // which a write is seen through an event again. The poll may still read a write first (it runs
    // every 300 ms here), so write again until one change arrives through fs.watch.
    const deadline = Date.now() + 10_000;
    for (let v = 3; !triggers.at(-1)?.includes('fs.watch'); v++) {
      assert.ok(Date.now() < deadline, `never seen through fs.watch: ${triggers.join(' | ')}`);
      await writeFile(file, `v: ${v}\n`);
      await changes(seen, watcher, v);
      assert.equal(textOf(seen.at(-1)), `v: ${v}\n`);
    }
    await watcher.close();
  });

  it('never runs two checks at once; a change during a slow handler is checked afterwards', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    const seen: string[] = [];
    let active = 0;
    let maxActive = 0;
    let handlerStarted: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      handlerStarted = resolve;
    });
    let releaseHandler: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      releaseHandler = resolve;
    });
    const watcher = await createFileWatcher({ logger, quietMs: 20, pollIntervalMs: 60_000 });
    await watcher.watch({
      name: 'test',
      paths: [file],
      async onChange([snapshot]) {
        active++;
        maxActive = Math.max(maxActive, active);
        seen.push(textOf(snapshot) ?? '');
        handlerStarted();
        await released;
        active--;
      },
    });
    await writeFile(file, 'v: 2\n');
    await started; // the handler for v: 2 is running now, and stays so until released
    await writeFile(file, 'v: 3\n');
    watcher.trigger('SIGHUP');
    await sleep(100);
    assert.deepEqual(seen, ['v: 2\n'], 'no second check while the first handler runs');
    releaseHandler();
    const deadline = Date.now() + 3_000;
    while (seen.length < 2 && Date.now() < deadline) await sleep(10);
    await watcher.settled();
    assert.deepEqual(seen, ['v: 2\n', 'v: 3\n']);
    assert.equal(maxActive, 1);
    await watcher.close();
  });

  it('ignores events about other files in the directory (a log file, an editor swap file)', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    const checks: unknown[] = [];
    const debugLogger = createLogger('debug', {
      write(line: string) {
        const entry = JSON.parse(line) as { msg?: string; trigger?: string };
        if (entry.msg === 'watched file unchanged') checks.push(entry.trigger);
      },
    });
    const watcher = await createFileWatcher({ logger: debugLogger, quietMs: 20, pollIntervalMs: 600_000 });
    await watcher.watch({ name: 'test', paths: [file], onChange: () => assert.fail('nothing changed') });
    for (let i = 0; i < 20; i++) {
      await appendFile(join(dir, 'tollgate.log'), `line ${i}\n`);
      await writeFile(join(dir, '.upstreams.yaml.swp'), `swap ${i}`);
      await writeFile(join(dir, 'other-app.yaml'), `v: ${i}\n`);
      await sleep(5);
    }
    await sleep(200);
    await watcher.settled();
    assert.deepEqual(checks, [], 'no check ran for unrelated files');
    // The control: an event for the watched file itself does lead to a check.
    await writeFile(file, 'v: 1\n');
    const deadline = Date.now() + 3_000;
    while (checks.length === 0 && Date.now() < deadline) await sleep(10);
    assert.deepEqual(checks, ['fs.watch']);
    await watcher.close();
  });

  it('a file rewritten without pause is still checked within the max wait', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 0\n');
    // A quiet period that a write every 10 ms never leaves: only the max wait can start a check.
    const { seen, watcher } = await watchOne(file, { quietMs: 60_000, maxWaitMs: 100 });
    let writing = true;
    let written = 0;
    const writer = (async () => {
      while (writing) {
        await writeFile(file, `v: ${++written}\n`);
        await sleep(10);
      }
    })();
    const deadline = Date.now() + 5_000;
    while (seen.length < 2 && Date.now() < deadline) await sleep(10);
    writing = false;
    await writer;
    assert.ok(seen.length >= 2, `only ${seen.length} check(s) saw a change while writes went on`);
    await watcher.close();
  });

  it('reports nothing after close()', async () => {
    const dir = await tempDir();
    const file = join(dir, 'upstreams.yaml');
    await writeFile(file, 'v: 1\n');
    const { seen, watcher } = await watchOne(file, { pollIntervalMs: 50 });
    await watcher.close();
    await writeFile(file, 'v: 2\n');
    watcher.trigger('SIGHUP');
    await sleep(200);
    assert.equal(seen.length, 0);
  });
});

describe('watchFile (last-good rule)', () => {
  async function watchNumber(file: string, name = 'number_file') {
    const applied: number[] = [];
    const watcher = await createFileWatcher({ logger, quietMs: 20, pollIntervalMs: 600_000 });
    await watcher.watchFile(file, {
      name,
      parse(text) {
        const value = Number(text.trim());
        if (!Number.isInteger(value)) throw new Error('not an integer');
        return value;
      },
      apply: (value) => void applied.push(value),
    });
    return { applied, watcher };
  }

  async function counts(name: string) {
    const { values } = await configReloadsTotal.get();
    const of = (result: string) =>
      values.find((v) => v.labels.file === name && v.labels.result === result)?.value;
    return { success: of('success'), failure: of('failure') };
  }

  it('applies the file at once, then each good change; a bad one keeps the last good, counted', async () => {
    const dir = await tempDir();
    const file = join(dir, 'number');
    await writeFile(file, '1\n');
    const { applied, watcher } = await watchNumber(file, 'number_a');
    assert.deepEqual(applied, [1]);
    assert.deepEqual(await counts('number_a'), { success: 0, failure: 0 });

    const until = async (check: () => Promise<boolean> | boolean) => {
      const deadline = Date.now() + 3_000;
      while (!(await check())) {
        if (Date.now() > deadline) assert.fail('timed out');
        await sleep(10);
      }
    };
    await writeFile(file, '2\n');
    await until(() => applied.length === 2);
    assert.deepEqual(applied, [1, 2]);

    await writeFile(file, 'two\n');
    await until(async () => (await counts('number_a')).failure === 1);
    await writeFile(file, '');
    await until(async () => (await counts('number_a')).failure === 2);
    assert.deepEqual(applied, [1, 2], 'neither the unparsable nor the empty file was applied');

    await writeFile(file, '3\n');
    await until(() => applied.length === 3);
    assert.deepEqual(await counts('number_a'), { success: 2, failure: 2 });
    await watcher.close();
  });

  it('refuses to start on a missing or unparsable file, naming it', async () => {
    const dir = await tempDir();
    await assert.rejects(watchNumber(join(dir, 'missing')), /number_file .*missing: the file does not exist/);
    await writeFile(join(dir, 'bad'), 'x\n');
    await assert.rejects(watchNumber(join(dir, 'bad')), /number_file .*bad: not an integer/);
  });
});
