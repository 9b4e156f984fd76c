import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { encodeTraceRequest } from '../../src/observe/tracing-protobuf.ts';
import { withOwnProtobufEncoder } from '../../src/observe/tracing-sdk.ts';

type Serializer = { serializeRequest(spans: ReadableSpan[]): Uint8Array };

/** The SDK's own protobuf serializer, as its exporter holds it. */
function sdkSerializer(): Serializer {
  const exporter = new OTLPTraceExporter({ url: 'http://127.0.0.1:1/v1/traces' });
  return (exporter as unknown as { _delegate: { _serializer: Serializer } })._delegate._serializer;
}

/** Spans of the shapes Tollgate makes, plus what it never makes (events, links, arrays, UTF-8). */
async function finishedSpans(): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'tollgate-test', 'process.pid': 4242 }),
    spanProcessors: [new SimpleSpanProcessor({ exporter: memory })],
  });
  const tracer = provider.getTracer('tollgate');
  const remote = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331',
    traceFlags: TraceFlags.SAMPLED,
    isRemote: true,
    traceState: new TraceState('vendor=value,other=x'),
  });
  const server = tracer.startSpan(
    'GET /api',
    {
      kind: SpanKind.SERVER,
      attributes: {
        'http.route': '/api',
        'url.scheme': 'http',
        'server.address': 'app.example.com',
        'network.protocol.version': '1.1',
        'client.address': '127.0.0.1',
        'tollgate.auth.method': 'none',
        'http.request.method': 'GET',
        'url.path': `/api/ünïcode/${'x'.repeat(300)}`,
        'url.query': 'a=1&b=2',
      },
      startTime: performance.now() - 3,
    },
    remote,
  );
  const client = tracer.startSpan(
    'GET',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'server.address': '127.0.0.1',
        'server.port': 8080,
        'url.full': 'http://127.0.0.1:8080/api',
      },
      links: [{ context: server.spanContext(), attributes: { why: 'test' } }],
    },
    trace.setSpan(ROOT_CONTEXT, server),
  );
  client.setAttribute('http.response.status_code', 503);
  client.setAttribute('error.type', '503');
  client.setAttributes({
    negative: -42,
    big: 2 ** 40,
    ratio: 0.25,
    yes: true,
    list: ['a', 'b'],
    counts: [1, 2],
  });
  client.addEvent('retry', { attempt: 2 });
  client.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream refused' });
  client.end();
  server.setAttribute('http.response.status_code', 200);
  server.end();
  const root = tracer.startSpan('HTTP', {
    kind: SpanKind.SERVER,
    attributes: { 'http.request.method': '_OTHER' },
  });
  root.end();
  await provider.forceFlush();
  const spans = memory.getFinishedSpans();
  assert.equal(spans.length, 3);
  return spans;
}

test('the batch encoder writes the same bytes as the SDK protobuf serializer', async () => {
  const spans = await finishedSpans();
  const expected = Buffer.from(sdkSerializer().serializeRequest(spans));
  assert.ok(expected.length > 500);
  assert.deepEqual(Buffer.from(encodeTraceRequest(spans)), expected);
  // Many spans: lengths over 16 KiB for the scope and resource messages.
  const many = Array.from({ length: 300 }, (_, index) => spans[index % spans.length] as ReadableSpan);
  assert.deepEqual(
    Buffer.from(encodeTraceRequest(many)),
    Buffer.from(sdkSerializer().serializeRequest(many)),
  );
});

test('the protobuf exporter sends what the batch encoder writes, the SDK transport and response decoder kept', async () => {
  const plain = new OTLPTraceExporter({ url: 'http://127.0.0.1:1/v1/traces' });
  const sdk = (plain as unknown as { _delegate: { _serializer: Serializer } })._delegate._serializer;
  const exporter = withOwnProtobufEncoder(plain);
  const serializer = (
    exporter as unknown as { _delegate: { _serializer: Serializer & { deserializeResponse: unknown } } }
  )._delegate._serializer;
  assert.notEqual(serializer, sdk, 'the encoder is replaced');
  const spans = await finishedSpans();
  assert.deepEqual(Buffer.from(serializer.serializeRequest(spans)), Buffer.from(encodeTraceRequest(spans)));
  assert.equal(typeof serializer.deserializeResponse, 'function');
});
