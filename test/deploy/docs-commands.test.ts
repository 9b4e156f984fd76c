import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ROOT } from '../helpers/tollgate.ts';
import { helm } from './manifests.ts';

/**
 * Every `helm template` command written in docs/ works as written with the helm the project ships
 * (node_modules/.bin/helm), run from the repository root: a reader who copies it gets manifests.
 */
function documentedHelmTemplates(): Array<{ file: string; args: string[] }> {
  const found: Array<{ file: string; args: string[] }> = [];
  for (const file of readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md'))) {
    const text = readFileSync(join(ROOT, 'docs', file), 'utf8').replace(/\\\n\s*/g, ' ');
    for (const block of text.matchAll(/```(?:sh|bash|shell)\n([\s\S]*?)```/g)) {
      for (const line of String(block[1]).split('\n')) {
        const command = /^(?:npx )?helm (template .*?)(?:\s+#.*)?$/.exec(line.trim());
        if (command) found.push({ file, args: String(command[1]).split(/\s+/) });
      }
    }
  }
  return found;
}

describe('helm commands in docs/', () => {
  const commands = documentedHelmTemplates();
  test('docs/ has helm template commands to check', () => {
    assert.ok(commands.length > 0);
  });
  for (const { file, args } of commands) {
    test(`docs/${file}: helm ${args.join(' ')}`, async () => {
      const result = await helm(args);
      assert.ok(result.ok, `fails with the shipped helm:\n${result.stderr}`);
      assert.match(result.stdout, /kind: Deployment/);
    });
  }
});
