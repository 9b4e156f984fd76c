import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { createCheckScheduler } from '../../src/sources/check-scheduler.ts';

/** Lets the promise callbacks of a finished check run (mocked timers do not advance them). */
const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

/** A scheduler whose checks are recorded with the (mocked) time they started at. */
function recorder(options: { quietMs: number; maxWaitMs: number; checkMs?: number }) {
  const checks: Array<{ at: number; reasons: string }> = [];
  const scheduler = createCheckScheduler({
    quietMs: options.quietMs,
    maxWaitMs: options.maxWaitMs,
    check: async (reasons) => {
      checks.push({ at: Date.now(), reasons });
      if (options.checkMs) await new Promise((resolve) => setTimeout(resolve, options.checkMs));
    },
  });
  return { checks, scheduler };
}

describe('check scheduler (bounded debounce)', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 }));
  afterEach(() => mock.timers.reset());

  it('checks once after the quiet period when events stop', async () => {
    const { checks, scheduler } = recorder({ quietMs: 100, maxWaitMs: 1_000 });
    scheduler.notify('fs.watch');
    mock.timers.tick(50);
    scheduler.notify('fs.watch');
    mock.timers.tick(99);
    assert.equal(checks.length, 0, 'still inside the quiet period of the second event');
    mock.timers.tick(1);
    assert.deepEqual(checks, [{ at: 150, reasons: 'fs.watch' }]);
    await flush();
    mock.timers.tick(5_000);
    assert.equal(checks.length, 1, 'nothing more without events');
  });

  it('checks at most maxWait after the first event however many events follow', async () => {
    const { checks, scheduler } = recorder({ quietMs: 100, maxWaitMs: 500 });
    // An event every 20 ms for 2 s: the quiet period never elapses.
    for (let t = 0; t < 2_000; t += 20) {
      scheduler.notify('fs.watch');
      mock.timers.tick(20);
      await flush();
    }
    assert.deepEqual(
      checks.map((c) => c.at),
      [500, 1_000, 1_500, 2_000],
      'one check per max-wait period, each counted from the first event after the previous check',
    );
    // An event after the last check is checked after the quiet period.
    scheduler.notify('fs.watch');
    mock.timers.tick(100);
    await flush();
    assert.equal(checks.at(-1)?.at, 2_100);
    mock.timers.tick(5_000);
    assert.equal(checks.length, 5);
  });

  it('keeps the deadline of the first event while a check runs, and never overlaps checks', async () => {
    const { checks, scheduler } = recorder({ quietMs: 100, maxWaitMs: 300, checkMs: 400 });
    scheduler.notify('a');
    mock.timers.tick(100); // check 1 starts at 100 and runs until 500
    assert.equal(checks.length, 1);
    for (let t = 100; t < 450; t += 50) {
      scheduler.notify('b');
      mock.timers.tick(50);
      await flush();
    }
    // Events since 100 came due at 400 (max-wait), while check 1 still ran: check 2 follows it at once.
    mock.timers.tick(50);
    await flush();
    assert.deepEqual(
      checks.map((c) => c.at),
      [100, 500],
    );
    assert.equal(checks[1]?.reasons, 'b');
  });

  it('checkNow runs at once (poll, SIGHUP) and cancels the pending wait', async () => {
    const { checks, scheduler } = recorder({ quietMs: 100, maxWaitMs: 1_000 });
    scheduler.notify('fs.watch');
    mock.timers.tick(10);
    scheduler.checkNow('poll');
    assert.deepEqual(checks, [{ at: 10, reasons: 'fs.watch, poll' }]);
    await flush();
    mock.timers.tick(2_000);
    assert.equal(checks.length, 1, 'the pending event was covered by that check');
  });

  it('idle() resolves once nothing is pending; close() cancels what is', async () => {
    const { checks, scheduler } = recorder({ quietMs: 100, maxWaitMs: 1_000 });
    let idle = false;
    scheduler.notify('fs.watch');
    void scheduler.idle().then(() => {
      idle = true;
    });
    await flush();
    assert.equal(idle, false);
    mock.timers.tick(100);
    await flush();
    assert.equal(idle, true);

    scheduler.notify('fs.watch');
    await scheduler.close();
    mock.timers.tick(2_000);
    scheduler.notify('fs.watch');
    scheduler.checkNow('SIGHUP');
    mock.timers.tick(2_000);
    assert.equal(checks.length, 1);
  });
});
