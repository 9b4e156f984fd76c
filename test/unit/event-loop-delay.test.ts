import assert from 'node:assert/strict';
import { type ELDHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { EVENT_LOOP_DELAY, RESOLUTION_MS, registerEventLoopDelay } from '../../src/observe/event-loop.ts';

/** `name{le="bound"} value` lines of the text exposition, as a map bound → value. */
async function buckets(registry: Registry): Promise<Map<string, number>> {
  const text = await registry.metrics();
  const found = new Map<string, number>();
  for (const match of text.matchAll(
    new RegExp(`^${EVENT_LOOP_DELAY}_bucket\\{le="([^"]+)"\\} (\\S+)$`, 'gm'),
  )) {
    found.set(match[1] as string, Number(match[2]));
  }
  for (const suffix of ['sum', 'count']) {
    const line = text.match(new RegExp(`^${EVENT_LOOP_DELAY}_${suffix} (\\S+)$`, 'm'));
    if (line) found.set(suffix, Number(line[1]));
  }
  return found;
}

/** A monitor whose samples the test sets: percentile steps (ascending) of intervals in ms. */
function fakeMonitor(count: number, steps: Array<[number, number]>): ELDHistogram & { resets: number } {
  const state = { count, steps, resets: 0 };
  return {
    enable: () => true,
    disable: () => true,
    get count() {
      return state.count;
    },
    get percentiles() {
      return new Map(state.steps.map(([percentile, ms]) => [percentile, ms * 1e6]));
    },
    get max() {
      return (state.steps.at(-1)?.[1] ?? 0) * 1e6;
    },
    reset() {
      state.count = 0;
      state.steps = [];
      state.resets += 1;
    },
    get resets() {
      return state.resets;
    },
  } as unknown as ELDHistogram & { resets: number };
}

describe('tollgate_event_loop_delay_seconds', () => {
  it('counts every sample in the bucket of its delay (interval minus the resolution), cumulatively', async () => {
    const registry = new Registry();
    const r = RESOLUTION_MS;
    // 200 samples: half on time (0.1 ms late), 98 at 2 ms late, 2 at 80 ms late.
    const monitor = fakeMonitor(200, [
      [0, r + 0.1],
      [50, r + 0.1],
      [99, r + 2],
      [100, r + 80],
    ]);
    registerEventLoopDelay(registry, monitor);
    const first = await buckets(registry);
    assert.equal(first.get('0.001'), 100);
    assert.equal(first.get('0.0025'), 198);
    assert.equal(first.get('0.05'), 198);
    assert.equal(first.get('0.1'), 200);
    assert.equal(first.get('+Inf'), 200);
    assert.equal(first.get('count'), 200);
    assert.ok(Math.abs((first.get('sum') ?? 0) - (100 * 0.0001 + 98 * 0.002 + 2 * 0.08)) < 1e-9);
    assert.equal(monitor.resets, 1, 'the monitor starts afresh after each fold');

    // Nothing new: a second scrape shows the same totals (a counter never goes down or doubles).
    assert.deepEqual(await buckets(registry), first);
  });

  it('shows a real stall of the event loop in the high buckets', async () => {
    const registry = new Registry();
    const monitor = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    const metric = registerEventLoopDelay(registry, monitor);
    try {
      // Let the monitor take a first sample, then block the loop for 120 ms.
      while (monitor.count === 0) await new Promise((resolve) => setImmediate(resolve));
      const until = performance.now() + 120;
      while (performance.now() < until) {
        // a synchronous job holding the event loop
      }
      // The monitor's next timer records the interval that covers the block.
      while (monitor.max < 100e6) await new Promise((resolve) => setImmediate(resolve));
      const seen = await buckets(registry);
      const stalled = (seen.get('+Inf') ?? 0) - (seen.get('0.05') ?? 0);
      assert.ok(stalled >= 1, `expected a sample above 50 ms, got ${JSON.stringify([...seen])}`);
    } finally {
      metric.stop();
    }
  });
});
