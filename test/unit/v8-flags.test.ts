import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const V8_FLAGS = fileURLToPath(new URL('../../src/v8-flags.ts', import.meta.url));
const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

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
