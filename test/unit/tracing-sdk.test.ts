import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createNoopMeter, type Meter, type MeterProvider, ROOT_CONTEXT, SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { withoutSpanMetrics } from '../../src/observe/tracing-sdk.ts';

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
