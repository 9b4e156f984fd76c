import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  ANNOTATIONS,
  NGINX_PREFIX,
  readAnnotations,
} from '../../src/sources/kubernetes/ingress/annotations.ts';
import { ROOT } from '../helpers/tollgate.ts';

/**
 * docs/ingress.md "Every ingress-nginx annotation" says, for each annotation, whether Tollgate reads
 * it, ignores it with a warning or closes the paths. This checks each row against what
 * readAnnotations really does, so the table cannot drift from the code.
 */

// Read by the request-side policies (rewrite, body size, CORS, source ranges), implemented beside
// this table on another branch: listed as supported before this branch's code reads them.
const REQUEST_SIDE = new Set([
  'app-root',
  'rewrite-target',
  'use-regex',
  'x-forwarded-prefix',
  'proxy-body-size',
  'enable-cors',
  'cors-allow-origin',
  'cors-allow-methods',
  'cors-allow-headers',
  'cors-allow-credentials',
  'cors-max-age',
  'cors-expose-headers',
  'whitelist-source-range',
  'denylist-source-range',
]);

function tableRows(): Array<{ name: string; supported: string }> {
  const text = readFileSync(join(ROOT, 'docs', 'ingress.md'), 'utf8');
  const section = text.slice(text.indexOf('## Every ingress-nginx annotation'));
  return [...section.matchAll(/^\| `([a-z0-9-]+)` \| ([^|]+) \|/gm)].map((match) => ({
    name: match[1] as string,
    supported: (match[2] as string).trim(),
  }));
}

describe('docs/ingress.md: the ingress-nginx annotation table matches the code', () => {
  const rows = tableRows();
  const read = new Set(
    ANNOTATIONS.flatMap((entry) => entry.names)
      .filter((name) => name.startsWith(NGINX_PREFIX))
      .map((name) => name.slice(NGINX_PREFIX.length)),
  );

  it('lists every annotation once, and every one the code reads', () => {
    assert.ok(rows.length >= 130, `only ${rows.length} rows`);
    assert.equal(new Set(rows.map((row) => row.name)).size, rows.length, 'a row is listed twice');
    const listed = new Set(rows.map((row) => row.name));
    for (const name of read) assert.ok(listed.has(name), `${name} is read but not in the table`);
  });

  it('"yes" rows are read, "ignored" rows only warn, "closes the paths" rows close them', () => {
    for (const { name, supported } of rows) {
      const full = `${NGINX_PREFIX}${name}`;
      if (supported.startsWith('yes')) {
        assert.ok(read.has(name) || REQUEST_SIDE.has(name), `${name} is marked supported but not read`);
        continue;
      }
      assert.ok(
        !read.has(name) || supported.startsWith('accepted'),
        `${name} is read but marked '${supported}'`,
      );
      if (supported.startsWith('accepted')) continue;
      const outcome = readAnnotations({ [full]: 'some-value' });
      if (supported === 'ignored') {
        assert.deepEqual(outcome.problems, [], name);
        assert.deepEqual(outcome.authProblems, [], name);
        assert.equal(outcome.warnings.length, 1, `${name} should be warned about`);
        assert.match(outcome.warnings[0] as string, new RegExp(`${name} ignored`));
      } else {
        assert.equal(supported, 'closes the paths', name);
        assert.equal(outcome.authProblems.length, 1, `${name} should close the paths`);
      }
    }
  });
});
