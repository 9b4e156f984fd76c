import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  RandomIdGenerator,
  type ReadableSpan,
  type SpanExporter,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { TracingSettings } from '../config/types.ts';
import { protocolOf } from '../local-response.ts';
import type { ClientSpan, ProxyRequest, RequestTrace } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import type { UpstreamServer } from '../routing/types.ts';
import { registerTracingMetrics } from './metrics.ts';
import { countingExporter, queueDropMeterProvider } from './tracing-export.ts';
import { encodeTraceRequest } from './tracing-protobuf.ts';
import { CallerSampler, fromUntrustedCaller } from './tracing-sampler.ts';
import type { StartTracing, TracingDeps, UnroutedRequest } from './tracing-types.ts';

/**
 * The OpenTelemetry SDK side of tracing (docs/observability.md#tracing), loaded only when main.yaml
 * has a `tracing:` block. Spans are made by hand where the route, the auth verdict and the upstream
 * attempt are known: no instrumentation patches node:http or undici on the tuned request path, and
 * no context manager is installed (each span's parent is passed explicitly).
 */

/** Methods semantic conventions name as such; anything else is `_OTHER` (a bounded attribute). */
const KNOWN_METHODS = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
]);

const headerGetter: TextMapGetter<Record<string, string | string[] | undefined>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

/**
 * Puts the span's `traceparent` (and `tracestate`) in a flat `[name, value, …]` header list, in place
 * of the client's own copies. Written directly as W3CTraceContextPropagator.inject writes them: the
 * propagator would first need a Context (a Map copy) per call.
 */
function injectIntoList(context: SpanContext, headers: string[]): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    const raw = headers[i] as string;
    // Only a name of one of the two lengths is lowercased (a new string) to be compared.
    if (raw.length !== 11 && raw.length !== 10) continue;
    const name = raw.toLowerCase();
    if (name === 'traceparent' || name === 'tracestate') headers.splice(i, 2);
  }
  headers.push('traceparent', traceparentOf(context));
  if (context.traceState !== undefined) headers.push('tracestate', context.traceState.serialize());
}

function injectIntoRecord(context: SpanContext, headers: Record<string, string>): void {
  headers.traceparent = traceparentOf(context);
  if (context.traceState !== undefined) headers.tracestate = context.traceState.serialize();
}

function traceparentOf(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-0${Number(context.traceFlags || TraceFlags.NONE).toString(16)}`;
}

export const startTracing: StartTracing = (settings, deps) => {
  const metrics = registerTracingMetrics();
  const exporter = countingExporter(createExporter(settings), metrics, deps.logger);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      'service.name': settings.serviceName,
      'process.pid': process.pid,
    }),
    // A new trace is sampled at sample_ratio; a request that continues a trace follows its caller
    // only when the caller is one of trusted_proxies (docs/observability.md#tracing).
    sampler: new CallerSampler(settings.sampleRatio),
    spanProcessors: [
      new BatchSpanProcessor({
        exporter,
        maxQueueSize: settings.queueSize,
        maxExportBatchSize: Math.min(512, settings.queueSize),
        scheduledDelayMillis: settings.batchDelayMs,
        // What a full queue drops is counted through the processor's own self-observability counter.
        selfObsMeterProvider: queueDropMeterProvider(metrics),
      }),
    ],
  });
  const tracer = provider.getTracer('tollgate');
  const context: SpanFactory = {
    tracer,
    propagator: new W3CTraceContextPropagator(),
    redactQuery: deps.redactQuery,
  };
  deps.logger.info(
    {
      event: 'tracing_started',
      endpoint: new URL(settings.endpoint).origin,
      protocol: settings.protocol,
      sample_ratio: settings.sampleRatio,
    },
    'exporting traces',
  );
  return {
    start: (request) => new TracedRequest(context, request),
    unrouted: (request) => traceUnrouted(context, request),
    shutdown: () => provider.shutdown(),
  };
};

/** `<endpoint>/v1/traces`, unless the endpoint already names that path. */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (!url.pathname.endsWith('/v1/traces')) url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`;
  return url.href;
}

function createExporter(settings: TracingSettings): SpanExporter {
  const url = tracesUrl(settings.endpoint);
  if (settings.protocol === 'http/json') return new JsonTraceExporter({ url });
  return withOwnProtobufEncoder(new ProtobufTraceExporter({ url }));
}

interface Serializer {
  serializeRequest(spans: ReadableSpan[]): Uint8Array | undefined;
  deserializeResponse(data: Uint8Array): unknown;
}

/**
 * The protobuf exporter with its request encoder replaced by observe/tracing-protobuf.ts (the same
 * bytes for a third of the CPU, docs/benchmark.md#tracing-cost); the SDK's transport, retries and
 * response handling stay. The SDK keeps its serializer on the exporter's delegate, not as an option:
 * if a later SDK moves it, the exporter is used as it comes (its own encoder), never broken.
 */
export function withOwnProtobufEncoder(exporter: SpanExporter): SpanExporter {
  const delegate = (exporter as { _delegate?: { _serializer?: Serializer } })._delegate;
  const sdk = delegate?._serializer;
  if (delegate === undefined || typeof sdk?.serializeRequest !== 'function') return exporter;
  delegate._serializer = {
    serializeRequest: (spans) => encodeTraceRequest(spans),
    deserializeResponse: (data) => sdk.deserializeResponse(data),
  };
  return exporter;
}

interface SpanFactory {
  readonly tracer: Tracer;
  readonly propagator: W3CTraceContextPropagator;
  readonly redactQuery: TracingDeps['redactQuery'];
}

/**
 * The trace the client's `traceparent` names (when valid), or a new one. Only a trusted proxy's
 * sampled flag is followed; anyone else's trace is continued but sampled at sample_ratio.
 */
function parentOf(
  context: SpanFactory,
  headers: Record<string, string | string[] | undefined>,
  peerTrusted: boolean,
): Context {
  if (headers.traceparent === undefined) return ROOT_CONTEXT;
  const parent = context.propagator.extract(ROOT_CONTEXT, headers, headerGetter);
  return peerTrusted ? parent : fromUntrustedCaller(parent);
}

/**
 * The attribute record of a recording span, written directly; null when the span records nothing
 * (not sampled), so an unsampled request builds no attributes at all. Not through
 * `setAttribute`/`startSpan({ attributes })`: the SDK checks every value with a new WeakSet (and
 * copies the record twice at start), the largest part of a span's cost in a profile
 * (docs/benchmark.md#tracing-cost). Every value written here is a string or a number, below the
 * SDK's default limits (128 attributes, no length limit), so the record is what the SDK would keep.
 */
function recordOf(span: Span): Attributes | null {
  return span.isRecording() ? (span as unknown as ReadableSpan).attributes : null;
}

/** `http.request.method` (and `_original`) of a known or other method; returns the span name's method. */
function methodAttributes(raw: string, attributes: Attributes): string {
  if (KNOWN_METHODS.has(raw)) {
    attributes['http.request.method'] = raw;
    return raw;
  }
  attributes['http.request.method'] = '_OTHER';
  attributes['http.request.method_original'] = raw;
  return 'HTTP';
}

/** A span name's method: the method when semantic conventions name it, else `HTTP`. */
function nameMethod(raw: string): string {
  return KNOWN_METHODS.has(raw) ? raw : 'HTTP';
}

/** `url.path` and `url.query` as recorded: the query without any token parameter (docs/tokens.md). */
function urlAttributes(context: SpanFactory, path: string, query: string, attributes: Attributes): void {
  attributes['url.path'] = path;
  const kept = query === '' ? '' : context.redactQuery(query, path);
  if (kept !== '') attributes['url.query'] = kept;
}

/** A SERVER span is an error only when the server failed (5xx), not when the client did. */
function endServerSpan(span: Span, status: number): void {
  const attributes = recordOf(span);
  if (attributes !== null) {
    attributes['http.response.status_code'] = status;
    if (status >= 500) {
      attributes['error.type'] = String(status);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
  }
  span.end();
}

function traceUnrouted(context: SpanFactory, request: UnroutedRequest): string | null {
  const { req } = request;
  const method = req.method ?? 'GET';
  const span = context.tracer.startSpan(
    nameMethod(method),
    { kind: SpanKind.SERVER, startTime: request.startedAt },
    parentOf(context, req.headers, request.peerTrusted),
  );
  const attributes = recordOf(span);
  if (attributes === null) {
    span.end();
    return null;
  }
  attributes['network.protocol.version'] = protocolOf(req);
  attributes['client.address'] = request.clientIp;
  methodAttributes(method, attributes);
  if (request.path !== null) urlAttributes(context, request.path, request.query, attributes);
  const { traceId } = span.spanContext();
  endServerSpan(span, request.status);
  return traceId;
}

/** Span ids of the CLIENT spans of an unsampled request, made without the SDK (see upstreamAttempt). */
const ids = new RandomIdGenerator();

/** The spans of one routed request. An object with fields, not closures: one allocation per request. */
class TracedRequest implements RequestTrace {
  readonly traceId: string | null;
  readonly #context: SpanFactory;
  readonly #span: Span;
  /** The server span's attribute record; null when this request is not sampled. */
  readonly #attributes: Attributes | null;
  /** The server span as the parent of this request's client spans (made when the first is). */
  #asParent: Context | null = null;

  constructor(context: SpanFactory, request: ProxyRequest) {
    this.#context = context;
    const { req, route } = request;
    const method = req.method ?? 'GET';
    this.#span = context.tracer.startSpan(
      `${nameMethod(method)} ${route.prefix}`,
      { kind: SpanKind.SERVER, startTime: request.startedAt },
      parentOf(context, req.headers, request.peerTrusted),
    );
    const attributes = recordOf(this.#span);
    this.#attributes = attributes;
    if (attributes === null) {
      this.traceId = null;
      return;
    }
    attributes['http.route'] = route.prefix;
    attributes['url.scheme'] = request.secure ? 'https' : 'http';
    attributes['server.address'] = request.host;
    attributes['network.protocol.version'] = protocolOf(req);
    attributes['client.address'] = request.clientIp;
    attributes['tollgate.auth.method'] = route.auth?.type ?? 'none';
    methodAttributes(method, attributes);
    urlAttributes(context, request.path, request.query, attributes);
    this.traceId = this.#span.spanContext().traceId;
  }

  authOutcome(request: ProxyRequest, verdict: Verdict): void {
    const attributes = this.#attributes;
    if (attributes === null) return;
    if (verdict.kind === 'pass') {
      if (request.route.auth !== null) attributes['tollgate.auth.result'] = 'allowed';
      return;
    }
    if (verdict.kind === 'redirect' || (verdict.error === undefined && verdict.status < 400)) {
      // A browser link exchanged for a cookie, or an auth service's login redirect.
      attributes['tollgate.auth.result'] = 'redirected';
      return;
    }
    attributes['tollgate.auth.result'] = 'refused';
    // Tollgate's own error code, or the auth service's refusal relayed as it came.
    attributes['tollgate.auth.reason'] = verdict.error ?? `auth_service_${verdict.status}`;
  }

  upstreamAttempt(request: ProxyRequest, server: UpstreamServer, headers: string[]): ClientSpan {
    if (this.#attributes === null) {
      // Not sampled: the CLIENT span would record nothing either (the parent's decision), only its
      // context travels. Written as the SDK would make it, without making the span.
      injectIntoList(this.#childOfUnsampled(), headers);
      return UNRECORDED;
    }
    const { host, port } = hostAndPort(server.origin);
    const method = request.req.method ?? 'GET';
    const span = this.#context.tracer.startSpan(
      nameMethod(method),
      { kind: SpanKind.CLIENT },
      this.#parentContext(),
    );
    const attributes = recordOf(span);
    if (attributes !== null) {
      const query =
        request.forwardQuery === '' ? '' : this.#context.redactQuery(request.forwardQuery, request.path);
      attributes['server.address'] = host;
      attributes['server.port'] = port;
      attributes['url.full'] = `${server.origin}${request.path}${query === '' ? '' : `?${query}`}`;
      methodAttributes(method, attributes);
    }
    injectIntoList(span.spanContext(), headers);
    return new CallSpan(span, attributes);
  }

  authCall(origin: string, method: string, headers: Record<string, string>): ClientSpan {
    if (this.#attributes === null) {
      injectIntoRecord(this.#childOfUnsampled(), headers);
      return UNRECORDED;
    }
    const { host, port } = hostAndPort(origin);
    const span = this.#context.tracer.startSpan(
      `${method} forward-auth`,
      { kind: SpanKind.CLIENT },
      this.#parentContext(),
    );
    const attributes = recordOf(span);
    if (attributes !== null) {
      // Never the auth service's configured path or query: they may hold a secret.
      attributes['http.request.method'] = method;
      attributes['server.address'] = host;
      attributes['server.port'] = port;
      attributes['tollgate.call'] = 'forward_auth';
    }
    injectIntoRecord(span.spanContext(), headers);
    return new CallSpan(span, attributes);
  }

  /** The server span as a parent context, made once per request, when its first CLIENT span is. */
  #parentContext(): Context {
    this.#asParent ??= trace.setSpan(ROOT_CONTEXT, this.#span);
    return this.#asParent;
  }

  /**
   * The context of a CLIENT span under an unsampled server span: what the SDK's ParentBasedSampler
   * gives it (not sampled, the parent's trace state, a new span id).
   */
  #childOfUnsampled(): SpanContext {
    const parent = this.#span.spanContext();
    return {
      traceId: parent.traceId,
      spanId: ids.generateSpanId(),
      traceFlags: TraceFlags.NONE,
      ...(parent.traceState === undefined ? {} : { traceState: parent.traceState }),
    };
  }

  end(status: number): void {
    endServerSpan(this.#span, status);
  }
}

/** A CLIENT span: an error when the call failed or was answered 4xx/5xx (semantic conventions). */
class CallSpan implements ClientSpan {
  readonly #span: Span;
  readonly #attributes: Attributes | null;
  #status = 0;

  constructor(span: Span, attributes: Attributes | null) {
    this.#span = span;
    this.#attributes = attributes;
  }

  responded(status: number): void {
    this.#status = status;
    if (this.#attributes !== null) this.#attributes['http.response.status_code'] = status;
  }

  attribute(name: string, value: string): void {
    if (this.#attributes !== null) this.#attributes[name] = value;
  }

  end(errorType?: string | null): void {
    const type = errorType === undefined && this.#status >= 400 ? String(this.#status) : errorType;
    if (typeof type === 'string' && this.#attributes !== null) {
      this.#attributes['error.type'] = type;
      this.#span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.#span.end();
  }
}

/** The CLIENT span of an unsampled request: nothing to record, nothing to end. */
const UNRECORDED: ClientSpan = Object.freeze({
  responded() {},
  attribute() {},
  end() {},
});

/** Origins come from the config (servers, auth services), so this stays as small as the config. */
const addresses = new Map<string, { host: string; port: number }>();

/** `server.address` and `server.port` of an origin, parsed once. */
function hostAndPort(origin: string): { host: string; port: number } {
  let known = addresses.get(origin);
  if (known === undefined) {
    const url = new URL(origin);
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    known = { host: url.hostname.replace(/^\[|\]$/g, ''), port };
    addresses.set(origin, known);
  }
  return known;
}
