import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { valid } from '../fixtures/config/problems.ts';

/**
 * Validation and compile must do work proportional to the file: a reload runs on the event loop, so a
 * quadratic step (each path compared with every other one) stalls the proxy for seconds with tens of
 * thousands of paths. Timing that would be flaky on a loaded machine, so these tests count work
 * instead: every element visited by an array scan (`for…of`, spread, `some`, `find`, `includes`,
 * `indexOf`, `filter`…) and every sort comparison, during a real parse, validate and compile. The
 * YAML parser's own work is counted too, which is fine: it is linear. A duplicate check that scans
 * the earlier paths for each path makes the count grow with the square of the file size.
 */

function upstreamsWith(hosts: number, pathsPerHost: number): string {
  const lines = ['upstreams:'];
  for (let h = 0; h < hosts; h++) {
    lines.push(`  host-${h}.example.com:`, '    paths:');
    for (let p = 0; p < pathsPerHost; p++) {
      lines.push(`      "/api/v${p}/":`, `        servers: ["10.0.${h % 250}.${p % 250}:8080"]`);
    }
  }
  return `${lines.join('\n')}\n`;
}

const SCANS = ['some', 'every', 'find', 'findIndex', 'findLast', 'includes', 'indexOf', 'lastIndexOf'];
const PASSES = ['filter', 'map', 'forEach', 'reduce', 'flatMap', 'join', 'slice', 'concat'];

/** Runs `work` with array scans counted; returns the number of elements visited. */
function countArrayWork(work: () => void): number {
  const proto = Array.prototype as unknown as Record<PropertyKey, unknown>;
  const saved = new Map<PropertyKey, unknown>();
  let visited = 0;
  const wrap = (name: PropertyKey, replacement: (original: (...args: unknown[]) => unknown) => unknown) => {
    const original = proto[name] as (...args: unknown[]) => unknown;
    saved.set(name, original);
    proto[name] = replacement(original);
  };
  try {
    for (const name of [...SCANS, ...PASSES]) {
      wrap(
        name,
        (original) =>
          function (this: unknown[], ...args: unknown[]) {
            visited += this.length; // an upper bound on what the call looks at
            return original.apply(this, args);
          },
      );
    }
    wrap(
      'sort',
      (original) =>
        function (this: unknown[], compare?: (a: unknown, b: unknown) => number) {
          const counted = (a: unknown, b: unknown) => {
            visited++;
            return compare ? compare(a, b) : String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
          };
          return original.call(this, counted);
        },
    );
    wrap(
      Symbol.iterator,
      (original) =>
        function (this: unknown[]) {
          const iterator = original.call(this) as Iterator<unknown>;
          return {
            next() {
              visited++;
              return iterator.next();
            },
            [Symbol.iterator]() {
              return this;
            },
          };
        },
    );
    work();
  } finally {
    for (const [name, original] of saved) proto[name] = original;
  }
  return visited;
}

function validateAndCompile(text: string): void {
  const config = valid(parseUpstreamsConfig(text, 'upstreams.yaml'));
  const table = compileRoutingTable(config);
  assert.ok(table.routes.length > 0);
}

describe('validation and compile do linear work', () => {
  it('20,000 paths under one host cost at most ~4x the work of 5,000', () => {
    const small = countArrayWork(() => validateAndCompile(upstreamsWith(1, 5_000)));
    const large = countArrayWork(() => validateAndCompile(upstreamsWith(1, 20_000)));
    // 4x the input: linear work is 4x (sorting adds a little), quadratic work 16x.
    assert.ok(large / small < 5, `work grew ${(large / small).toFixed(2)}x for 4x the paths`);
  });

  it('4,000 hosts cost at most ~4x the work of 1,000', () => {
    const small = countArrayWork(() => validateAndCompile(upstreamsWith(1_000, 1)));
    const large = countArrayWork(() => validateAndCompile(upstreamsWith(4_000, 1)));
    assert.ok(large / small < 5, `work grew ${(large / small).toFixed(2)}x for 4x the hosts`);
  });

  it('the counter sees a quadratic duplicate check (so the tests above can fail)', () => {
    const prefixes = (n: number) => Array.from({ length: n }, (_, i) => `/p${i}`);
    const quadratic = (list: string[]) => {
      const seen: string[] = [];
      for (const prefix of list) {
        if (seen.some((earlier) => earlier === prefix)) throw new Error('duplicate');
        seen.push(prefix);
      }
    };
    const small = countArrayWork(() => quadratic(prefixes(500)));
    const large = countArrayWork(() => quadratic(prefixes(2_000)));
    assert.ok(large / small > 10, `a quadratic scan grew only ${(large / small).toFixed(2)}x`);
  });
});
