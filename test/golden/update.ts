import { updateGoldenFiles } from './run.ts';

/**
 * `npm run golden:update`: rewrites every `<case>.out.yaml` of test/golden from today's translators.
 * Review the result with `git diff test/golden` before committing: the diff is the behaviour change.
 */
const changed = updateGoldenFiles();
for (const name of changed) console.log(`updated ${name}`);
console.log(
  changed.length === 0
    ? 'golden files: all up to date'
    : `golden files: ${changed.length} changed: review git diff test/golden`,
);
