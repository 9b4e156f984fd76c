import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { drawn, MIRRORS_IN_FLIGHT, mirrorsInFlight } from '../../src/upstream/mirror.ts';

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

  it('lets MIRRORS_IN_FLIGHT copies be under way per process; one over is refused until one ends', () => {
    for (let i = 0; i < MIRRORS_IN_FLIGHT; i++) assert.equal(mirrorsInFlight.tryEnter(), true, `copy ${i}`);
    assert.equal(mirrorsInFlight.tryEnter(), false);
    assert.equal(mirrorsInFlight.inFlight, MIRRORS_IN_FLIGHT);
    mirrorsInFlight.leave();
    assert.equal(mirrorsInFlight.tryEnter(), true);
    for (let i = 0; i < MIRRORS_IN_FLIGHT; i++) mirrorsInFlight.leave();
    assert.equal(mirrorsInFlight.inFlight, 0);
  });
});
