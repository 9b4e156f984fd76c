import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { createRebuilds, type RebuildCause } from '../../src/sources/kubernetes/rebuilds.ts';

function harness(options: { costMs?: number; now?: () => number } = {}) {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line)) });
  /** The state the sources hold; a rebuild compiles whatever it is when it runs. */
  const state = { version: 0 };
  const built: Array<{ cause: RebuildCause; version: number }> = [];
  const rebuilds = createRebuilds({
    logger,
    ...(options.now ? { now: options.now } : {}),
    rebuild: (cause) => {
      // A rebuild that takes time: spin, as compiling a large table does.
      const until = performance.now() + (options.costMs ?? 0);
      while (performance.now() < until);
      built.push({ cause, version: state.version });
      return { routes: 1, servers: 1, partial: cause.sources.size === 0 };
    },
  });
  return { lines, state, built, rebuilds };
}

test('a burst of changes in one turn is one rebuild carrying all of them', async () => {
  const h = harness();
  for (let i = 0; i < 50; i++) {
    h.state.version = i;
    h.rebuilds.request(i % 10 === 0 ? { source: 'ingresses' } : { services: new Set([`svc-${i}.apps:80`]) });
  }
  assert.equal(h.rebuilds.pending(), true);
  await h.rebuilds.idle();
  assert.equal(h.built.length, 1);
  assert.equal(h.built[0]?.version, 49, 'built from the last state');
  assert.deepEqual([...(h.built[0]?.cause.sources ?? [])], ['ingresses']);
  assert.equal(h.built[0]?.cause.services.size, 45);
  // One log line, with counts rather than the list of Services.
  const logged = h.lines.filter((line) => line.msg === 'kubernetes changes applied; routing table rebuilt');
  assert.equal(logged.length, 1);
  assert.equal(logged[0]?.services_changed, 45);
  h.rebuilds.close();
});

test('changes that keep coming during slow rebuilds are folded, and the last state is what serves', async () => {
  const h = harness({ costMs: 30 });
  const edits = 40;
  // One change every event-loop turn or so, as a stream of watch events arrives: far more changes
  // than rebuilds, none lost.
  for (let i = 1; i <= edits; i++) {
    h.state.version = i;
    h.rebuilds.request({ source: 'ingresses' });
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  await h.rebuilds.idle();
  assert.equal(h.built.at(-1)?.version, edits, 'the last rebuild saw the last change');
  assert.ok(h.built.length < edits / 2, `${h.built.length} rebuilds for ${edits} changes`);
  assert.equal(h.rebuilds.pending(), false);
  h.rebuilds.close();
});

test('after a quiet period a change is rebuilt on the next turn, without a delay', async () => {
  let clock = 1000;
  const h = harness({ now: () => clock });
  h.rebuilds.request({ services: new Set(['web.apps:http']) });
  await h.rebuilds.idle();
  clock += 10_000;
  h.rebuilds.request({ services: new Set(['web.apps:http']) });
  // The rebuild was queued before this turn's end: it has run when the next turn starts.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(h.built.length, 2);
  assert.equal(h.rebuilds.pending(), false);
  h.rebuilds.close();
});
