import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Giving back the memory a large config's parse took (docs/benchmark.md "Memory at start").
 *
 * Parsing upstreams.yaml with positions (the `yaml` package's token stream, CST and Document) makes
 * several times the file's size in short-lived objects: for 20,000 paths (1.2 MB of YAML) V8's heap
 * grows by about 100 MB for a document that keeps about 30 MB alive. Collecting that garbage is not
 * enough: V8 keeps the freed pages resident in its page pool for reuse, so the process would keep the
 * parse's high-water RSS for good. Only a "last resort" full collection hands the pooled pages back
 * to the operating system; it pauses the event loop for one or a few full collections, so it runs
 * once, at start, and only after a large file.
 */

/** Config texts from this size on leave enough pooled pages behind to be worth the pause. */
export const LARGE_CONFIG_BYTES = 256 * 1024;

let largeParseSinceRelease = false;

/** Called by the loader for each upstreams.yaml parsed. */
export function noteConfigParsed(textLength: number): void {
  if (textLength >= LARGE_CONFIG_BYTES) largeParseSinceRelease = true;
}

/**
 * After the next turn of the event loop (the parse's reader and document are unreachable by then,
 * and start has compiled the table), collects everything and returns the pooled pages, if a large
 * file was parsed since the last time.
 */
export function releaseParseMemorySoon(): void {
  if (!largeParseSinceRelease) return;
  setImmediate(releaseParseMemory).unref();
}

/** Does it now; true when a collection ran. */
export function releaseParseMemory(): boolean {
  if (!largeParseSinceRelease) return false;
  largeParseSinceRelease = false;
  fullCollector()({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return true;
}

type Collector = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;
let collector: Collector | null = null;

/**
 * V8's `gc` function, without `--expose-gc` on the command line: the flag set at run time exposes it
 * in contexts made afterwards (one throwaway context here), and is turned off again at once so no
 * other code sees a global `gc`.
 */
function fullCollector(): Collector {
  if (collector !== null) return collector;
  const exposed = (globalThis as { gc?: Collector }).gc;
  if (exposed !== undefined) collector = exposed;
  else {
    setFlagsFromString('--expose-gc');
    try {
      collector = runInNewContext('gc') as Collector;
    } finally {
      setFlagsFromString('--no-expose-gc');
    }
  }
  return collector;
}
