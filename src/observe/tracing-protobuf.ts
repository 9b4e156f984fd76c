import type { Attributes, AttributeValue, HrTime, Link } from '@opentelemetry/api';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace';

/**
 * OTLP/protobuf encoding of a batch of finished spans (an ExportTraceServiceRequest), byte for byte
 * what the SDK's ProtobufTraceSerializer writes, in one pass instead of its two (a size estimate, then
 * the writes) and without its per-span allocations (docs/benchmark.md#tracing-cost):
 *
 * - a length is written after its message, in the byte(s) reserved for it, moving the message only
 *   when its length needs more or fewer bytes than reserved (a span reserves two: 128–16,383 bytes);
 * - attribute keys (a small, fixed set) are encoded once, with their KeyValue tag, and kept;
 * - trace and span ids go from hex straight into the buffer; the resource and scope, the same for
 *   every span of this process, are encoded once per batch.
 *
 * Field numbers and wire types are opentelemetry-proto's (trace/v1/trace.proto, common/v1/common.proto).
 */

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;
const WIRE_FIXED32 = 5;

const SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE = 0x100;
const SPAN_FLAGS_CONTEXT_IS_REMOTE = 0x200;
const MIN_INT64 = -(2 ** 63);
const MAX_INT64 = 2 ** 63;

/** Encoded `KeyValue.key` fields (tag, length, bytes) by key; bounded, keys come from the code. */
const KEYS = new Map<string, Uint8Array>();
const MAX_KEYS = 512;

/** Hex digit → value, for ids; anything else reads as 0 (ids are validated by the SDK). */
const HEX = new Uint8Array(128);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX[97 + i] = 10 + i;
  HEX[65 + i] = 10 + i;
}

function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  return 5;
}

class Writer {
  buf: Buffer;
  pos = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  ensure(extra: number): void {
    const needed = this.pos + extra;
    if (needed <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < needed) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /** A 32-bit unsigned varint (tags, lengths, counts, enums). */
  uint(value: number): void {
    this.ensure(5);
    let v = value >>> 0;
    while (v > 0x7f) {
      this.buf[this.pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[this.pos++] = v;
  }

  tag(field: number, wire: number): void {
    this.uint((field << 3) | wire);
  }

  /** A varint of any safe integer; negative ones in ten bytes (two's complement), as int64 is. */
  int64(value: number): void {
    if (value >= 0 && value <= 0xffffffff) {
      this.uint(value);
      return;
    }
    this.ensure(10);
    const abs = Math.abs(value);
    let low = abs >>> 0;
    let high = (abs / 4294967296) >>> 0;
    if (value < 0) {
      low = ~low >>> 0;
      high = ~high >>> 0;
      low = (low + 1) >>> 0;
      if (low === 0) high = (high + 1) >>> 0;
    }
    while (high > 0 || low > 0x7f) {
      this.buf[this.pos++] = (low & 0x7f) | 0x80;
      low = ((low >>> 7) | (high << 25)) >>> 0;
      high >>>= 7;
    }
    this.buf[this.pos++] = low & 0x7f;
  }

  fixed32(value: number): void {
    this.ensure(4);
    this.buf.writeUInt32LE(value >>> 0, this.pos);
    this.pos += 4;
  }

  fixed64(low: number, high: number): void {
    this.ensure(8);
    this.buf.writeUInt32LE(low >>> 0, this.pos);
    this.buf.writeUInt32LE(high >>> 0, this.pos + 4);
    this.pos += 8;
  }

  double(value: number): void {
    this.ensure(8);
    this.buf.writeDoubleLE(value, this.pos);
    this.pos += 8;
  }

  /** A length-delimited string field's length and UTF-8 bytes (the tag is the caller's). */
  string(value: string): void {
    const length = value.length;
    this.ensure(length * 3 + 5);
    const { buf } = this;
    // Short ASCII (nearly every attribute): copied here, cheaper than a call into C++.
    if (length < 0x80) {
      const start = this.pos + 1;
      let i = 0;
      for (; i < length; i++) {
        const code = value.charCodeAt(i);
        if (code > 0x7f) break;
        buf[start + i] = code;
      }
      if (i === length) {
        buf[this.pos] = length;
        this.pos = start + length;
        return;
      }
    }
    const bytes = Buffer.byteLength(value, 'utf8');
    this.uint(bytes);
    this.pos += this.buf.write(value, this.pos, bytes, 'utf8');
  }

  bytes(value: Uint8Array): void {
    this.uint(value.length);
    this.ensure(value.length);
    this.buf.set(value, this.pos);
    this.pos += value.length;
  }

  raw(value: Uint8Array): void {
    this.ensure(value.length);
    this.buf.set(value, this.pos);
    this.pos += value.length;
  }

  /** A hex id as `bytes` (length, then the decoded bytes). */
  hexId(hex: string): void {
    const length = hex.length >>> 1;
    this.ensure(length + 1);
    const { buf } = this;
    buf[this.pos++] = length;
    for (let i = 0; i < hex.length; i += 2) {
      buf[this.pos++] =
        ((HEX[hex.charCodeAt(i) & 0x7f] as number) << 4) | (HEX[hex.charCodeAt(i + 1) & 0x7f] as number);
    }
  }

  /** Reserves `reserve` bytes for the length of the message that follows; returns where. */
  begin(reserve: number): number {
    this.ensure(reserve);
    const at = this.pos;
    this.pos += reserve;
    return at;
  }

  /** Writes the length of the message begun at `at`, moving it if its length takes other than `reserve` bytes. */
  end(at: number, reserve: number): void {
    const length = this.pos - at - reserve;
    const size = varintSize(length);
    if (size !== reserve) {
      this.ensure(size - reserve);
      this.buf.copy(this.buf, at + size, at + reserve, this.pos);
      this.pos += size - reserve;
    }
    const { buf } = this;
    let v = length;
    let p = at;
    while (v > 0x7f) {
      buf[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[p] = v;
  }
}

function encodedKey(key: string): Uint8Array {
  let known = KEYS.get(key);
  if (known === undefined) {
    const bytes = Buffer.from(key, 'utf8');
    const size = varintSize(bytes.length);
    known = Buffer.allocUnsafe(1 + size + bytes.length);
    known[0] = (1 << 3) | WIRE_BYTES;
    let v = bytes.length;
    let p = 1;
    while (v > 0x7f) {
      known[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    known[p++] = v;
    known.set(bytes, p);
    if (KEYS.size < MAX_KEYS) KEYS.set(key, known);
  }
  return known;
}

/** `repeated KeyValue` at `field`. */
function writeAttributes(writer: Writer, attributes: Attributes, field: number): void {
  for (const key in attributes) {
    if (!Object.hasOwn(attributes, key)) continue;
    writer.tag(field, WIRE_BYTES);
    const keyValue = writer.begin(1);
    writer.raw(encodedKey(key));
    writer.tag(2, WIRE_BYTES);
    const value = writer.begin(1);
    writeAnyValue(writer, attributes[key]);
    writer.end(value, 1);
    writer.end(keyValue, 1);
  }
}

/** The fields of an AnyValue (its length is the caller's). */
function writeAnyValue(writer: Writer, value: AttributeValue | Record<string, unknown> | undefined): void {
  if (typeof value === 'string') {
    writer.tag(1, WIRE_BYTES);
    writer.string(value);
  } else if (typeof value === 'number') {
    if (Number.isInteger(value) && value >= MIN_INT64 && value < MAX_INT64) {
      writer.tag(3, WIRE_VARINT);
      writer.int64(value);
    } else {
      writer.tag(4, WIRE_FIXED64);
      writer.double(value);
    }
  } else if (typeof value === 'boolean') {
    writer.tag(2, WIRE_VARINT);
    writer.uint(value ? 1 : 0);
  } else if (value instanceof Uint8Array) {
    writer.tag(7, WIRE_BYTES);
    writer.bytes(value);
  } else if (Array.isArray(value)) {
    writer.tag(5, WIRE_BYTES);
    const array = writer.begin(1);
    for (const item of value) {
      writer.tag(1, WIRE_BYTES);
      const itemAt = writer.begin(1);
      writeAnyValue(writer, item as AttributeValue);
      writer.end(itemAt, 1);
    }
    writer.end(array, 1);
  } else if (typeof value === 'object' && value !== null) {
    writer.tag(6, WIRE_BYTES);
    const list = writer.begin(1);
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      writer.tag(1, WIRE_BYTES);
      const keyValue = writer.begin(1);
      writer.tag(1, WIRE_BYTES);
      writer.string(key);
      writer.tag(2, WIRE_BYTES);
      const inner = writer.begin(1);
      writeAnyValue(writer, (value as Record<string, unknown>)[key] as AttributeValue);
      writer.end(inner, 1);
      writer.end(keyValue, 1);
    }
    writer.end(list, 1);
  }
}

/** An HrTime ([seconds, nanoseconds]) as fixed64 nanoseconds, exactly (beyond 2^53). */
function writeHrTime(writer: Writer, time: HrTime): void {
  const [seconds, nanos] = time;
  const lower16 = (seconds & 0xffff) * 1e9;
  const upper = ((seconds / 0x10000) >>> 0) * 1e9;
  const low = (lower16 >>> 0) + (((upper & 0xffff) * 0x10000) >>> 0) + nanos;
  const high = Math.floor(lower16 / 4294967296) + ((upper / 0x10000) >>> 0) + Math.floor(low / 4294967296);
  writer.fixed64(low >>> 0, high >>> 0);
}

function spanFlags(traceFlags: number, isRemote: boolean | undefined): number {
  return (
    (traceFlags & 0xff) | SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE | (isRemote ? SPAN_FLAGS_CONTEXT_IS_REMOTE : 0)
  );
}

function writeEvent(writer: Writer, event: TimedEvent): void {
  writer.tag(1, WIRE_FIXED64);
  writeHrTime(writer, event.time);
  writer.tag(2, WIRE_BYTES);
  writer.string(event.name);
  if (event.attributes) writeAttributes(writer, event.attributes, 3);
  writer.tag(4, WIRE_VARINT);
  writer.uint(event.droppedAttributesCount || 0);
}

function writeLink(writer: Writer, link: Link & { droppedAttributesCount?: number }): void {
  const { context } = link;
  writer.tag(1, WIRE_BYTES);
  writer.hexId(context.traceId);
  writer.tag(2, WIRE_BYTES);
  writer.hexId(context.spanId);
  const traceState = context.traceState?.serialize();
  if (traceState) {
    writer.tag(3, WIRE_BYTES);
    writer.string(traceState);
  }
  if (link.attributes) writeAttributes(writer, link.attributes, 4);
  writer.tag(5, WIRE_VARINT);
  writer.uint(link.droppedAttributesCount || 0);
  writer.tag(6, WIRE_FIXED32);
  writer.fixed32(spanFlags(context.traceFlags, context.isRemote));
}

/** One Span message's fields (proto field numbers in order, as the SDK writes them). */
function writeSpan(writer: Writer, span: ReadableSpan): void {
  const context = span.spanContext();
  writer.tag(1, WIRE_BYTES);
  writer.hexId(context.traceId);
  writer.tag(2, WIRE_BYTES);
  writer.hexId(context.spanId);
  const traceState = context.traceState?.serialize();
  if (traceState) {
    writer.tag(3, WIRE_BYTES);
    writer.string(traceState);
  }
  const parent = span.parentSpanContext;
  if (parent?.spanId) {
    writer.tag(4, WIRE_BYTES);
    writer.hexId(parent.spanId);
  }
  writer.tag(5, WIRE_BYTES);
  writer.string(span.name);
  const kind = span.kind == null ? 0 : span.kind + 1;
  if (kind !== 0) {
    writer.tag(6, WIRE_VARINT);
    writer.uint(kind);
  }
  writer.tag(7, WIRE_FIXED64);
  writeHrTime(writer, span.startTime);
  writer.tag(8, WIRE_FIXED64);
  writeHrTime(writer, span.endTime);
  if (span.attributes) writeAttributes(writer, span.attributes, 9);
  writer.tag(10, WIRE_VARINT);
  writer.uint(span.droppedAttributesCount);
  for (const event of span.events) {
    writer.tag(11, WIRE_BYTES);
    const at = writer.begin(1);
    writeEvent(writer, event);
    writer.end(at, 1);
  }
  writer.tag(12, WIRE_VARINT);
  writer.uint(span.droppedEventsCount);
  for (const link of span.links) {
    writer.tag(13, WIRE_BYTES);
    const at = writer.begin(1);
    writeLink(writer, link);
    writer.end(at, 1);
  }
  writer.tag(14, WIRE_VARINT);
  writer.uint(span.droppedLinksCount);
  writer.tag(15, WIRE_BYTES);
  const status = writer.begin(1);
  if (span.status.message) {
    writer.tag(2, WIRE_BYTES);
    writer.string(span.status.message);
  }
  writer.tag(3, WIRE_VARINT);
  writer.uint(span.status.code);
  writer.end(status, 1);
  writer.tag(16, WIRE_FIXED32);
  writer.fixed32(spanFlags(context.traceFlags, parent?.isRemote));
}

type Resource = ReadableSpan['resource'];
type Scope = ReadableSpan['instrumentationScope'];

function writeResource(writer: Writer, resource: Resource): void {
  writer.tag(1, WIRE_BYTES);
  const at = writer.begin(1);
  if (resource.attributes) writeAttributes(writer, resource.attributes, 1);
  writer.tag(2, WIRE_VARINT);
  writer.uint(0);
  writer.end(at, 1);
}

function writeScope(writer: Writer, scope: Scope): void {
  writer.tag(1, WIRE_BYTES);
  const at = writer.begin(1);
  writer.tag(1, WIRE_BYTES);
  writer.string(scope.name);
  if (scope.version) {
    writer.tag(2, WIRE_BYTES);
    writer.string(scope.version);
  }
  const { attributes, droppedAttributesCount } = scope as Scope & {
    attributes?: Attributes;
    droppedAttributesCount?: number;
  };
  if (attributes) writeAttributes(writer, attributes, 3);
  if (droppedAttributesCount) {
    writer.tag(4, WIRE_VARINT);
    writer.uint(droppedAttributesCount);
  }
  writer.end(at, 1);
}

/** Spans by resource, then by scope (object identity), in the order they first appear. */
function group(spans: readonly ReadableSpan[]): Map<Resource, Map<Scope, ReadableSpan[]>> {
  const resources = new Map<Resource, Map<Scope, ReadableSpan[]>>();
  for (const span of spans) {
    let scopes = resources.get(span.resource);
    if (scopes === undefined) {
      scopes = new Map();
      resources.set(span.resource, scopes);
    }
    let list = scopes.get(span.instrumentationScope);
    if (list === undefined) {
      list = [];
      scopes.set(span.instrumentationScope, list);
    }
    list.push(span);
  }
  return resources;
}

/** A span of Tollgate's is 300–600 bytes; the writer grows when a batch needs more. */
const BYTES_PER_SPAN = 640;

/** The OTLP/protobuf ExportTraceServiceRequest carrying `spans`. */
export function encodeTraceRequest(spans: readonly ReadableSpan[]): Uint8Array {
  const writer = new Writer(spans.length * BYTES_PER_SPAN + 1024);
  for (const [resource, scopes] of group(spans)) {
    writer.tag(1, WIRE_BYTES);
    const resourceSpans = writer.begin(3);
    writeResource(writer, resource);
    for (const [scope, list] of scopes) {
      writer.tag(2, WIRE_BYTES);
      const scopeSpans = writer.begin(3);
      writeScope(writer, scope);
      for (const span of list) {
        writer.tag(2, WIRE_BYTES);
        const at = writer.begin(2);
        writeSpan(writer, span);
        writer.end(at, 2);
      }
      if (scope.schemaUrl) {
        writer.tag(3, WIRE_BYTES);
        writer.string(scope.schemaUrl);
      }
      writer.end(scopeSpans, 3);
    }
    if (resource.schemaUrl) {
      writer.tag(3, WIRE_BYTES);
      writer.string(resource.schemaUrl);
    }
    writer.end(resourceSpans, 3);
  }
  return writer.buf.subarray(0, writer.pos);
}
