import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import fc from 'fast-check';
import { newSpanId, newTraceId, PresetTraceIds } from '../../src/observe/tracing-ids.ts';
import { Sampling } from '../../src/observe/tracing-sampler.ts';

/** A trace id whose XOR of 32-bit parts is 1: the ratio sampler records it at any ratio above 0. */
const LUCKY_TRACE_ID = `${'0'.repeat(31)}1`;
/** A trace id whose XOR of 32-bit parts is 0xffffffff: the ratio sampler records it only at 1. */
const UNLUCKY_TRACE_ID = `${'f'.repeat(8)}${'0'.repeat(24)}`;

const sdkSampled = (ratio: number, traceId: string) =>
  new TraceIdRatioBasedSampler(ratio).shouldSample(ROOT_CONTEXT, traceId).decision ===
  SamplingDecision.RECORD_AND_SAMPLED;

const SEED = 20261129;
const hexTraceId = fc.stringMatching(/^[0-9a-f]{32}$/).filter((id) => id !== '0'.repeat(32));

describe('who decides sampling (docs/observability.md#tracing)', () => {
  it("a trusted proxy's flag is followed both ways, whatever the ratio", () => {
    for (const ratio of [0, 0.1, 1]) {
      assert.equal(new Sampling(ratio).continued(true, true), true, `sampled caller at ${ratio}`);
      assert.equal(new Sampling(ratio).continued(false, true), false, `unsampled caller at ${ratio}`);
    }
  });

  it("an untrusted caller's flag is not: sample_ratio decides, 0 never and 1 always", () => {
    for (const sampled of [true, false]) {
      assert.equal(new Sampling(0).continued(sampled, false), false);
      assert.equal(new Sampling(1).continued(sampled, false), true);
    }
  });

  it('an untrusted caller cannot pick a trace id that is always recorded: the draw is random', () => {
    // The ratio rule is a function of the trace id alone, and a continued trace keeps the caller's
    // id; the untrusted decision does not read it, so 2000 draws at 1 % stay near 20.
    assert.equal(sdkSampled(0.01, LUCKY_TRACE_ID), true);
    const sampling = new Sampling(0.01);
    let recorded = 0;
    for (let i = 0; i < 2000; i++) if (sampling.continued(true, false)) recorded++;
    // About 20 expected; more than 100 (5 %) has a probability far below 1e-30.
    assert.ok(recorded < 100, `recorded ${recorded} of 2000`);
  });

  it('a new trace is decided by its trace id exactly as TraceIdRatioBasedSampler decides it', () => {
    assert.equal(new Sampling(0).newTrace(LUCKY_TRACE_ID), false);
    assert.equal(new Sampling(0.01).newTrace(LUCKY_TRACE_ID), true);
    assert.equal(new Sampling(0.99).newTrace(UNLUCKY_TRACE_ID), false);
    assert.equal(new Sampling(1).newTrace(UNLUCKY_TRACE_ID), true);
    fc.assert(
      fc.property(hexTraceId, fc.double({ min: 0, max: 1, noNaN: true }), (traceId, ratio) => {
        const sampling = new Sampling(ratio);
        const decision = sampling.newTrace(traceId);
        assert.equal(decision, sdkSampled(ratio, traceId), `${traceId} at ${ratio}`);
        // The same trace id always gets the same decision.
        assert.equal(sampling.newTrace(traceId), decision);
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });

  it('about sample_ratio of new trace ids are recorded', () => {
    const sampling = new Sampling(0.25);
    let recorded = 0;
    for (let i = 0; i < 4000; i++) if (sampling.newTrace(newTraceId())) recorded++;
    // 1000 expected, standard deviation about 27: 800–1200 is over 7 of them either way.
    assert.ok(recorded > 800 && recorded < 1200, `recorded ${recorded} of 4000`);
  });
});

describe('trace and span ids', () => {
  it('are lowercase hex of the W3C lengths, and differ', () => {
    const traces = new Set<string>();
    const spans = new Set<string>();
    // Several refills of the pool.
    for (let i = 0; i < 2000; i++) {
      const traceId = newTraceId();
      const spanId = newSpanId();
      assert.match(traceId, /^[0-9a-f]{32}$/);
      assert.match(spanId, /^[0-9a-f]{16}$/);
      traces.add(traceId);
      spans.add(spanId);
    }
    assert.equal(traces.size, 2000);
    assert.equal(spans.size, 2000);
  });

  it("the SDK's generator hands out a preset trace id once, then draws its own", () => {
    const ids = new PresetTraceIds();
    ids.nextTraceId(LUCKY_TRACE_ID);
    assert.equal(ids.generateTraceId(), LUCKY_TRACE_ID);
    const next = ids.generateTraceId();
    assert.notEqual(next, LUCKY_TRACE_ID);
    assert.match(next, /^[0-9a-f]{32}$/);
    assert.match(ids.generateSpanId(), /^[0-9a-f]{16}$/);
  });
});
