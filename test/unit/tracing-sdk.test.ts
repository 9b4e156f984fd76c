import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  createNoopMeter,
  type Meter,
  type MeterProvider,
  ROOT_CONTEXT,
  type SpanContext,
  SpanKind,
  type TextMapGetter,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { callerOf, withoutSpanMetrics } from '../../src/observe/tracing-sdk.ts';

/** A meter provider that notes every counter update the tracer makes. */
function notingMeterProvider(updates: string[]): MeterProvider {
  const noop = createNoopMeter();
  const counter = (name: string) => ({ add: () => updates.push(name) });
  const meter: Meter = Object.assign(Object.create(noop) as Meter, {
    createCounter: counter,
    createUpDownCounter: counter,
  });
  return { getMeter: () => meter };
}

describe("the tracer's per-span SDK metrics (docs/benchmark.md#tracing-cost)", () => {
  it('are left out, and spans are made and exported as before', () => {
    const updates: string[] = [];
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({
      meterProvider: notingMeterProvider(updates),
      spanProcessors: [new SimpleSpanProcessor({ exporter })],
    });
    const tracer = provider.getTracer('tollgate');

    // As the SDK comes, each span updates its counters: what is taken out below.
    tracer.startSpan('before', { kind: SpanKind.SERVER }, ROOT_CONTEXT).end();
    assert.ok(updates.length > 0, 'the SDK counts its spans');

    updates.length = 0;
    const same = withoutSpanMetrics(tracer);
    assert.equal(same, tracer);
    const span = same.startSpan('GET /api', { kind: SpanKind.SERVER, attributes: { a: 1 } }, ROOT_CONTEXT);
    span.end();
    assert.deepEqual(updates, []);
    const [, exported] = exporter.getFinishedSpans();
    assert.equal(exported?.name, 'GET /api');
    assert.equal(exported?.kind, SpanKind.SERVER);
    assert.deepEqual(exported?.attributes, { a: 1 });
    assert.ok(exported?.ended);
  });
});

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';

/** What the SDK's propagator reads from the same headers: the caller's span context, or none. */
function extracted(headers: Record<string, string | string[] | undefined>) {
  const getter: TextMapGetter<typeof headers> = {
    keys: (carrier) => Object.keys(carrier),
    get: (carrier, key) => carrier[key],
  };
  const context = trace.getSpanContext(
    new W3CTraceContextPropagator().extract(ROOT_CONTEXT, headers, getter),
  );
  return context === undefined ? null : comparable(context);
}

const comparable = (context: SpanContext) => ({
  traceId: context.traceId,
  spanId: context.spanId,
  traceFlags: context.traceFlags,
  isRemote: context.isRemote,
  traceState: context.traceState?.serialize(),
});

describe("the caller's traceparent, read without the propagator (docs/observability.md#tracing)", () => {
  it('reads every header as W3CTraceContextPropagator.extract reads it', () => {
    const valid = `00-${TRACE_ID}-${SPAN_ID}-01`;
    const cases: Array<Record<string, string | string[] | undefined>> = [
      {},
      { traceparent: valid },
      { traceparent: `00-${TRACE_ID}-${SPAN_ID}-00` },
      { traceparent: `00-${TRACE_ID}-${SPAN_ID}-03` },
      { traceparent: ` ${valid}` },
      { traceparent: `${valid} ` },
      { traceparent: '' },
      { traceparent: `ff-${TRACE_ID}-${SPAN_ID}-01` },
      { traceparent: `01-${TRACE_ID}-${SPAN_ID}-01-later-fields` },
      { traceparent: `00-${TRACE_ID}-${SPAN_ID}-01-extra` },
      { traceparent: `00-${'0'.repeat(32)}-${SPAN_ID}-01` },
      { traceparent: `00-${TRACE_ID}-${'0'.repeat(16)}-01` },
      { traceparent: `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01` },
      { traceparent: `00-${TRACE_ID}-${SPAN_ID}` },
      { traceparent: [valid, `00-${'a'.repeat(32)}-${SPAN_ID}-01`] },
      { traceparent: valid, tracestate: 'vendor=1,other=two' },
      { traceparent: valid, tracestate: ['vendor=1', 'other=two'] },
      { traceparent: valid, tracestate: '' },
      { traceparent: valid, tracestate: 'not a member, ok=1' },
      { tracestate: 'vendor=1' },
    ];
    for (const headers of cases) {
      const mine = callerOf(headers);
      assert.deepEqual(mine === null ? null : comparable(mine), extracted(headers), JSON.stringify(headers));
    }
  });
});
