import { type Context, createContextKey } from '@opentelemetry/api';
import {
  AlwaysOnSampler,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace';

/**
 * Who decides whether a request is recorded (docs/observability.md#tracing). A `traceparent`'s
 * sampled flag is a request to spend CPU and export queue on this request: it is followed only from
 * `trusted_proxies`. From anyone else the trace id is continued (the request still joins the
 * caller's trace when it is recorded), but `sample_ratio` alone decides.
 */

/** Set on the parent context of a request whose `traceparent` came from an untrusted peer. */
const UNTRUSTED_CALLER = createContextKey('tollgate.untrusted_caller');

/** The parent context of an untrusted peer's request: its sampled flag will not be followed. */
export function fromUntrustedCaller(parent: Context): Context {
  return parent.setValue(UNTRUSTED_CALLER, true);
}

const RECORD: SamplingResult = Object.freeze({ decision: SamplingDecision.RECORD_AND_SAMPLED });
const DROP: SamplingResult = Object.freeze({ decision: SamplingDecision.NOT_RECORD });

/**
 * At `sample_ratio: 1` every new trace is recorded: AlwaysOnSampler says so without the ratio
 * sampler's validation and parse of each trace id, a cost per request (docs/benchmark.md#tracing-cost).
 */
function rootSampler(ratio: number): Sampler {
  return ratio >= 1 ? new AlwaysOnSampler() : new TraceIdRatioBasedSampler(ratio);
}

/**
 * New traces (and every span whose parent is one of ours) are sampled as ParentBasedSampler with
 * the ratio root. A trace continued from an untrusted caller is drawn at `sample_ratio` with a
 * random number, not from its trace id: the caller chose that id, and the ratio sampler's decision
 * is a pure function of it, so a caller could pick ids that are always sampled.
 */
export class CallerSampler implements Sampler {
  readonly #ratio: number;
  readonly #trusted: Sampler;

  constructor(ratio: number) {
    this.#ratio = ratio;
    this.#trusted = new ParentBasedSampler({ root: rootSampler(ratio) });
  }

  shouldSample(...args: Parameters<Sampler['shouldSample']>): SamplingResult {
    if (args[0].getValue(UNTRUSTED_CALLER) !== true) return this.#trusted.shouldSample(...args);
    if (this.#ratio >= 1) return RECORD;
    return this.#ratio > 0 && Math.random() < this.#ratio ? RECORD : DROP;
  }

  toString(): string {
    return `CallerSampler{trusted=${this.#trusted.toString()}, untrusted=random(${this.#ratio})}`;
  }
}
