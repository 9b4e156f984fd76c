import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { CallerSampler, fromUntrustedCaller } from '../../src/observe/tracing-sampler.ts';

/** A trace id whose XOR of 32-bit parts is 1: the ratio sampler records it at any ratio above 0. */
const LUCKY_TRACE_ID = `${'0'.repeat(31)}1`;
const CALLER_SPAN_ID = '00f067aa0ba902b7';

/** The context a caller's `traceparent` makes, sampled or not. */
const callerContext = (sampled: boolean) =>
  trace.setSpanContext(ROOT_CONTEXT, {
    traceId: LUCKY_TRACE_ID,
    spanId: CALLER_SPAN_ID,
    traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
    isRemote: true,
  });

const decide = (sampler: CallerSampler, context = ROOT_CONTEXT) =>
  sampler.shouldSample(context, LUCKY_TRACE_ID, 'GET /', SpanKind.SERVER, {}, []).decision;

describe('who decides sampling (docs/observability.md#tracing)', () => {
  it("a trusted proxy's flag is followed whatever the ratio", () => {
    assert.equal(decide(new CallerSampler(0), callerContext(true)), SamplingDecision.RECORD_AND_SAMPLED);
    assert.equal(decide(new CallerSampler(1), callerContext(false)), SamplingDecision.NOT_RECORD);
  });

  it("an untrusted caller's flag is not: sample_ratio decides, 0 never and 1 always", () => {
    for (const sampled of [true, false]) {
      const context = fromUntrustedCaller(callerContext(sampled));
      assert.equal(decide(new CallerSampler(0), context), SamplingDecision.NOT_RECORD);
      assert.equal(decide(new CallerSampler(1), context), SamplingDecision.RECORD_AND_SAMPLED);
    }
  });

  it('an untrusted caller cannot pick a trace id that is always recorded: the draw is random', () => {
    // The ratio sampler is a function of the trace id alone: this id passes it at 1 %.
    const byTraceId = new TraceIdRatioBasedSampler(0.01);
    assert.equal(
      byTraceId.shouldSample(ROOT_CONTEXT, LUCKY_TRACE_ID).decision,
      SamplingDecision.RECORD_AND_SAMPLED,
    );
    const sampler = new CallerSampler(0.01);
    const context = fromUntrustedCaller(callerContext(true));
    let recorded = 0;
    for (let i = 0; i < 2000; i++) {
      if (decide(sampler, context) === SamplingDecision.RECORD_AND_SAMPLED) recorded++;
    }
    // About 20 expected; more than 100 (5 %) has a probability far below 1e-30.
    assert.ok(recorded < 100, `recorded ${recorded} of 2000`);
  });

  it('a new trace is sampled at sample_ratio from its own (random) trace id', () => {
    assert.equal(decide(new CallerSampler(0)), SamplingDecision.NOT_RECORD);
    assert.equal(decide(new CallerSampler(1)), SamplingDecision.RECORD_AND_SAMPLED);
    assert.equal(decide(new CallerSampler(0.01)), SamplingDecision.RECORD_AND_SAMPLED, 'the lucky id');
  });
});
