import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type NormalisedPath, normaliseTarget } from '../../src/routing/normalise.ts';

type Reason = Extract<NormalisedPath, { ok: false }>['reason'];

/** [request target, expected normalised path] */
const normalised: [string, string][] = [
  // already clean: returned unchanged
  ['/', '/'],
  ['/a', '/a'],
  ['/a/b/c', '/a/b/c'],
  ['/a/', '/a/'],
  ['/a%20b', '/a%20b'],
  ['/caf%C3%A9', '/caf%C3%A9'],
  ["/a:b@c!$&'()*+,;=", "/a:b@c!$&'()*+,;="],
  ['/.well-known/acme', '/.well-known/acme'],
  ['/a/.b/..c/...', '/a/.b/..c/...'],
  ['/a.', '/a.'],
  // dot-segments (RFC 3986 5.2.4), never above the root
  ['/a/../b', '/b'],
  ['/a/./b/', '/a/b/'],
  ['/a/./b', '/a/b'],
  ['/../a', '/a'],
  ['/../../../../etc/passwd', '/etc/passwd'],
  ['/a/b/../../../c', '/c'],
  ['/a/b/..', '/a/'],
  ['/a/b/.', '/a/b/'],
  ['/a/..', '/'],
  ['/..', '/'],
  // parameters on ordinary segments are kept (jsessionid and matrix parameters are legitimate)
  ['/a;jsessionid=1/b', '/a;jsessionid=1/b'],
  ['/a/..b;x/c', '/a/..b;x/c'],
  ['/.', '/'],
  ['/./', '/'],
  ['/a/b/../c/./d', '/a/c/d'],
  ['/public/../admin', '/admin'],
  // repeated slashes merged
  ['//b', '/b'],
  ['//', '/'],
  ['///', '/'],
  ['/a//b', '/a/b'],
  ['/a///b//', '/a/b/'],
  ['//evil.example/x', '/evil.example/x'],
  ['/a//../b', '/b'],
  // escapes of unreserved characters decoded, then dot-segments resolved
  ['/%2e%2e/b', '/b'],
  ['/%2E%2E/b', '/b'],
  ['/a/%2e%2e/%2e%2e/b', '/b'],
  ['/a/.%2e/b', '/b'],
  ['/a/%2e/b', '/a/b'],
  ['/public/%2e%2e/admin', '/admin'],
  ['/%41bc', '/Abc'],
  ['/%61%62%63', '/abc'],
  ['/%7e%5f%2d%2E', '/~_-.'],
  ['/a%2eb', '/a.b'],
  ['/%30%39', '/09'],
  // other escapes kept, hex upper-cased
  ['/a%2a', '/a%2A'],
  ['/caf%c3%a9', '/caf%C3%A9'],
  ['/a%3a', '/a%3A'],
  ['/a%3f', '/a%3F'],
  ['/a%23b', '/a%23b'],
  ['/%25', '/%25'],
  ['/%252e%252e/x', '/%252e%252e/x'], // double-encoded: stays data, not a dot-segment
  ['/%252F', '/%252F'],
  ['/%00', '/%00'],
  ['/%2B', '/%2B'],
  // raw characters that may not appear in a path are escaped, so both spellings are one path
  ['/a b', '/a%20b'],
  ['/a"b', '/a%22b'],
  ['/<x>', '/%3Cx%3E'],
  ['/a|b^c`d{e}', '/a%7Cb%5Ec%60d%7Be%7D'],
  ['/caf\u00e9', '/caf%E9'],
  ['/\u007f', '/%7F'],
];

/** [request target, expected query] */
const queries: [string, string][] = [
  ['/a', ''],
  ['/a?', ''],
  ['/a?x=1', 'x=1'],
  ['/a?x=/../y', 'x=/../y'],
  ['/a?x=%2F&y=%zz', 'x=%2F&y=%zz'],
  ['/a?b?c', 'b?c'],
  ['/?q=a b#c', 'q=a b#c'],
  ['/a/../b?x=1', 'x=1'],
];

/** [request target, expected reason] */
const refused: [string, Reason][] = [
  ['/a%2Fb', 'encoded_slash'],
  ['/a%2fb', 'encoded_slash'],
  ['/%2F', 'encoded_slash'],
  ['/a%5Cb', 'encoded_slash'],
  ['/a%5cb', 'encoded_slash'],
  ['/..%2F..%2Fetc/passwd', 'encoded_slash'],
  ['/a\\b', 'encoded_slash'],
  ['/..\\..\\x', 'encoded_slash'],
  ['\\a', 'not_origin_form'],
  ['/a%zz', 'bad_encoding'],
  ['/a%', 'bad_encoding'],
  ['/a%2', 'bad_encoding'],
  ['/a%2?x=1', 'bad_encoding'],
  ['/a%%41', 'bad_encoding'],
  ['/a%g1', 'bad_encoding'],
  ['/a%1g', 'bad_encoding'],
  ['/a%\u0661\u0662', 'bad_encoding'], // non-ASCII digits are not hex
  ['/a#frag', 'bad_encoding'],
  ['/a\u0100', 'bad_encoding'],
  ['/\ud83d\ude00', 'bad_encoding'],
  ['http://h/x', 'not_origin_form'],
  ['https://example.com/a/../b', 'not_origin_form'],
  ['*', 'not_origin_form'],
  ['', 'not_origin_form'],
  ['a/b', 'not_origin_form'],
  ['example.com:443', 'not_origin_form'],
  ['?x=1', 'not_origin_form'],
  ['/public/..;/admin', 'dot_segment_parameters'],
  ['/public/..;jsessionid=x/admin', 'dot_segment_parameters'],
  ['/..;/admin', 'dot_segment_parameters'],
  ['/public/.;/admin', 'dot_segment_parameters'],
  ['/public/%2e%2e;/admin', 'dot_segment_parameters'],
  ['/public/%2E;x', 'dot_segment_parameters'],
];

describe('normaliseTarget: normalised paths', () => {
  for (const [target, path] of normalised) {
    it(`${JSON.stringify(target)} → ${JSON.stringify(path)}`, () => {
      assert.deepEqual(normaliseTarget(target), { ok: true, path, query: '' });
    });
  }
});

describe('normaliseTarget: query split off raw', () => {
  for (const [target, query] of queries) {
    it(`${JSON.stringify(target)} keeps query ${JSON.stringify(query)}`, () => {
      const result = normaliseTarget(target);
      assert.equal(result.ok, true);
      assert.equal(result.ok && result.query, query);
    });
  }
  it('normalises the path in front of a query', () => {
    assert.deepEqual(normaliseTarget('/a/./b//c/../d?x=/../y'), {
      ok: true,
      path: '/a/b/d',
      query: 'x=/../y',
    });
  });
  it('a query cannot smuggle an encoded slash into the path', () => {
    assert.deepEqual(normaliseTarget('/a?%2F'), { ok: true, path: '/a', query: '%2F' });
  });
});

describe('normaliseTarget: refused targets', () => {
  for (const [target, reason] of refused) {
    it(`${JSON.stringify(target)} → ${reason}`, () => {
      assert.deepEqual(normaliseTarget(target), { ok: false, reason });
    });
  }
});

describe('normaliseTarget: properties', () => {
  it('returns the very same string for an already clean target without a query', () => {
    const target = '/api/v1/users/42';
    const result = normaliseTarget(target);
    assert.ok(result.ok);
    assert.equal(result.path, target);
  });

  // A seeded generator of hostile paths, so a failure is reproducible.
  function randomTargets(count: number, seed: number): string[] {
    const pieces = [
      '/',
      '/',
      '//',
      '.',
      '..',
      '/./',
      '/../',
      'a',
      'B',
      '%2e',
      '%2E',
      '%41',
      '%7e',
      '%20',
      '%c3%a9',
    ];
    pieces.push('%25', '~', ':', '@', ' ', ';', 'é', '%2f', '%5C', '\\', '%z', '%');
    let state = seed;
    const next = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return state;
    };
    const targets: string[] = [];
    for (let n = 0; n < count; n++) {
      let target = '/';
      const length = next() % 12;
      for (let k = 0; k < length; k++) target += pieces[next() % pieces.length];
      targets.push(target);
    }
    return targets;
  }

  it('is idempotent and its output has no empty or dot segments and no encoded slash', () => {
    let accepted = 0;
    for (const target of randomTargets(5000, 7)) {
      const first = normaliseTarget(target);
      if (!first.ok) {
        const expectedRefusal =
          /%2f|%5c|\\|%(?![0-9a-f]{2})/i.test(target) || /\/(\.|%2e){1,2};/i.test(target);
        assert.ok(expectedRefusal, `${target} refused as ${first.reason}`);
        continue;
      }
      accepted++;
      const second = normaliseTarget(first.path);
      assert.deepEqual(second, { ok: true, path: first.path, query: '' }, `not idempotent for ${target}`);
      assert.ok(first.path.startsWith('/'), target);
      assert.ok(!first.path.includes('//'), `${target} → ${first.path}`);
      const segments = first.path.split('/').slice(1, -1);
      assert.ok(!segments.some((s) => s === '.' || s === '..' || s === ''), `${target} → ${first.path}`);
      const last = first.path.split('/').at(-1);
      assert.ok(last !== '.' && last !== '..', `${target} → ${first.path}`);
      assert.ok(!/%2f|%5c/i.test(first.path), `${target} → ${first.path}`);
      assert.ok(!/%[0-9A-F]?[a-f]/.test(first.path), `lower-case escape: ${target} → ${first.path}`);
    }
    assert.ok(accepted > 1000, `only ${accepted} accepted: the generator is too hostile to test much`);
  });

  it('agrees with the WHATWG URL parser on dot-segments and decoding', () => {
    // URL keeps %2e-less escapes as written and does not merge slashes, so compare on inputs where
    // both rules coincide: single slashes, upper-case escapes of reserved bytes.
    for (const target of ['/a/b/../c', '/a/./b/', '/%2e%2e/x', '/a/%2E/b', '/x/y/z/../../w', '/../../q']) {
      const url = new URL(target, 'http://h');
      const ours = normaliseTarget(target);
      assert.ok(ours.ok);
      assert.equal(ours.path, url.pathname, target);
    }
  });
});
