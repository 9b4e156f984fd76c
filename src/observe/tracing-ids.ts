import { randomFillSync } from 'node:crypto';
import type { IdGenerator } from '@opentelemetry/sdk-trace';

/**
 * Trace and span ids (docs/observability.md#tracing), cut from a pooled buffer of random bytes that
 * is refilled from the CSPRNG once every few hundred ids: one `toString('hex')` per id, where the
 * SDK's RandomIdGenerator draws `Math.random()` per 4 bytes.
 */

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let offset = POOL_BYTES;

function randomId(bytes: number): string {
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const start = offset;
  offset += bytes;
  // An all-zero id is invalid (W3C Trace Context): made non-zero as the SDK's generator does.
  let zero = true;
  for (let i = start; i < offset && zero; i++) zero = pool[i] === 0;
  if (zero) pool[offset - 1] = 1;
  return pool.toString('hex', start, offset);
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
