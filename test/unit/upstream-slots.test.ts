import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { type QueueOutcome, ServerSlots } from '../../src/upstream/slots.ts';

const limits = { perServer: 3, perRoute: 2, queueSize: 2, queueTimeoutMs: 1000 };

function waiter(slots: ServerSlots, route: string): { outcome: () => QueueOutcome | null } {
  let outcome: QueueOutcome | null = null;
  slots.wait(route, (result) => {
    assert.equal(outcome, null, 'done runs once');
    outcome = result;
  });
  return { outcome: () => outcome };
}

describe('connection slots of one upstream server', () => {
  it('a route gets at most its share; other routes use the rest of the server', () => {
    const slots = new ServerSlots(limits);
    assert.ok(slots.tryAcquire('a'));
    assert.ok(slots.tryAcquire('a'));
    assert.equal(slots.tryAcquire('a'), null, 'route a is at its share');
    assert.ok(slots.tryAcquire('b'));
    assert.equal(slots.tryAcquire('c'), null, 'the server is full');
    assert.equal(slots.inUse, 3);
  });

  it('a freed slot goes to the oldest waiter that fits; one at its route share lets others pass', () => {
    const slots = new ServerSlots(limits);
    const a1 = slots.tryAcquire('a') as () => void;
    slots.tryAcquire('a');
    const b1 = slots.tryAcquire('b') as () => void;
    const waitingA = waiter(slots, 'a');
    const waitingB = waiter(slots, 'b');
    b1();
    assert.equal(waitingA.outcome(), null, 'a is still at its share');
    assert.equal(waitingB.outcome()?.ok, true);
    a1();
    assert.equal(waitingA.outcome()?.ok, true);
    a1(); // a second release does nothing
    assert.equal(slots.inUse, 3);
  });

  it('a full queue refuses at once; a waiter past the timeout is refused and leaves the queue', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const slots = new ServerSlots({ ...limits, perServer: 1 });
      slots.tryAcquire('a');
      const first = waiter(slots, 'a');
      const second = waiter(slots, 'b');
      const third = waiter(slots, 'c');
      assert.deepEqual(third.outcome(), { ok: false, reason: 'queue_full' });
      mock.timers.tick(999);
      assert.equal(first.outcome(), null);
      mock.timers.tick(1);
      assert.deepEqual(first.outcome(), { ok: false, reason: 'queue_timeout' });
      assert.deepEqual(second.outcome(), { ok: false, reason: 'queue_timeout' });
      assert.equal(slots.waiting, 0);
    } finally {
      mock.timers.reset();
    }
  });

  it('drain refuses every waiter (server removed, shutdown)', () => {
    const slots = new ServerSlots({ ...limits, perServer: 1 });
    slots.tryAcquire('a');
    const waiting = waiter(slots, 'b');
    slots.drain();
    assert.equal(waiting.outcome()?.ok, false);
    assert.equal(slots.waiting, 0);
  });
});
