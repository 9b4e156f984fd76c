/**
 * Who decides whether a request is recorded (docs/observability.md#tracing), decided by Tollgate
 * before any call to the SDK, so that an unsampled request makes no SDK span at all
 * (docs/benchmark.md#tracing-cost). The rules are the SDK's ParentBasedSampler with a
 * TraceIdRatioBasedSampler root, except for a caller that is not trusted:
 *
 * - a new trace (no valid `traceparent`) is recorded when its trace id passes the ratio
 *   (TraceIdRatioBasedSampler's rule: the same trace id always gets the same decision);
 * - a trace continued from one of `trusted_proxies` follows the caller's sampled flag, both ways;
 * - a trace continued from anyone else is drawn at `sample_ratio` with a random number, not from its
 *   trace id: the caller chose that id, and the ratio rule is a pure function of it, so a caller
 *   could pick ids that are always sampled. Its sampled flag is a request to spend CPU and export
 *   queue on this request, followed only from trusted proxies.
 */
export class Sampling {
  readonly #ratio: number;
  /** TraceIdRatioBasedSampler's bound: a trace id whose 32-bit parts XOR below it is recorded. */
  readonly #upperBound: number;

  constructor(ratio: number) {
    // As TraceIdRatioBasedSampler normalises it: above 1 is 1, NaN and below 0 are 0.
    this.#ratio = ratio > 0 ? Math.min(ratio, 1) : 0;
    this.#upperBound = this.#ratio === 1 ? 2 ** 32 : Math.floor(this.#ratio * 0xffffffff);
  }

  /** A new trace, its id drawn by Tollgate (32 lowercase hex digits, not all zeros). */
  newTrace(traceId: string): boolean {
    // At 1 every trace passes: no need to read the id (docs/benchmark.md#tracing-cost).
    return this.#ratio === 1 || traceIdPart(traceId) < this.#upperBound;
  }

  /** A trace continued from a caller's valid `traceparent`, with its sampled flag. */
  continued(callerSampled: boolean, callerTrusted: boolean): boolean {
    if (callerTrusted) return callerSampled;
    return this.#ratio === 1 || (this.#ratio > 0 && Math.random() < this.#ratio);
  }
}

/**
 * The XOR of a trace id's four 32-bit parts (TraceIdRatioBasedSampler's accumulation), read digit by
 * digit as the SDK reads it: no substring per part.
 */
function traceIdPart(traceId: string): number {
  let accumulation = 0;
  for (let i = 0; i < 32; i += 8) {
    let part = 0;
    for (let j = 0; j < 8; j++) {
      const c = traceId.charCodeAt(i + j);
      part = (part << 4) | (c < 58 ? c - 48 : c < 71 ? c - 55 : c - 87);
    }
    accumulation = (accumulation ^ part) >>> 0;
  }
  return accumulation;
}
