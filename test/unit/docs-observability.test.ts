import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

/**
 * docs/ and the code name the same metrics and log events (docs/observability.md): an operator who
 * greps for a documented event or graphs a documented metric finds it, and a metric added in code
 * is documented. Failure messages say exactly what to add where.
 */

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const OBSERVABILITY = 'docs/observability.md';

function filesUnder(dir: string, ext: string): string[] {
  return (readdirSync(join(ROOT, dir), { recursive: true }) as string[])
    .filter((name) => name.endsWith(ext))
    .map((name) => join(dir, name));
}
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const sources = () => filesUnder('src', '.ts').map((path) => ({ path, text: read(path) }));
const docs = () => ['README.md', ...filesUnder('docs', '.md')].map((path) => ({ path, text: read(path) }));

/**
 * Metric name → the source file registering it: `name: 'tollgate_…'`, or `name: SOME_CONST` with
 * `SOME_CONST = 'tollgate_…'` declared in src/.
 */
function metricsInCode(): Map<string, string> {
  const found = new Map<string, string>();
  const constants = new Map<string, string>();
  const all = sources();
  for (const { text } of all) {
    for (const match of text.matchAll(/\bconst ([A-Z][A-Z0-9_]*)\s*=\s*'(tollgate_[a-z0-9_]+)'/g)) {
      constants.set(String(match[1]), String(match[2]));
    }
  }
  for (const { path, text } of all) {
    for (const match of text.matchAll(/\bname:\s*'(tollgate_[a-z0-9_]+)'/g))
      found.set(String(match[1]), path);
    for (const match of text.matchAll(/\bname:\s*([A-Z][A-Z0-9_]*)\b/g)) {
      const name = constants.get(String(match[1]));
      if (name !== undefined) found.set(name, path);
    }
  }
  return found;
}

/** Every string literal of src/ (a documented `tollgate_…` name may be a cookie, not a metric). */
function literalsInCode(): Set<string> {
  const literals = new Set<string>();
  for (const { text } of sources()) {
    for (const match of text.matchAll(/'([a-z0-9_]+)'/g)) literals.add(String(match[1]));
  }
  return literals;
}

/** Event names the code logs: `event: '…'` and the file watcher's `events: { applied, rejected }`. */
function eventsInCode(): Set<string> {
  const events = new Set<string>();
  for (const { text } of sources()) {
    for (const match of text.matchAll(/\bevent:\s*'([a-z0-9_]+)'/g)) events.add(String(match[1]));
    for (const match of text.matchAll(/\bevents:\s*\{([^}]*)\}/g)) {
      for (const name of String(match[1]).matchAll(/'([a-z0-9_]+)'/g)) events.add(String(name[1]));
    }
  }
  return events;
}

/**
 * Where docs name log events: `"event":"…"`, the backticked names of observability.md's "Other
 * events:" list, and names a runbook greps for (`grep <name>`, `grep '"event":"<name>"'`).
 */
function eventsInDocs(): Array<{ event: string; path: string }> {
  const found: Array<{ event: string; path: string }> = [];
  for (const { path, text } of docs()) {
    for (const match of text.matchAll(/"event"\s*:\s*"([a-z0-9_]+)"/g))
      found.push({ event: String(match[1]), path });
    for (const match of text.matchAll(/\bgrep\s+(?:-\w+\s+)*'?([a-z][a-z0-9]*_[a-z0-9_]+)'?/g)) {
      found.push({ event: String(match[1]), path });
    }
  }
  const list = /Other events: ([\s\S]*?)\(field `event`\)/.exec(read(OBSERVABILITY));
  assert.ok(list, `${OBSERVABILITY} has lost its "Other events: … (field \`event\`)" list`);
  // Parentheses explain an event (its fields); only the names outside them are events.
  for (const match of String(list[1])
    .replace(/\([^)]*\)/g, '')
    .matchAll(/`([a-z0-9_]+)`/g)) {
    found.push({ event: String(match[1]), path: OBSERVABILITY });
  }
  return found;
}

/** Backticked metric names in the first column of observability.md's metrics table. */
function metricsInTable(): Set<string> {
  const rows = new Set<string>();
  for (const match of read(OBSERVABILITY).matchAll(/^\| `(tollgate_[a-z0-9_]+)` \|/gm))
    rows.add(String(match[1]));
  return rows;
}

/** A histogram's series carry suffixes; docs' queries may use them. */
const baseMetric = (name: string, known: Map<string, string>) =>
  known.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');

describe('docs and code name the same metrics and log events', () => {
  it('every metric registered in src/ has a row in the metrics table of docs/observability.md', () => {
    const table = metricsInTable();
    const missing = [...metricsInCode()].filter(([name]) => !table.has(name));
    assert.deepEqual(
      missing.map(
        ([name, path]) =>
          `${name} (registered in ${path}): add a row "| \`${name}\` | <type> | <labels> |" to the metrics table of ${OBSERVABILITY}`,
      ),
      [],
    );
  });

  it('every tollgate_… name in README.md and docs/ is a metric the code registers (or a literal it uses)', () => {
    const metrics = metricsInCode();
    const literals = literalsInCode();
    const unknown: string[] = [];
    for (const { path, text } of docs()) {
      for (const match of text.matchAll(/\btollgate_[a-z0-9_]+/g)) {
        const name = baseMetric(match[0], metrics);
        if (!metrics.has(name) && !literals.has(match[0])) unknown.push(`${path}: ${match[0]}`);
      }
    }
    assert.deepEqual(
      [...new Set(unknown)].map(
        (entry) =>
          `${entry} is not registered in src/ (no "name: '…'" of a metric): fix the name in the doc or register it`,
      ),
      [],
    );
  });

  it('every log event named in docs/ is logged by the code', () => {
    const events = eventsInCode();
    const unknown = eventsInDocs().filter(({ event }) => !events.has(event));
    assert.deepEqual(
      unknown.map(
        ({ event, path }) =>
          `${path} names the log event "${event}", which no code logs (no "event: '${event}'" in src/): fix the doc or log it`,
      ),
      [],
    );
  });

  it('the checks read what they claim to (the scanners find known names)', () => {
    assert.ok(metricsInCode().has('tollgate_requests_total'));
    assert.ok(metricsInTable().has('tollgate_requests_total'));
    assert.ok(eventsInCode().has('auth_refused'));
    assert.ok(eventsInCode().has('revoked_tokens_loaded'), 'the revocation file watcher names its events');
    assert.ok(eventsInDocs().some(({ event }) => event === 'revoked_tokens_loaded'));
  });
});
