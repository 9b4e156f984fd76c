import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatScopeEntry, matchScope, parseScope, parseScopeEntry } from '../../src/auth/scope.ts';

const entry = (text: string) => {
  const parsed = parseScopeEntry(text);
  assert.ok(parsed.ok, `${text}: ${parsed.ok ? '' : parsed.message}`);
  return parsed.entry;
};

test('entries are normalised the way routes and requests are', () => {
  assert.deepEqual(entry('/reports/42'), { host: null, prefix: '/reports/42' });
  assert.deepEqual(entry('/reports/42/'), { host: null, prefix: '/reports/42' });
  assert.deepEqual(entry('/'), { host: null, prefix: '/' });
  assert.deepEqual(entry('Reports.Example.COM./a//b'), { host: 'reports.example.com', prefix: '/a/b' });
  assert.deepEqual(entry('/%7Ealice/%c3%a9'), { host: null, prefix: '/~alice/%C3%A9' });
  assert.deepEqual(entry('/é'), { host: null, prefix: '/%C3%A9' });
  assert.deepEqual(entry('[::1]/x'), { host: '::1', prefix: '/x' });
  assert.equal(formatScopeEntry(entry('[::1]/x')), '[::1]/x');
  assert.equal(formatScopeEntry(entry('Example.com/a/')), 'example.com/a');
});

test('entries that would move or widen the scope are refused with a reason', () => {
  const refused: Record<string, RegExp> = {
    '': /non-empty/,
    reports: /host\/path-prefix/,
    '/reports/42/../43': /\. or \.\. segments/,
    '/reports/./42': /\. or \.\. segments/,
    '/reports/%2e%2E/43': /\. or \.\. segments/,
    '/a%2Fb': /encoded slash/,
    '/a%5cb': /encoded slash/,
    '/a\\b': /encoded slash/,
    '/a?x=1': /\? or #/,
    '/a#x': /\? or #/,
    'example.com:8080/a': /invalid host/,
    '[::1]:80/a': /invalid host/,
    'exa mple.com/a': /invalid host/,
    '/bad%zz': /not a valid path/,
    '/\ud800': /Unicode/,
  };
  for (const [text, reason] of Object.entries(refused)) {
    const parsed = parseScopeEntry(text);
    assert.equal(parsed.ok, false, text);
    if (!parsed.ok) assert.match(parsed.message, reason, text);
  }
  assert.equal(parseScopeEntry(42).ok, false);
});

test('a scope list has 1 to 16 entries and a refusal names the entry', () => {
  assert.equal(parseScope([]).ok, false);
  assert.equal(parseScope('/a').ok, false);
  assert.equal(parseScope(Array.from({ length: 17 }, (_, i) => `/r${i}`)).ok, false);
  assert.equal(parseScope(Array.from({ length: 16 }, (_, i) => `/r${i}`)).ok, true);
  const bad = parseScope(['/ok', '/reports/42/../43']);
  assert.equal(bad.ok, false);
  if (!bad.ok) assert.match(bad.message, /^scope\[1\] '\/reports\/42\/\.\.\/43' must not contain/);
});

test('matching: segment boundary, host when given, the longest entry wins', () => {
  const scope = [entry('/reports/42'), entry('docs.example.com/guide'), entry('/reports/42/annex')];
  assert.deepEqual(matchScope(scope, 'a.example.com', '/reports/42'), scope[0]);
  assert.deepEqual(matchScope(scope, 'a.example.com', '/reports/42/page/1'), scope[0]);
  assert.deepEqual(matchScope(scope, 'a.example.com', '/reports/42/annex/x'), scope[2]);
  assert.equal(matchScope(scope, 'a.example.com', '/reports/420'), null);
  assert.equal(matchScope(scope, 'a.example.com', '/reports/4'), null);
  assert.equal(matchScope(scope, 'a.example.com', '/reports'), null);
  assert.deepEqual(matchScope(scope, 'docs.example.com', '/guide/intro'), scope[1]);
  assert.equal(matchScope(scope, 'other.example.com', '/guide/intro'), null);
  assert.deepEqual(matchScope([entry('/')], 'x', '/anything'), { host: null, prefix: '/' });
});
