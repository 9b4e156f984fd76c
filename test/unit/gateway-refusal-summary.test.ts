import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { refusalSummary } from '../../src/sources/kubernetes/gateway/refusal-summary.ts';

/** A route's PartiallyInvalid / UnsupportedValue message names every refused rule, bounded. */
describe('refusalSummary', () => {
  it('names every refusal up to three, then counts the rest', () => {
    assert.equal(refusalSummary(['rule 0: a']), 'rule 0: a');
    assert.equal(refusalSummary(['rule 0: a', 'rule 1: b', 'rule 2: c']), 'rule 0: a; rule 1: b; rule 2: c');
    assert.equal(
      refusalSummary(['rule 0: a', 'rule 1: b', 'rule 2: c', 'rule 3: d', 'rule 4: e']),
      'rule 0: a; rule 1: b; rule 2: c; and 2 more',
    );
  });
});
