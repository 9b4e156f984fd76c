import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import { LARGE_CONFIG_BYTES, releaseParseMemory } from '../../src/config/parse-memory.ts';

/** An upstreams.yaml of `paths` prefixes under one host, like the bench's many-paths table. */
function manyPaths(paths: number): string {
  const lines = ['upstreams:', '  "bench.local":', '    paths:'];
  for (let index = 0; index < paths; index += 1) {
    lines.push(`      "/svc-${String(index).padStart(5, '0')}/api":`, '        servers: ["127.0.0.1:8080"]');
  }
  return `${lines.join('\n')}\n`;
}

describe('memory of a large config parse (docs/benchmark.md "Memory at start")', () => {
  it('gives the parse garbage back to the operating system after a large file, once', () => {
    const text = manyPaths(10_000);
    assert.ok(text.length >= LARGE_CONFIG_BYTES);
    const parsed = parseUpstreamsConfig(text, '/etc/tollgate/upstreams.yaml');
    assert.equal(parsed.ok, true);
    const before = process.memoryUsage().rss;
    assert.equal(releaseParseMemory(), true);
    const after = process.memoryUsage().rss;
    // V8 keeps freed pages resident in its pool unless a last-resort collection returns them: the
    // parse of 10,000 paths leaves well over 10 MiB of them.
    assert.ok(before - after > 10 * 1024 * 1024, `RSS ${before} → ${after}`);
    assert.equal(releaseParseMemory(), false, 'nothing parsed since');
    // The collector is borrowed without exposing a global gc() to the rest of the process.
    assert.equal((globalThis as { gc?: unknown }).gc, undefined);
  });

  it('skips the pause after a small file', () => {
    const parsed = parseUpstreamsConfig(manyPaths(10), '/etc/tollgate/upstreams.yaml');
    assert.equal(parsed.ok, true);
    assert.equal(releaseParseMemory(), false);
  });
});
