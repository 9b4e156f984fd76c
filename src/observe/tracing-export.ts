import {
  type Counter,
  createNoopMeter,
  type Meter,
  type MeterProvider,
  type MetricOptions,
} from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { Logger } from '../log.ts';
import type { registerTracingMetrics } from './metrics.ts';

/**
 * What becomes of exported spans (docs/observability.md#tracing): counted as exported or dropped,
 * and an unreachable or refusing collector logged once per outage, not once per batch.
 */

type TracingMetrics = ReturnType<typeof registerTracingMetrics>;

/** The batch processor's self-observability counter; a full queue adds to it with `queue_full`. */
const SPANS_PROCESSED = 'otel.sdk.processor.span.processed';

/** The exporter with its outcomes counted; a failed export's spans are dropped (`export_failed`). */
export function countingExporter(inner: SpanExporter, metrics: TracingMetrics, logger: Logger): SpanExporter {
  let failing = false;
  return {
    export(spans, done) {
      inner.export(spans, (result) => {
        if (result.code === ExportResultCode.SUCCESS) {
          metrics.exported.inc(spans.length);
          if (failing) {
            failing = false;
            logger.info({ event: 'trace_export_recovered' }, 'the trace collector takes spans again');
          }
        } else {
          metrics.dropped.inc({ reason: 'export_failed' }, spans.length);
          if (!failing) {
            failing = true;
            logger.warn(
              { event: 'trace_export_failed', detail: result.error?.message ?? 'unknown error' },
              'the trace collector did not take the spans: they are dropped until it does',
            );
          }
        }
        done(result);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

/**
 * A MeterProvider for the batch processor's own metrics that keeps only what it drops from a full
 * queue (the OpenTelemetry SDK counts that nowhere else a program can read); export outcomes are
 * counted by countingExporter instead, everything else goes to a no-op meter.
 */
export function queueDropMeterProvider(metrics: TracingMetrics): MeterProvider {
  const noop = createNoopMeter();
  const meter: Meter = Object.assign(Object.create(noop) as Meter, {
    createCounter(name: string, options?: MetricOptions): Counter {
      if (name !== SPANS_PROCESSED) return noop.createCounter(name, options);
      return {
        add(value, attributes) {
          if (attributes?.['error.type'] === 'queue_full')
            metrics.dropped.inc({ reason: 'queue_full' }, value);
        },
      };
    },
  });
  return { getMeter: () => meter };
}
