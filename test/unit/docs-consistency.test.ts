import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ERRORS } from '../../src/errors.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const DOCS = join(ROOT, 'docs');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** `| \`code\` | 401 | …` rows of the catalogue table in docs/errors.md. */
function documentedErrors(): Map<string, number> {
  const rows = new Map<string, number>();
  for (const match of read('docs/errors.md').matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)) {
    rows.set(String(match[1]), Number(match[2]));
  }
  return rows;
}

/**
 * Every key a validator accepts. The convention in src/config is that each mapping's keys are declared
 * once as `const SOMETHING_KEYS = [...]` and handed to the reader; a key list declared any other way
 * would escape this check, which is why the convention is stated here.
 */
function acceptedConfigKeys(): Set<string> {
  const keys = new Set<string>();
  const dirs = ['src/config', ...(existsSync(join(ROOT, 'src/sources')) ? ['src/sources'] : [])];
  for (const dir of dirs) {
    for (const file of readdirSync(join(ROOT, dir), { recursive: true }) as string[]) {
      if (!file.endsWith('.ts')) continue;
      const source = read(join(dir, file));
      for (const list of source.matchAll(/const [A-Z_]*KEYS\s*(?::[^=]+)?=\s*\[([^\]]*)\]/g)) {
        for (const key of String(list[1]).matchAll(/'([a-z_][a-z0-9_]*)'/g)) keys.add(String(key[1]));
      }
    }
  }
  return keys;
}

function markdownFiles(): string[] {
  return [
    join(ROOT, 'README.md'),
    ...readdirSync(DOCS)
      .filter((f) => f.endsWith('.md'))
      .map((f) => join(DOCS, f)),
  ];
}

describe('docs agree with the code', () => {
  it('the error catalogue in docs/errors.md lists exactly the codes and statuses of ERRORS', () => {
    const documented = documentedErrors();
    const inCode = new Map(Object.entries(ERRORS).map(([code, { status }]) => [code, status as number]));
    assert.deepEqual(
      [...documented.entries()].sort(),
      [...inCode.entries()].sort(),
      'docs/errors.md and src/errors.ts disagree',
    );
  });

  it('every config key the validators accept is documented in docs/configuration.md', () => {
    const reference = read('docs/configuration.md');
    const keys = acceptedConfigKeys();
    assert.ok(keys.size > 20, `found only ${keys.size} keys: the *_KEYS convention is no longer followed`);
    const missing = [...keys].filter(
      (key) => !reference.includes(`\`${key}\``) && !reference.includes(`.${key}\``),
    );
    assert.deepEqual(missing, [], `undocumented config keys: ${missing.join(', ')}`);
  });

  it('every relative link in README.md and docs/ points at a file that exists', () => {
    const broken: string[] = [];
    for (const file of markdownFiles()) {
      const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = String(match[1]).split('#')[0] ?? '';
        if (target === '' || /^[a-z]+:/.test(target)) continue;
        if (!existsSync(resolve(dirname(file), target)))
          broken.push(`${file.slice(ROOT.length + 1)} → ${match[1]}`);
      }
    }
    assert.deepEqual(broken, []);
  });

  it('code and docs cite docs/ pages, never issue numbers or files outside the repository', () => {
    // Built from parts so that this file does not match itself.
    const citation = new RegExp(
      ['BEHAV' + 'IOUR', '[Ii]ss' + 'ue [0-9]', 'se' + 'ed (§|spec)', '\\.\\./sha' + 'red/'].join('|'),
    );
    const offenders: string[] = [];
    const scan = (dir: string) => {
      for (const file of readdirSync(join(ROOT, dir), { recursive: true }) as string[]) {
        if (!/\.(ts|md|ya?ml|sh|tpl|json)$/.test(file) || file.includes('node_modules')) continue;
        const lines = read(join(dir, file)).split('\n');
        for (const [i, line] of lines.entries()) {
          if (citation.test(line)) offenders.push(`${dir}/${file}:${i + 1}: ${line.trim()}`);
        }
      }
    };
    for (const dir of ['src', 'test', 'bench', 'scripts', 'deploy', 'docs', 'examples']) scan(dir);
    assert.deepEqual(offenders, []);
  });

  it('every table renders whole: no row cut off by a blank line, no row given twice', () => {
    const offenders: string[] = [];
    for (const file of markdownFiles()) {
      const lines = readFileSync(file, 'utf8').split('\n');
      let fenced = false;
      let rows = new Set<string>();
      lines.forEach((line, index) => {
        if (line.startsWith('```')) fenced = !fenced;
        if (fenced || !line.startsWith('|')) {
          rows = new Set();
          return;
        }
        const where = `${file.slice(ROOT.length + 1)}:${index + 1}`;
        // A row after a blank line starts a new table, which needs its header separator next.
        const startsTable = !(lines[index - 1] ?? '').startsWith('|');
        if (startsTable && !/^\|\s*:?-{3}/.test(lines[index + 1] ?? ''))
          offenders.push(`${where}: a table row outside any table (a blank line above it?)`);
        // Rows are told apart by their first cell (the key, file or name the row is about).
        const first = line.split(/(?<!\\)\|/)[1]?.trim() ?? '';
        if (/^:?-{3}/.test(first)) return;
        if (rows.has(first)) offenders.push(`${where}: ${first} has two rows in one table`);
        rows.add(first);
      });
    }
    assert.deepEqual(offenders, []);
  });

  it('the README stays short: what Tollgate is, the two commands, a minimal config and links', () => {
    const lines = read('README.md').split('\n').length;
    assert.ok(lines < 200, `README.md has ${lines} lines; move detail into docs/`);
    assert.match(read('README.md'), /npm test/);
  });
});
