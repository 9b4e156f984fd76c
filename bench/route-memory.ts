/**
 * Memory and build time of the compiled routing table for the bench's large tables (20,000 paths
 * under one host, 5,000 hosts): the validated config is parsed first, then the heap is measured
 * around compileRoutingTable alone, with a full garbage collection before each reading. Run by
 * `npm run bench` in a child process with --expose-gc; prints one JSON line.
 *
 * Usage: node --expose-gc bench/route-memory.ts many-paths|many-hosts|one-path (one table per process,
 * so nothing left over from another table is counted).
 */
import { parseUpstreamsConfig } from '../src/config/load.ts';
import { compileRoutingTable } from '../src/routing/compile.ts';
import { scanMatcher } from '../src/routing/match.ts';
import { manyHostsRequest, manyHostsYaml, manyPathsRequest, manyPathsYaml } from './tollgate.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');

/**
 * heapUsed after full collections. Awaits a turn of the event loop first: objects reached through a
 * WeakRef during the current job stay alive until it ends, which would count parser leftovers here.
 */
async function heapAfterGc(): Promise<number> {
  await new Promise((resolve) => setImmediate(resolve));
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

interface TableMemory {
  routes: number;
  /** Heap held by the compiled table (routes, servers, lookup maps), the parsed config excluded. */
  tableBytes: number;
  /** Heap held by the parsed, validated config the table is compiled from. */
  configBytes: number;
  compileMs: number;
  /** Median time of one lookup over many (a path in the middle of the table). */
  lookupNs: number;
  /** The same with the linear longest-prefix scan the lookup replaced (routing/match scanMatcher). */
  scanLookupNs: number;
}

function lookupNs(match: (host: string, path: string) => unknown, host: string, path: string): number {
  // Each sample runs batches of 16 lookups until 2,048 lookups or 5 ms, whichever comes first: the
  // linear scan of 20,000 prefixes takes about a millisecond a lookup, and the bench must stay bounded.
  const samples: number[] = [];
  for (let sample = 0; sample < 21; sample += 1) {
    const from = process.hrtime.bigint();
    let lookups = 0;
    let elapsed = 0n;
    do {
      for (let batch = 0; batch < 16; batch += 1) match(host, path);
      lookups += 16;
      elapsed = process.hrtime.bigint() - from;
    } while (lookups < 2_048 && elapsed < 5_000_000n);
    samples.push(Number(elapsed) / lookups);
  }
  samples.sort((a, b) => a - b);
  return Number((samples[10] ?? Number.NaN).toFixed(1));
}

async function measure(
  lines: string[],
  { host, path }: { host: string; path: string },
): Promise<TableMemory> {
  const text = `${lines.join('\n')}\n`;
  const before = await heapAfterGc();
  const parsed = parseUpstreamsConfig(text, '/bench/upstreams.yaml');
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues.slice(0, 3)));
  const withConfig = await heapAfterGc();
  const started = process.hrtime.bigint();
  const table = compileRoutingTable(parsed.value);
  const compileMs = Number(process.hrtime.bigint() - started) / 1e6;
  const withTable = await heapAfterGc();
  if (table.match(host, path) === null) throw new Error(`no route for ${host}${path}`);
  return {
    routes: table.routes.length,
    tableBytes: withTable - withConfig,
    configBytes: withConfig - before,
    compileMs: Number(compileMs.toFixed(1)),
    lookupNs: lookupNs(table.match, host, path),
    scanLookupNs: lookupNs(scanMatcher(table.routes), host, path),
  };
}

const server = '"127.0.0.1:8080"';
const which = process.argv[2];
const result =
  which === 'many-paths'
    ? await measure(manyPathsYaml(server), manyPathsRequest())
    : which === 'many-hosts'
      ? await measure(manyHostsYaml(server), manyHostsRequest())
      : which === 'one-path'
        ? await measure(
            ['upstreams:', '  "bench.local":', '    paths:', '      "/":', `        servers: [${server}]`],
            { host: 'bench.local', path: '/' },
          )
        : null;
if (result === null) throw new Error('usage: route-memory.ts many-paths|many-hosts|one-path');
process.stdout.write(`${JSON.stringify(result)}\n`);
