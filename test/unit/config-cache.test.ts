import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseMainConfig, parseUpstreamsConfig } from '../../src/config/load.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { problems, valid, yaml } from '../fixtures/config/problems.ts';

/** The response cache's keys (docs/configuration.md, docs/traffic.md#response-cache). */

const parse = (text: string) => parseUpstreamsConfig(text, 'upstreams.yaml');

describe('cache keys', () => {
  it('reads a path cache with its defaults, sizes in bytes or nginx units', () => {
    const config = valid(
      parse(yaml`
        upstreams:
          a.test:
            paths:
              /docs:
                servers: ["127.0.0.1:3000"]
                cache: { max_bytes: 64m }
              /api:
                servers: ["127.0.0.1:3000"]
                cache: { max_bytes: 1048576, max_object_bytes: 8k, default_ttl_seconds: 30 }
              /small:
                servers: ["127.0.0.1:3000"]
                cache: { max_bytes: 4k }
              /none: { servers: ["127.0.0.1:3000"] }
      `),
    );
    const table = compileRoutingTable(config);
    const cacheOf = (prefix: string) => table.routes.find((route) => route.prefix === prefix)?.policy?.cache;
    assert.deepEqual(cacheOf('/docs'), {
      maxBytes: 64 * 1024 ** 2,
      maxObjectBytes: 1024 ** 2,
      defaultTtlSeconds: 0,
    });
    assert.deepEqual(cacheOf('/api'), {
      maxBytes: 1024 ** 2,
      maxObjectBytes: 8 * 1024,
      defaultTtlSeconds: 30,
    });
    // The default max_object_bytes never exceeds the store it goes into.
    assert.equal(cacheOf('/small')?.maxObjectBytes, 4096);
    assert.equal(cacheOf('/none'), undefined);
  });

  it('refuses bad values with file:line, one line per problem', () => {
    const found = problems(
      parse(yaml`
        upstreams:
          a.test:
            paths:
              /a:
                servers: ["127.0.0.1:3000"]
                cache: { max_object_bytes: 1k }
              /b:
                servers: ["127.0.0.1:3000"]
                cache: { max_bytes: 64q }
              /c:
                servers: ["127.0.0.1:3000"]
                cache: { max_bytes: 1k, max_object_bytes: 2k }
              /d:
                servers: ["127.0.0.1:3000"]
                cache: { max_bytes: 0, default_ttl_seconds: -1, ttl: 5 }
              /e:
                servers: ["127.0.0.1:3000"]
                cache: true
      `),
    );
    const expect = [
      /^upstreams\.yaml:6:\d+: .*cache: missing 'max_bytes'/,
      /^upstreams\.yaml:9:\d+: .*cache\.max_bytes: '64q' is not a size/,
      /^upstreams\.yaml:12:\d+: .*cache\.max_object_bytes: 2048 bytes is more than max_bytes \(1024\)/,
      /^upstreams\.yaml:15:\d+: .*ttl/,
      /^upstreams\.yaml:18:\d+: .*cache: expected \{ max_bytes, max_object_bytes, default_ttl_seconds \}/,
    ];
    for (const pattern of expect)
      assert.ok(
        found.some((line) => pattern.test(line)),
        `${pattern} not among:\n${found.join('\n')}`,
      );
  });

  it("main.yaml's cache.max_bytes: read, and refused when missing or not a size", () => {
    assert.deepEqual(valid(parseMainConfig('cache: { max_bytes: 256m }\n', '/etc/main.yaml')).cache, {
      maxBytes: 256 * 1024 ** 2,
    });
    assert.equal(valid(parseMainConfig('', '/etc/main.yaml')).cache, undefined);
    const missing = problems(parseMainConfig('cache: {}\n', '/etc/main.yaml'));
    assert.match(missing.join('\n'), /main\.yaml:1:\d+: .*cache: missing 'max_bytes'/);
    const bad = problems(parseMainConfig('cache:\n  max_bytes: lots\n', '/etc/main.yaml'));
    assert.match(bad.join('\n'), /main\.yaml:2:\d+: .*cache\.max_bytes: 'lots' is not a size/);
  });
});
