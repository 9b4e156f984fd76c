import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';
import { waitFor } from './tollgate.ts';

/**
 * An OpenTelemetry collector of the tests' own: a real HTTP server on loopback taking OTLP/HTTP
 * `POST /v1/traces` in both encodings, protobuf (decoded by protobufjs against the OTLP message
 * definitions below) and JSON, and keeping every span in one plain shape. `mode` makes it refuse
 * (500) or never answer, as a broken or stalled collector would.
 */

/** The OTLP trace messages (opentelemetry-proto: collector/trace/v1, trace/v1, common/v1, resource/v1). */
const OTLP_TRACE_PROTO = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  fixed32 flags = 16;
  string name = 5;
  SpanKind kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10;
  repeated Event events = 11;
  uint32 dropped_events_count = 12;
  repeated Link links = 13;
  uint32 dropped_links_count = 14;
  Status status = 15;
  enum SpanKind {
    SPAN_KIND_UNSPECIFIED = 0;
    SPAN_KIND_INTERNAL = 1;
    SPAN_KIND_SERVER = 2;
    SPAN_KIND_CLIENT = 3;
    SPAN_KIND_PRODUCER = 4;
    SPAN_KIND_CONSUMER = 5;
  }
  message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
  message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4; uint32 dropped_attributes_count = 5; fixed32 flags = 6; }
}
message Status { reserved 1; string message = 2; StatusCode code = 3; enum StatusCode { STATUS_CODE_UNSET = 0; STATUS_CODE_OK = 1; STATUS_CODE_ERROR = 2; } }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
`;

const ExportTraceServiceRequest = protobuf
  .parse(OTLP_TRACE_PROTO, { keepCase: false })
  .root.lookupType('otlp.ExportTraceServiceRequest');

const KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'] as const;
const STATUSES = ['unset', 'ok', 'error'] as const;

export type AttributeValue = string | number | boolean;

export interface CollectedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  kind: (typeof KINDS)[number];
  attributes: Record<string, AttributeValue>;
  status: (typeof STATUSES)[number];
  /** The exporting process's resource attributes (service.name, process.pid). */
  resource: Record<string, AttributeValue>;
  /** Start and end, in milliseconds since the epoch. */
  startMs: number;
  endMs: number;
}

export interface OtlpCollector {
  readonly origin: string;
  /** `ok` accepts, `error` answers 500, `hang` never answers (its connections are closed at close()). */
  mode: 'ok' | 'error' | 'hang';
  readonly spans: CollectedSpan[];
  /** Every request body as received, for checks on what must never be sent at all. */
  readonly bodies: Buffer[];
  /** Content types of the export requests, in order. */
  readonly contentTypes: string[];
  /** Resolves once `count` spans matching `match` arrived; returns them. */
  waitForSpans(
    match: (span: CollectedSpan) => boolean,
    count?: number,
    timeoutMs?: number,
  ): Promise<CollectedSpan[]>;
  close(): Promise<void>;
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const spans: CollectedSpan[] = [];
  const bodies: Buffer[] = [];
  const contentTypes: string[] = [];
  const collector = {
    origin: '',
    mode: 'ok' as OtlpCollector['mode'],
    spans,
    bodies,
    contentTypes,
  };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    if (collector.mode === 'hang') return;
    if (collector.mode === 'error') {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('collector broken');
      return;
    }
    const body = Buffer.concat(chunks);
    const type = req.headers['content-type'] ?? '';
    bodies.push(body);
    contentTypes.push(type);
    const json = type.startsWith('application/json');
    const decoded = json
      ? (JSON.parse(body.toString('utf8')) as Record<string, unknown>)
      : (ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(body), {
          longs: String,
          enums: Number,
          bytes: Array,
          defaults: false,
          oneofs: false,
        }) as Record<string, unknown>);
    spans.push(...plainSpans(decoded, json));
    res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
    res.end(json ? '{}' : '');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  collector.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(collector, {
    async waitForSpans(match: (span: CollectedSpan) => boolean, count = 1, timeoutMs = 20_000) {
      await waitFor(
        () => spans.filter(match).length >= count,
        timeoutMs,
        () => null,
      );
      return spans.filter(match);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  });
}

type Json = Record<string, unknown>;

/** Both encodings' requests in one shape: protobuf's byte ids and JSON's hex ids as hex. */
function plainSpans(request: Json, json: boolean): CollectedSpan[] {
  const out: CollectedSpan[] = [];
  const id = (value: unknown) =>
    value === undefined ? '' : json ? String(value) : Buffer.from(value as number[]).toString('hex');
  for (const resourceSpans of (request.resourceSpans as Json[] | undefined) ?? []) {
    const resource = attributesOf(((resourceSpans.resource as Json | undefined)?.attributes as Json[]) ?? []);
    for (const scopeSpans of (resourceSpans.scopeSpans as Json[] | undefined) ?? []) {
      for (const span of (scopeSpans.spans as Json[] | undefined) ?? []) {
        out.push({
          traceId: id(span.traceId),
          spanId: id(span.spanId),
          parentSpanId: id(span.parentSpanId),
          name: String(span.name),
          kind: KINDS[Number(span.kind ?? 0)] ?? 'unspecified',
          attributes: attributesOf((span.attributes as Json[] | undefined) ?? []),
          status: STATUSES[Number((span.status as Json | undefined)?.code ?? 0)] ?? 'unset',
          resource,
          startMs: Number(BigInt(String(span.startTimeUnixNano)) / 1_000_000n),
          endMs: Number(BigInt(String(span.endTimeUnixNano)) / 1_000_000n),
        });
      }
    }
  }
  return out;
}

function attributesOf(list: Json[]): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list as Array<{ key: string; value?: Json }>) {
    if (value === undefined) continue;
    if (value.stringValue !== undefined) out[key] = String(value.stringValue);
    else if (value.boolValue !== undefined) out[key] = Boolean(value.boolValue);
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = Number(value.doubleValue);
  }
  return out;
}
