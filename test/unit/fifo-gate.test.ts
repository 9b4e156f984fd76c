import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { FifoGate } from '../../src/concurrency/fifo-gate.ts';
import { createLimiter } from '../../src/sources/kubernetes/limit.ts';

/** Queues one waiter and records what it was told (null until told); `done` must run once. */
function waiter(gate: FifoGate, timeoutMs?: number): () => boolean | null {
  let outcome: boolean | null = null;
  gate.wait((entered) => {
    assert.equal(outcome, null, 'done runs once');
    outcome = entered;
  }, timeoutMs);
  return () => outcome;
}

describe('bounded FIFO gate', () => {
  it('lets `limit` in at once, then refuses tryEnter', () => {
    const gate = new FifoGate(2, 5);
    assert.equal(gate.tryEnter(), true);
    assert.equal(gate.tryEnter(), true);
    assert.equal(gate.tryEnter(), false);
    assert.equal(gate.inFlight, 2);
    gate.leave();
    assert.equal(gate.tryEnter(), true);
  });

  it('wait enters at once (synchronously) while a place is free', () => {
    const gate = new FifoGate(1, 5);
    const first = waiter(gate);
    assert.equal(first(), true);
    assert.equal(gate.waiting, 0);
  });

  it('a released place goes to the oldest waiter, in order, one per release', () => {
    const gate = new FifoGate(1, 5);
    assert.ok(gate.tryEnter());
    const a = waiter(gate);
    const b = waiter(gate);
    const c = waiter(gate);
    assert.deepEqual([a(), b(), c()], [null, null, null]);
    gate.leave();
    assert.deepEqual([a(), b(), c()], [true, null, null]);
    assert.equal(gate.inFlight, 1, 'the place went over, not back');
    gate.leave();
    assert.deepEqual([a(), b(), c()], [true, true, null]);
    gate.leave();
    assert.deepEqual([a(), b(), c()], [true, true, true]);
    gate.leave();
    assert.equal(gate.inFlight, 0);
  });

  it('tryEnter does not jump the queue while others wait', () => {
    const gate = new FifoGate(1, 5);
    assert.ok(gate.tryEnter());
    const a = waiter(gate);
    gate.leave();
    assert.equal(a(), true);
    assert.equal(gate.tryEnter(), false);
  });

  it('refuses a waiter at once when the queue is at its bound', () => {
    const gate = new FifoGate(1, 2);
    assert.ok(gate.tryEnter());
    waiter(gate);
    waiter(gate);
    const third = waiter(gate);
    assert.equal(third(), false, 'refused synchronously');
    assert.equal(gate.waiting, 2);
  });

  it('a waiter that times out leaves the queue; the next release skips it', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const gate = new FifoGate(1, 2);
      assert.ok(gate.tryEnter());
      const early = waiter(gate, 100);
      const late = waiter(gate, 1000);
      mock.timers.tick(100);
      assert.equal(early(), false);
      assert.equal(gate.waiting, 1);
      const another = waiter(gate, 1000);
      assert.equal(another(), null, 'the place it left is free again in the queue');
      gate.leave();
      assert.equal(late(), true);
      assert.equal(another(), null);
      mock.timers.tick(2000);
      assert.equal(late(), true, 'an entered waiter is never timed out');
      assert.equal(another(), false);
      assert.equal(gate.inFlight, 1);
    } finally {
      mock.timers.reset();
    }
  });

  it('without a timeout a waiter waits as long as it takes', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const gate = new FifoGate(1);
      assert.ok(gate.tryEnter());
      const patient = waiter(gate);
      mock.timers.tick(1_000_000);
      assert.equal(patient(), null);
      gate.leave();
      assert.equal(patient(), true);
    } finally {
      mock.timers.reset();
    }
  });
});

describe('status-write limiter', () => {
  it('runs at most `max` tasks at once, the rest in order, and passes results and failures through', async () => {
    const run = createLimiter(2);
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const task = (n: number) => async () => {
      started.push(n);
      running++;
      most = Math.max(most, running);
      await new Promise((resolve) => setImmediate(resolve));
      running--;
      if (n === 3) throw new Error('three');
      return n;
    };
    const results = await Promise.allSettled([1, 2, 3, 4, 5].map((n) => run(task(n))));
    assert.equal(most, 2);
    assert.deepEqual(started, [1, 2, 3, 4, 5]);
    assert.deepEqual(
      results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
      [1, 2, 'three', 4, 5],
    );
  });

  it('a task that throws synchronously frees its place', async () => {
    const run = createLimiter(1);
    await assert.rejects(
      run(() => {
        throw new Error('sync');
      }),
      /sync/,
    );
    assert.equal(await run(async () => 'next'), 'next');
  });
});
