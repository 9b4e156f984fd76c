import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { V8_LAUNCH_FLAGS, withLaunchFlags } from '../../src/v8-launch-flags.ts';

const run = promisify(execFile);
const V8_FLAGS = fileURLToPath(new URL('../../src/v8-flags.ts', import.meta.url));
const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const REPO = (path: string) => readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)), 'utf8');

/**
 * Asks V8 to pretenure the allocation site of a fresh object (a test-only native): it answers false
 * when allocation-site pretenuring is off, true when V8 would honour it.
 */
async function pretenuringOn(withTollgateFlags: boolean): Promise<boolean> {
  const code = `${withTollgateFlags ? `import ${JSON.stringify(V8_FLAGS)};` : ''}
function make(i) { return { i, inner: { i } }; }
for (let n = 0; n < 10; n++) make(n);
process.stdout.write(String(%PretenureAllocationSite(make(1))));`;
  const { stdout } = await run(
    process.execPath,
    ['--allow-natives-syntax', '--input-type=module', '-e', code],
    {
      timeout: 60_000,
    },
  );
  return stdout.trim() === 'true';
}

describe('V8 settings of the Tollgate process (docs/benchmark.md)', () => {
  it('are the first thing the entry point loads', () => {
    const firstImport = readFileSync(MAIN, 'utf8').match(/^import\s+['"]([^'"]+)['"]/m)?.[1];
    assert.equal(firstImport, './v8-flags.ts');
  });

  it('turn allocation-site pretenuring off', async () => {
    // With it on (V8's default), sites the request path shares with startup were switched to
    // allocating in the old generation: what made young collections slow under load.
    assert.equal(await pretenuringOn(false), true, "V8's default");
    assert.equal(await pretenuringOn(true), false);
  });
});

describe('V8 launch flags (the young-generation cap, docs/benchmark.md)', () => {
  it('every way the project starts Tollgate passes them', () => {
    const flags = V8_LAUNCH_FLAGS.join(' ');
    assert.equal(V8_LAUNCH_FLAGS.length > 0, true);
    // The container image (and so the Helm chart and the Kustomize manifests, which keep its entrypoint).
    const entrypoint = REPO('Dockerfile').match(/^ENTRYPOINT (\[.*\])$/m)?.[1];
    assert.deepEqual(JSON.parse(entrypoint ?? '[]'), [
      '/nodejs/bin/node',
      ...V8_LAUNCH_FLAGS,
      '/app/dist/main.js',
    ]);
    const scripts = (JSON.parse(REPO('package.json')) as { scripts: Record<string, string> }).scripts;
    assert.match(scripts.start ?? '', new RegExp(`^node ${flags} dist/main\\.js `));
    // `./dist/main.js` and the npm bin run through the shebang.
    assert.equal(REPO('src/main.ts').split('\n')[0], `#!/usr/bin/env -S node ${flags}`);
  });

  it("are added to a worker's execArgv unless the operator set them already", () => {
    assert.deepEqual(withLaunchFlags([]), [...V8_LAUNCH_FLAGS]);
    assert.deepEqual(withLaunchFlags(['--enable-source-maps']), ['--enable-source-maps', ...V8_LAUNCH_FLAGS]);
    // An operator's own size wins, in either spelling; the flags are never given twice.
    assert.deepEqual(withLaunchFlags(['--max-semi-space-size=32']), ['--max-semi-space-size=32']);
    assert.deepEqual(withLaunchFlags(['--max_semi_space_size=2']), ['--max_semi_space_size=2']);
    assert.deepEqual(withLaunchFlags(withLaunchFlags([])), [...V8_LAUNCH_FLAGS]);
  });
});
