import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CrashHistory, type RestartPolicy } from '../../src/workers/restarts.ts';

const POLICY: RestartPolicy = {
  initialDelayMs: 100,
  maxDelayMs: 1_000,
  stableAfterMs: 10_000,
  crashLoopAfter: 3,
};

describe('workers: replacing crashed workers', () => {
  it('backs off exponentially up to the maximum while crashes come in a row', () => {
    const history = new CrashHistory(POLICY);
    const delays = [0, 1, 2, 3, 4, 5].map((i) => history.crashed(i * 50));
    assert.deepEqual(delays, [100, 200, 400, 800, 1_000, 1_000]);
  });

  it('a worker that served for the stable period starts the backoff over', () => {
    const history = new CrashHistory(POLICY);
    history.crashed(0);
    history.crashed(10);
    history.serving(100);
    assert.equal(history.crashed(100 + 9_999), 400, 'not yet stable: still in a row');
    history.serving(20_000);
    assert.equal(history.crashed(30_000), 100);
  });

  it('three crashes in a row are a crash loop until a replacement keeps serving', () => {
    const history = new CrashHistory(POLICY);
    history.crashed(0);
    history.crashed(200);
    assert.equal(history.crashLooping(300), false);
    history.crashed(700);
    assert.equal(history.crashLooping(800), true);
    history.serving(1_000);
    assert.equal(history.crashLooping(5_000), true, 'serving, but not for long enough: readiness stays off');
    assert.equal(history.crashLooping(11_000), false);
  });
});
