import type { TracingSettings } from './types.ts';
import { readHttpUrl } from './validate-forward.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

/** main.yaml's `tracing:` block (docs/observability.md#tracing). */
export const TRACING_KEYS = [
  'endpoint',
  'protocol',
  'sample_ratio',
  'service_name',
  'queue_size',
  'batch_delay_seconds',
] as const;

const PROTOCOLS: readonly TracingSettings['protocol'][] = ['http/protobuf', 'http/json'];

/** The OpenTelemetry batch processor's defaults: a bounded queue, sent every 5 s or 512 spans. */
const DEFAULT_QUEUE_SIZE = 2048;
const DEFAULT_BATCH_DELAY_SECONDS = 5;

/**
 * `tracing: { endpoint, protocol, sample_ratio, service_name, queue_size, batch_delay_seconds }`.
 * Only `endpoint` is required. The endpoint is the collector's base URL: it may carry a path prefix,
 * but no credentials (OTLP/HTTP exporters never send them from the URL), query or fragment.
 */
export function readTracing(r: YamlReader, field: Field): TracingSettings | undefined {
  const fields = r.fields(field.node, field.path, TRACING_KEYS);
  if (fields === null) return undefined;
  const get = (key: (typeof TRACING_KEYS)[number]): Field | undefined => {
    const entry = fields.get(key);
    return entry === undefined || r.isNull(entry.node) ? undefined : entry;
  };
  const endpointField = get('endpoint');
  if (endpointField === undefined) {
    r.report(field.keyNode, field.path, "tracing needs 'endpoint': the collector's OTLP/HTTP URL");
  }
  const endpoint = endpointField === undefined ? undefined : readEndpoint(r, endpointField);
  const protocolField = get('protocol');
  const protocol = protocolField === undefined ? 'http/protobuf' : readProtocol(r, protocolField);
  const ratioField = get('sample_ratio');
  const sampleRatio = ratioField === undefined ? 1 : r.number(ratioField, { min: 0, max: 1 });
  const nameField = get('service_name');
  const serviceName = nameField === undefined ? 'tollgate' : r.string(nameField);
  const queueField = get('queue_size');
  const queueSize =
    queueField === undefined
      ? DEFAULT_QUEUE_SIZE
      : r.number(queueField, { integer: true, min: 1, max: 1_000_000 });
  const delayField = get('batch_delay_seconds');
  const delaySeconds =
    delayField === undefined
      ? DEFAULT_BATCH_DELAY_SECONDS
      : r.number(delayField, { min: 0, minExclusive: true, max: 60 });
  if (
    endpoint === undefined ||
    protocol === undefined ||
    sampleRatio === undefined ||
    serviceName === undefined ||
    queueSize === undefined ||
    delaySeconds === undefined
  ) {
    return undefined;
  }
  return {
    endpoint,
    protocol,
    sampleRatio,
    serviceName,
    queueSize,
    batchDelayMs: Math.max(1, Math.round(delaySeconds * 1000)),
  };
}

function readEndpoint(r: YamlReader, field: Field): string | undefined {
  const url = readHttpUrl(r, field);
  if (url === undefined) return undefined;
  const parsed = new URL(url);
  // The URL is never repeated in a message: it could hold a password.
  if (parsed.username !== '' || parsed.password !== '') {
    r.report(r.at(field), field.path, 'must not carry credentials (user:password@): they would not be sent');
    return undefined;
  }
  if (parsed.search !== '' || url.includes('?')) {
    r.report(r.at(field), field.path, 'must not have a ?query: spans are sent to <endpoint>/v1/traces');
    return undefined;
  }
  return url;
}

function readProtocol(r: YamlReader, field: Field): TracingSettings['protocol'] | undefined {
  const value = r.string(field);
  if (value === undefined) return undefined;
  const protocol = PROTOCOLS.find((candidate) => candidate === value);
  if (protocol === undefined) {
    r.report(r.at(field), field.path, `unknown protocol '${value}' (expected ${PROTOCOLS.join(' or ')})`);
  }
  return protocol;
}
