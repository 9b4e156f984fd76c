import { randomFillSync } from 'node:crypto';
import type { IdGenerator } from '@opentelemetry/sdk-trace';

/**
 * Trace and span ids (docs/observability.md#tracing), cut from a pooled buffer of random bytes that
 * is refilled from the CSPRNG once every few hundred ids and written as hex once per refill: an id
 * is a slice of that string (V8 keeps it as a view, no copy), where the SDK's RandomIdGenerator
 * draws `Math.random()` per 4 bytes and writes each id as hex on its own
 * (docs/benchmark.md#tracing-cost).
 */

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolHex = '';
let offset = POOL_BYTES;

function randomId(bytes: number): string {
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    poolHex = pool.toString('hex');
    offset = 0;
  }
  const start = offset;
  offset += bytes;
  for (let i = start; i < offset; i++) if (pool[i] !== 0) return poolHex.slice(start * 2, offset * 2);
  // An all-zero id is invalid (W3C Trace Context): its last byte made 1, as the SDK's generator does.
  return `${'0'.repeat(bytes * 2 - 2)}01`;
}

/** A new trace id: 32 lowercase hex digits, never all zeros. */
export const newTraceId = (): string => randomId(16);

/** A new span id: 16 lowercase hex digits, never all zeros. */
export const newSpanId = (): string => randomId(8);

/**
 * The SDK's id generator. A new trace's id is drawn by Tollgate before the SDK is called, because
 * the sampling decision follows it (TraceIdRatioBased's rule): `nextTraceId` hands that id to the
 * one `startSpan` that follows; the SDK asks for a trace id only for a span without a valid parent.
 */
export class PresetTraceIds implements IdGenerator {
  #next: string | null = null;

  /** The trace id the next root span takes. */
  nextTraceId(traceId: string): void {
    this.#next = traceId;
  }

  generateTraceId(): string {
    const next = this.#next;
    if (next === null) return newTraceId();
    this.#next = null;
    return next;
  }

  generateSpanId(): string {
    return newSpanId();
  }
}
