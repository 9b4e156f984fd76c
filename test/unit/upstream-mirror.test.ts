import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { drawn, MirrorBudget } from '../../src/upstream/mirror.ts';

describe('upstream/mirror: the share drawn per request and the in-flight cap', () => {
  it('draws a request when the random number falls under the share; share 1 always, share 0 never', () => {
    assert.equal(
      drawn(0.2, () => 0.19),
      true,
    );
    assert.equal(
      drawn(0.2, () => 0.2),
      false,
    );
    assert.equal(
      drawn(1, () => 0.999),
      true,
    );
    assert.equal(
      drawn(0, () => 0),
      false,
    );
  });

  it('holds a share over many draws (seeded, so never a flake)', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    let hits = 0;
    for (let i = 0; i < 10_000; i++) if (drawn(0.35, random)) hits++;
    assert.ok(hits > 3_300 && hits < 3_700, `${hits} of 10000`);
  });

  it('lets at most `limit` copies be under way; one given back makes room for one more', () => {
    const budget = new MirrorBudget(2);
    assert.equal(budget.tryTake(), true);
    assert.equal(budget.tryTake(), true);
    assert.equal(budget.tryTake(), false);
    assert.equal(budget.inFlight, 2);
    budget.give();
    assert.equal(budget.tryTake(), true);
    assert.equal(budget.tryTake(), false);
    budget.give();
    budget.give();
    budget.give();
    assert.equal(budget.inFlight, 0);
  });
});
