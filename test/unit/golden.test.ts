import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { goldenCases, orphanOutputs, renderCase } from '../golden/run.ts';

/**
 * The golden-file corpus of the Ingress and Gateway API translators (docs/architecture.md "Golden
 * files"): each case's objects are translated and compiled, and the result must be the text of its
 * `.out.yaml`, so a failure shows the diff. After an intended change: `npm run golden:update`, then
 * review `git diff test/golden`.
 */
describe('golden files: Kubernetes objects in, compiled routes, certificates and status out', () => {
  const cases = goldenCases();
  it('the corpus holds at least 60 cases, and no expected output outlives its case', () => {
    assert.ok(cases.length >= 60, `${cases.length} cases`);
    assert.deepEqual(orphanOutputs(), []);
  });
  for (const item of cases) {
    it(`${item.translator}/${item.name}`, () => {
      const actual = renderCase(item.translator, readFileSync(item.input, 'utf8'), item.name);
      let expected: string;
      try {
        expected = readFileSync(item.output, 'utf8');
      } catch {
        assert.fail(`${item.output} is missing: run npm run golden:update and review it`);
      }
      assert.equal(actual, expected);
    });
  }
});
