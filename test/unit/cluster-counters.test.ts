import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const SCRIPT = fileURLToPath(new URL('../fixtures/cluster-counters-run.ts', import.meta.url));

async function runPrimaryAndWorker(...args: string[]) {
  const { stdout } = await run(process.execPath, [SCRIPT, ...args], { timeout: 60_000 });
  return (JSON.parse(stdout.trim()) as { results: Record<string, unknown> }).results;
}

describe('rate-limit counters kept by the primary for every worker (docs/workers.md)', () => {
  it('counts exactly as one process would, with one message for all the counts of one loop turn', async () => {
    const results = await runPrimaryAndWorker();
    assert.deepEqual(results.firstTurn, [
      { ok: 2 },
      { ok: 1 },
      { ok: 0 },
      { refused: true },
      { refused: true },
      { ok: 0 },
    ]);
    // Six counts asked in one turn of the worker's loop went to the primary as one message.
    assert.equal(results.sentForFirstTurn, 1);
    // get: the state of a counted key, null for an unknown one; the other limit keeps its own count.
    assert.deepEqual(results.later, [{ ok: 0 }, { ok: null }, { refused: true }]);
  });

  it('rejects (never hangs) when no primary answers, so the stage lets the request through', async () => {
    const results = await runPrimaryAndWorker('--no-primary');
    const error = { error: 'Error: no answer from the primary in time' };
    assert.deepEqual(results.firstTurn, Array(6).fill(error));
  });
});
