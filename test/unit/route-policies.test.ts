import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseByteSize } from '../../src/config/byte-size.ts';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { compileCors } from '../../src/routing/cors.ts';
import { compileSourceRanges, parseRange } from '../../src/routing/ip-ranges.ts';
import { compilePathPattern, expandReplacement, parseReplacement } from '../../src/routing/path-pattern.ts';
import { compileRoutePolicy } from '../../src/routing/policies.ts';
import { regexRouteKey } from '../../src/sources/kubernetes/ingress/policy-annotations.ts';
import { problems, valid, yaml } from '../fixtures/config/problems.ts';

/** The pure parts of the request policies (docs/policies.md); the behaviour is in route-policies.test.ts. */

const parse = (text: string) => parseUpstreamsConfig(text, 'upstreams.yaml');

describe('upstreams.yaml policy keys', () => {
  it('reads every key into PathPolicies, the global max_body_bytes beside them', () => {
    const config = valid(
      parse(yaml`
        max_body_bytes: 8m
        upstreams:
          a.test:
            paths:
              /api:
                servers: ["127.0.0.1:3000"]
                rewrite: { regex: "^/api/(.*)", replacement: /v2/$1 }
                max_body_bytes: 1024
                cors: { allow_origins: [HTTPS://App.Example.com], allow_credentials: true }
                source_ranges: [10.0.0.0/8]
                deny_ranges: ["::ffff:10.6.0.0/112"]
              /plain: { servers: ["127.0.0.1:3000"] }
      `),
    );
    assert.equal(config.maxBodyBytes, 8 * 1024 * 1024);
    const [api, plain] = config.hosts[0]?.paths ?? [];
    assert.deepEqual(api?.policies, {
      rewrite: { kind: 'regex', regex: '^/api/(.*)', replacement: '/v2/$1' },
      maxBodyBytes: 1024,
      cors: {
        allowOrigins: ['https://app.example.com'],
        allowMethods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
        allowHeaders: [],
        exposeHeaders: [],
        allowCredentials: true,
        maxAgeSeconds: null,
      },
      sourceRanges: ['10.0.0.0/8'],
      denyRanges: ['::ffff:10.6.0.0/112'],
    });
    assert.equal(plain?.policies, null, 'a path without policies has none');
    const table = compileRoutingTable(config);
    assert.equal(table.routes[0]?.policy?.maxBodyBytes, 1024);
    assert.equal(table.routes[1]?.policy?.maxBodyBytes, 8 * 1024 * 1024, 'the global limit');
    assert.equal(table.routes[1]?.policy?.cors, null);
  });

  it('refuses bad values with file:line, one line per problem', () => {
    const found = problems(
      parse(yaml`
        max_body_bytes: 8q
        upstreams:
          a.test:
            paths:
              /a:
                servers: ["127.0.0.1:3000"]
                rewrite:
                  regex: "^/(a)\\\\1"
                  replacement: /x
              /b:
                servers: ["127.0.0.1:3000"]
                rewrite: { regex: "^/b/(.*)", replacement: /x/$2 }
                cors: { allow_origins: ["*"], allow_credentials: true }
                source_ranges: [10.0.0.0/33, 300.1.1.1]
              /c:
                servers: ["127.0.0.1:3000"]
                rewrite: { prefix: /x, regex: "^/c" }
                cors: { allow_origins: ["https://example.com/path", "https://*evil.com"] }
                max_body_bytes: -1
      `),
    );
    const expect = [
      /^upstreams\.yaml:1:17: max_body_bytes: '8q' is not a size/,
      /^upstreams\.yaml:8:\d+: .*rewrite\.regex: '\^\/\(a\)\\1' is not a linear-time \(RE2\) regular expression/,
      /^upstreams\.yaml:12:\d+: .*rewrite\.replacement: names group \$2, but the pattern has 1 capture group/,
      /^upstreams\.yaml:13:\d+: .*cors: '\*' with allow_credentials/,
      /^upstreams\.yaml:14:\d+: .*source_ranges\[0\]: '10\.0\.0\.0\/33': the prefix length must be 0-32/,
      /^upstreams\.yaml:14:\d+: .*source_ranges\[1\]: '300\.1\.1\.1' is not an IP address or CIDR range/,
      /^upstreams\.yaml:17:\d+: .*rewrite: takes 'prefix', or 'regex' with 'replacement', not both/,
      /^upstreams\.yaml:18:\d+: .*cors: 'https:\/\/example\.com\/path' is not an origin/,
      /^upstreams\.yaml:18:\d+: .*cors: 'https:\/\/\*evil\.com' is not an origin/,
      /^upstreams\.yaml:19:\d+: .*max_body_bytes: -1 is out of range/,
    ];
    for (const pattern of expect)
      assert.ok(
        found.some((line) => pattern.test(line)),
        `${pattern} not among:\n${found.join('\n')}`,
      );
  });
});

describe('path patterns run in linear time', () => {
  it('a pattern that needs backtracking is refused, with the reason', () => {
    for (const source of ['(a)\\1', '(?=a)', '(?<!a)b']) {
      const compiled = compilePathPattern(source);
      assert.equal(compiled.ok, false, source);
    }
  });

  it('`^(a+)+$` against a long run of a ending in b answers at once', { timeout: 5_000 }, () => {
    const pattern = compilePathPattern('^(a+)+$');
    assert.ok(pattern.ok);
    // A backtracking engine needs 2^100000 steps for this; the test timeout bounds it.
    assert.equal(pattern.value.test(`${'a'.repeat(100_000)}b`), false);
    assert.equal(pattern.value.test('a'.repeat(100_000)), true);
  });

  it('replacements: $1, ${12}, $$; groups the pattern lacks are refused', () => {
    const pattern = compilePathPattern('^/(\\w+)/(\\w+)');
    assert.ok(pattern.ok);
    const replacement = parseReplacement('/$2/$$/${1}', pattern.value.groups);
    assert.ok(replacement.ok);
    const groups = pattern.value.exec('/one/two/three');
    assert.ok(groups !== null);
    assert.equal(expandReplacement(replacement.value, groups), '/two/$/one');
    assert.equal(parseReplacement('/$3', 2).ok, false);
    assert.equal(parseReplacement('/$x', 2).ok, false);
  });
});

describe('rewrite', () => {
  const rewrite = (config: Parameters<typeof compileRoutePolicy>[0]) => {
    const policy = compileRoutePolicy(config, null);
    assert.ok(policy?.rewrite);
    return policy.rewrite;
  };

  it('prefix: the matched key is replaced, on every kind of key', () => {
    const toV2 = rewrite({ rewrite: { kind: 'prefix', prefix: '/v2' } });
    assert.equal(toV2('/api/x/y', '/api'), '/v2/x/y');
    assert.equal(toV2('/api', '/api'), '/v2');
    assert.equal(toV2('/x', '/'), '/v2/x');
    const strip = rewrite({ rewrite: { kind: 'prefix', prefix: '/' } });
    assert.equal(strip('/api/x', '/api'), '/x');
    assert.equal(strip('/api', '/api'), '/');
  });

  it('regex: the result is normalised again, and refused when it is no valid path', () => {
    const up = rewrite({ rewrite: { kind: 'regex', regex: '^/a/(.*)', replacement: '/b/$1/../c' } });
    assert.equal(up('/a/x', '/a'), '/b/c');
    const slash = rewrite({ rewrite: { kind: 'regex', regex: '^/a/(.*)', replacement: '/%2F$1' } });
    assert.equal(slash('/a/x', '/a'), null);
    assert.equal(slash('/other', '/'), '/other', 'no match: unchanged');
  });
});

describe('cors origins', () => {
  const cors = compileCors({
    allowOrigins: ['https://app.example.com', 'https://*.example.org', 'http://*.local.test:8080'],
    allowMethods: [],
    allowHeaders: [],
    exposeHeaders: [],
    allowCredentials: true,
    maxAgeSeconds: null,
  });

  it('exact and full-match wildcard origins only', () => {
    assert.equal(cors.allowOrigin('https://app.example.com'), 'https://app.example.com');
    assert.equal(cors.allowOrigin('HTTPS://APP.example.com'), 'HTTPS://APP.example.com');
    assert.equal(cors.allowOrigin('https://a.b.example.org'), 'https://a.b.example.org');
    assert.equal(cors.allowOrigin('http://x.local.test:8080'), 'http://x.local.test:8080');
    for (const origin of [
      'https://example.org',
      'http://a.example.org',
      'https://a.example.org.evil.test',
      'https://a.example.org:444',
      'https://evil.test/.example.org',
      'https://a@b.example.org',
      'https://app.example.com.evil.test',
      'null',
      'http://x.local.test',
    ])
      assert.equal(cors.allowOrigin(origin), null, origin);
  });
});

describe('cors preflight', () => {
  it("'*' methods and headers answer with what was asked, only when it is a token list", () => {
    const cors = compileCors({
      allowOrigins: ['*'],
      allowMethods: ['*'],
      allowHeaders: ['*'],
      exposeHeaders: ['x-out'],
      allowCredentials: true,
      maxAgeSeconds: 5,
    });
    const asked = cors.preflight('PUT', 'x-a,  X-B');
    assert.equal(asked['access-control-allow-methods'], 'PUT');
    assert.equal(asked['access-control-allow-headers'], 'x-a, X-B');
    assert.equal(asked['access-control-expose-headers'], 'x-out');
    assert.equal(asked['access-control-max-age'], '5');
    const odd = cors.preflight('P UT', 'x-a, x b');
    assert.equal(odd['access-control-allow-methods'], undefined);
    assert.equal(odd['access-control-allow-headers'], undefined);
    // `*` with credentials (a Gateway API filter): the origin itself, never a literal `*`.
    assert.equal(cors.allowOrigin('https://a.test'), 'https://a.test');
  });
});

describe('source ranges', () => {
  it('deny first, allow list, IPv4-mapped addresses and ranges as IPv4', () => {
    const ranges = compileSourceRanges(
      ['10.0.0.0/8', '2001:db8::/32', '::ffff:192.0.2.0/120'],
      ['10.6.0.0/16'],
    );
    assert.ok(ranges);
    assert.equal(ranges.admits('10.1.2.3'), true);
    assert.equal(ranges.admits('::ffff:10.1.2.3'), true);
    assert.equal(ranges.admits('::ffff:a01:203'), true, 'the hex spelling of ::ffff:10.1.2.3');
    assert.equal(ranges.admits('10.6.0.1'), false);
    assert.equal(ranges.admits('::ffff:10.6.0.1'), false);
    assert.equal(ranges.admits('192.0.2.200'), true);
    assert.equal(ranges.admits('2001:db8::1'), true);
    assert.equal(ranges.admits('11.0.0.1'), false);
    assert.equal(ranges.admits(''), false, 'no address: not admitted by an allow list');
    assert.equal(compileSourceRanges([], []), null);
    const denyOnly = compileSourceRanges([], ['127.0.0.1']);
    assert.equal(denyOnly?.admits('127.0.0.2'), true);
    assert.equal(denyOnly?.admits('::ffff:127.0.0.1'), false);
  });

  it('ranges that do not parse are refused with a reason', () => {
    for (const text of ['10.0.0.0/33', 'fe80::/129', 'example.com', '10.0.0.0/x', '::ffff:10.0.0.0/64'])
      assert.equal(parseRange(text).ok, false, text);
  });
});

describe('sizes and regex route keys', () => {
  it('nginx sizes', () => {
    assert.deepEqual(parseByteSize('8m'), { ok: true, bytes: 8 * 1024 * 1024 });
    assert.deepEqual(parseByteSize('1G'), { ok: true, bytes: 1024 ** 3 });
    assert.deepEqual(parseByteSize('512k'), { ok: true, bytes: 512 * 1024 });
    assert.deepEqual(parseByteSize('0'), { ok: true, bytes: 0 });
    for (const text of ['8q', '8 mb', '-1', '', '1.5m', '2000g'])
      assert.equal(parseByteSize(text).ok, false, text);
  });

  it('a regex path is keyed by its literal start on a segment boundary', () => {
    assert.equal(regexRouteKey('/api(/|$)(.*)'), '/api');
    assert.equal(regexRouteKey('/api/(.*)'), '/api');
    assert.equal(regexRouteKey('/files/.+\\.txt'), '/files');
    assert.equal(regexRouteKey('/file.txt'), '/');
    assert.equal(regexRouteKey('/v[0-9]+/x'), '/');
    assert.equal(regexRouteKey('/plain'), '/plain');
    assert.equal(regexRouteKey('/.*'), '/');
  });
});

describe('the literal-then-rest shortcut', () => {
  it('answers as RE2 does for ^literal(.*)', () => {
    const paths = ['/api/x', '/api/', '/api', '/apix/y', '/other/api/x', '/api/a/b%20c', '/'];
    for (const source of ['^/api/(.*)', '^/api/(.*)$', '^/api(.*)', '^/(.*)']) {
      const fast = compilePathPattern(source);
      // The same pattern made unrecognisable to the shortcut, so RE2 answers it.
      const slow = compilePathPattern(`(?:${source})`);
      assert.ok(fast.ok && slow.ok);
      for (const path of paths) {
        assert.equal(fast.value.test(path), slow.value.test(path), `${source} test ${path}`);
        assert.deepEqual(
          fast.value.exec(path)?.slice() ?? null,
          slow.value.exec(path)?.slice() ?? null,
          `${source} exec ${path}`,
        );
      }
    }
  });
});
