/**
 * docs/deployment.md holds the table of chart values that scripts/chart-values-table.ts renders from
 * values.schema.json and values.yaml: a value added, renamed or re-described without regenerating
 * the docs fails here (`npm run chart-values` fixes it).
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { DOC, END, renderValuesTable, START, withTable } from '../../scripts/chart-values-table.ts';

test('the chart values table in docs/deployment.md matches the schema and defaults', async () => {
  const doc = await readFile(DOC, 'utf8');
  const table = renderValuesTable();
  assert.equal(doc, withTable(doc, table), 'docs/deployment.md is stale: run npm run chart-values');
});

test('the table lists every leaf value with its type, default and description', () => {
  const rows = renderValuesTable().split('\n').slice(2);
  const names = rows.map((row) => /^\| `([^`]+)` \|/.exec(row)?.[1]);
  for (const expected of [
    'replicaCount',
    'masterkey.existingSecret',
    'upstreams.createSecret',
    'config.rateLimitRedisSecret.name',
    'podDisruptionBudget.enabled',
    'tests.proxy.path',
  ]) {
    assert.ok(names.includes(expected), `${expected} missing from the table`);
  }
  assert.ok(
    rows.every((row) => row.split(' | ').length === 4 && !row.endsWith('|  |')),
    'a row lacks a cell',
  );
  assert.match(rows.find((r) => r.startsWith('| `podDisruptionBudget.enabled`')) ?? '', /`"auto"`/);
});

test('the markers are required', () => {
  assert.throws(() => withTable('# no markers here', 'x'), /markers/);
  assert.equal(withTable(`a\n${START}\nold\n${END}\nb`, 'new'), `a\n${START}\nnew\n${END}\nb`);
});
