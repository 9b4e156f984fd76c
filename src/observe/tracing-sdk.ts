import {
  type Attributes,
  type Context,
  createContextKey,
  ROOT_CONTEXT,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  type TraceState,
  trace,
} from '@opentelemetry/api';
import { parseTraceParent, TraceState as W3CTraceState } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
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
import { newSpanId, newTraceId, PresetTraceIds } from './tracing-ids.ts';
import { encodeTraceRequest } from './tracing-protobuf.ts';
import { Sampling } from './tracing-sampler.ts';
import type { StartTracing, TracingDeps, UnroutedRequest } from './tracing-types.ts';

/**
 * The OpenTelemetry SDK side of tracing (docs/observability.md#tracing), loaded only when main.yaml
 * has a `tracing:` block. Spans are made by hand where the route, the auth verdict and the upstream
 * attempt are known: no instrumentation patches node:http or undici on the tuned request path, and
 * no context manager is installed (each span's parent is passed explicitly).
 *
 * Whether a request is recorded is decided here, before the SDK is called (observe/tracing-sampler.ts):
 * an unsampled request makes no SDK span, no context, only the `traceparent` (flag `00`) its calls
 * carry; the SDK is asked only for spans that are recorded, so its own sampler always says yes.
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

/**
 * Puts a `traceparent` (and `tracestate`) in a flat `[name, value, …]` header list, in place of the
 * client's own copies. Written directly as W3CTraceContextPropagator.inject writes them: the
 * propagator would first need a Context (a Map copy) per call.
 */
function injectIntoList(traceparent: string, traceState: TraceState | undefined, headers: string[]): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    const raw = headers[i] as string;
    // Only a name of one of the two lengths is lowercased (a new string) to be compared.
    if (raw.length !== 11 && raw.length !== 10) continue;
    const name = raw.toLowerCase();
    if (name === 'traceparent' || name === 'tracestate') headers.splice(i, 2);
  }
  headers.push('traceparent', traceparent);
  if (traceState !== undefined) headers.push('tracestate', traceState.serialize());
}

function injectIntoRecord(
  traceparent: string,
  traceState: TraceState | undefined,
  headers: Record<string, string>,
): void {
  headers.traceparent = traceparent;
  if (traceState !== undefined) headers.tracestate = traceState.serialize();
}

/** The `traceparent` naming a span (as W3CTraceContextPropagator writes it). */
function traceparentOf(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-0${Number(context.traceFlags || TraceFlags.NONE).toString(16)}`;
}

/**
 * The SDK's sampler: every span it is asked for was decided to be recorded before the call
 * (observe/tracing-sampler.ts), the CLIENT spans by their recorded SERVER parent.
 */
const RECORD: SamplingResult = Object.freeze({ decision: SamplingDecision.RECORD_AND_SAMPLED });
const DECIDED_BEFORE: Sampler = {
  shouldSample: () => RECORD,
  toString: () => 'DecidedByTollgate',
};

export const startTracing: StartTracing = (settings, deps) => {
  const metrics = registerTracingMetrics();
  const exporter = countingExporter(createExporter(settings), metrics, deps.logger);
  const ids = new PresetTraceIds();
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      'service.name': settings.serviceName,
      'process.pid': process.pid,
    }),
    sampler: DECIDED_BEFORE,
    idGenerator: ids,
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
  const context: SpanFactory = {
    tracer: withoutSpanMetrics(provider.getTracer('tollgate')),
    ids,
    // A new trace is sampled at sample_ratio; a request that continues a trace follows its caller
    // only when the caller is one of trusted_proxies (docs/observability.md#tracing).
    sampling: new Sampling(settings.sampleRatio),
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
    start: (request) => startRequest(context, request),
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

/**
 * The tracer without its per-span self-observability (`otel.sdk.span.started`, `otel.sdk.span.live`):
 * no meter provider is given, so those counters are no-ops, yet the SDK builds two attribute records
 * (computed keys) and a closure per span for them (docs/benchmark.md#tracing-cost). The SDK keeps
 * them on the tracer, not as an option: if a later SDK moves them, the tracer is used as it comes.
 */
export function withoutSpanMetrics(tracer: Tracer): Tracer {
  const internal = tracer as { _tracerMetrics?: { startSpan?: unknown } };
  if (typeof internal._tracerMetrics?.startSpan === 'function') {
    internal._tracerMetrics = { startSpan: () => undefined };
  }
  return tracer;
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
  /** The SDK's id generator, to be handed a new trace's id before its root span is made. */
  readonly ids: PresetTraceIds;
  readonly sampling: Sampling;
  readonly redactQuery: TracingDeps['redactQuery'];
}

/** The key under which the OpenTelemetry API keeps a context's span (a `Symbol.for`, shared). */
const SPAN_KEY = createContextKey('OpenTelemetry Context Key SPAN');

/**
 * A context holding only a parent span, for `startSpan`: what `trace.setSpan(ROOT_CONTEXT, span)`
 * makes, without its copy of a Map and three closures per context. The SDK only reads it
 * (`getValue`); a write makes a full context.
 */
class ParentSpan implements Context {
  readonly #span: Span;

  constructor(span: Span) {
    this.#span = span;
  }

  getValue(key: symbol): unknown {
    return key === SPAN_KEY ? this.#span : undefined;
  }

  setValue(key: symbol, value: unknown): Context {
    return trace.setSpan(ROOT_CONTEXT, this.#span).setValue(key, value);
  }

  deleteValue(key: symbol): Context {
    return trace.setSpan(ROOT_CONTEXT, this.#span).deleteValue(key);
  }
}

/**
 * A span as a parent context: a ParentSpan while the API finds the span there (checked once), else
 * the API's own context, so a later API that keys spans otherwise is followed, never broken.
 */
const asParent: (span: Span) => Context = (() => {
  const probe = trace.wrapSpanContext({ traceId: '1'.repeat(32), spanId: '1'.repeat(16), traceFlags: 0 });
  return trace.getSpan(new ParentSpan(probe)) === probe
    ? (span: Span) => new ParentSpan(span)
    : (span: Span) => trace.setSpan(ROOT_CONTEXT, span);
})();

/**
 * The caller's span as its `traceparent` (and `tracestate`) name it, read as
 * W3CTraceContextPropagator.extract reads them; null when absent or invalid (a new trace starts).
 */
export function callerOf(headers: Record<string, string | string[] | undefined>): SpanContext | null {
  const header = headers.traceparent;
  if (!header) return null;
  const traceparent = Array.isArray(header) ? header[0] : header;
  if (typeof traceparent !== 'string') return null;
  const parsed = parseTraceParent(traceparent);
  if (parsed === null) return null;
  const caller: SpanContext = { ...parsed, isRemote: true };
  const stateHeader = headers.tracestate;
  if (stateHeader) {
    const state = Array.isArray(stateHeader) ? stateHeader.join(',') : stateHeader;
    caller.traceState = new W3CTraceState(typeof state === 'string' ? state : undefined);
  }
  return caller;
}

/** What Tollgate decided for a request's SERVER span, before any SDK call. */
interface Decision {
  readonly sampled: boolean;
  readonly traceId: string;
  /** The caller's span, when the request continues its trace. */
  readonly caller: SpanContext | null;
}

/**
 * The trace the client's `traceparent` names (when valid), or a new one, and whether this request
 * is recorded (observe/tracing-sampler.ts): a new trace by its trace id at sample_ratio, a continued
 * one by a trusted proxy's flag, anyone else's at sample_ratio.
 */
function decide(
  context: SpanFactory,
  headers: Record<string, string | string[] | undefined>,
  peerTrusted: boolean,
): Decision {
  const caller = headers.traceparent === undefined ? null : callerOf(headers);
  if (caller === null) {
    const traceId = newTraceId();
    return { sampled: context.sampling.newTrace(traceId), traceId, caller };
  }
  const callerSampled = (caller.traceFlags & TraceFlags.SAMPLED) !== 0;
  return { sampled: context.sampling.continued(callerSampled, peerTrusted), traceId: caller.traceId, caller };
}

/** Starts the SERVER span of a request decided sampled: the caller's child, or a root with its trace id. */
function startServerSpan(context: SpanFactory, name: string, startTime: number, decision: Decision): Span {
  if (decision.caller === null) context.ids.nextTraceId(decision.traceId);
  const parent = decision.caller === null ? ROOT_CONTEXT : asParent(trace.wrapSpanContext(decision.caller));
  return context.tracer.startSpan(name, { kind: SpanKind.SERVER, startTime }, parent);
}

/**
 * The attribute record of a recorded span, written directly. Not through
 * `setAttribute`/`startSpan({ attributes })`: the SDK checks every value with a new WeakSet (and
 * copies the record twice at start), the largest part of a span's cost in a profile
 * (docs/benchmark.md#tracing-cost). Every value written here is a string or a number, below the
 * SDK's default limits (128 attributes, no length limit), so the record is what the SDK would keep.
 * Every span asked of the SDK is recorded (DECIDED_BEFORE); should one not be, its writes go nowhere.
 */
function recordOf(span: Span): Attributes {
  return span.isRecording() ? (span as unknown as ReadableSpan).attributes : {};
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
function endServerSpan(span: Span, attributes: Attributes, status: number): void {
  attributes['http.response.status_code'] = status;
  if (status >= 500) {
    attributes['error.type'] = String(status);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

function traceUnrouted(context: SpanFactory, request: UnroutedRequest): string | null {
  const { req } = request;
  const decision = decide(context, req.headers, request.peerTrusted);
  // Not sampled: nothing recorded, and no call is made for it, so no context travels either.
  if (!decision.sampled) return null;
  const method = req.method ?? 'GET';
  const span = startServerSpan(context, nameMethod(method), request.startedAt, decision);
  const attributes = recordOf(span);
  attributes['network.protocol.version'] = protocolOf(req);
  attributes['client.address'] = request.clientIp;
  methodAttributes(method, attributes);
  if (request.path !== null) urlAttributes(context, request.path, request.query, attributes);
  endServerSpan(span, attributes, request.status);
  return span.spanContext().traceId;
}

/** The spans of one routed request: recorded ones, or only the context its calls carry. */
function startRequest(context: SpanFactory, request: ProxyRequest): RequestTrace {
  const decision = decide(context, request.req.headers, request.peerTrusted);
  return decision.sampled
    ? new TracedRequest(context, request, decision)
    : new UnsampledRequest(decision.traceId, decision.caller?.traceState);
}

/**
 * A request not recorded: no SDK span, nothing built but the `traceparent` of each call it makes,
 * as the SDK would have made its unrecorded CLIENT span (the trace id, a new span id, flag `00`, the
 * caller's trace state), so the upstream and the auth service can still join the trace.
 */
class UnsampledRequest implements RequestTrace {
  readonly traceId = null;
  readonly #traceId: string;
  readonly #traceState: TraceState | undefined;

  constructor(traceId: string, traceState: TraceState | undefined) {
    this.#traceId = traceId;
    this.#traceState = traceState;
  }

  authOutcome(): void {}

  upstreamAttempt(_request: ProxyRequest, _server: UpstreamServer, headers: string[]): ClientSpan {
    injectIntoList(this.#traceparent(), this.#traceState, headers);
    return UNRECORDED;
  }

  authCall(_origin: string, _method: string, headers: Record<string, string>): ClientSpan {
    injectIntoRecord(this.#traceparent(), this.#traceState, headers);
    return UNRECORDED;
  }

  #traceparent(): string {
    return `00-${this.#traceId}-${newSpanId()}-00`;
  }

  end(): void {}
}

/** The spans of one recorded request. An object with fields, not closures: one allocation per request. */
class TracedRequest implements RequestTrace {
  readonly traceId: string;
  readonly #context: SpanFactory;
  readonly #span: Span;
  /** The server span's attribute record. */
  readonly #attributes: Attributes;
  /** The server span as the parent of this request's client spans (made when the first is). */
  #asParent: Context | null = null;

  constructor(context: SpanFactory, request: ProxyRequest, decision: Decision) {
    this.#context = context;
    const { req, route } = request;
    const method = req.method ?? 'GET';
    this.#span = startServerSpan(
      context,
      `${nameMethod(method)} ${route.prefix}`,
      request.startedAt,
      decision,
    );
    const attributes = recordOf(this.#span);
    this.#attributes = attributes;
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
    const { host, port } = hostAndPort(server.origin);
    const method = request.req.method ?? 'GET';
    const span = this.#context.tracer.startSpan(
      nameMethod(method),
      { kind: SpanKind.CLIENT },
      this.#parentContext(),
    );
    const attributes = recordOf(span);
    const query =
      request.forwardQuery === '' ? '' : this.#context.redactQuery(request.forwardQuery, request.path);
    attributes['server.address'] = host;
    attributes['server.port'] = port;
    attributes['url.full'] = `${server.origin}${request.path}${query === '' ? '' : `?${query}`}`;
    methodAttributes(method, attributes);
    const spanContext = span.spanContext();
    injectIntoList(traceparentOf(spanContext), spanContext.traceState, headers);
    return new CallSpan(span, attributes);
  }

  authCall(origin: string, method: string, headers: Record<string, string>): ClientSpan {
    const { host, port } = hostAndPort(origin);
    const span = this.#context.tracer.startSpan(
      `${method} forward-auth`,
      { kind: SpanKind.CLIENT },
      this.#parentContext(),
    );
    const attributes = recordOf(span);
    // Never the auth service's configured path or query: they may hold a secret.
    attributes['http.request.method'] = method;
    attributes['server.address'] = host;
    attributes['server.port'] = port;
    attributes['tollgate.call'] = 'forward_auth';
    const spanContext = span.spanContext();
    injectIntoRecord(traceparentOf(spanContext), spanContext.traceState, headers);
    return new CallSpan(span, attributes);
  }

  /** The server span as a parent context, made once per request, when its first CLIENT span is. */
  #parentContext(): Context {
    this.#asParent ??= asParent(this.#span);
    return this.#asParent;
  }

  end(status: number): void {
    endServerSpan(this.#span, this.#attributes, status);
  }
}

/** A CLIENT span: an error when the call failed or was answered 4xx/5xx (semantic conventions). */
class CallSpan implements ClientSpan {
  readonly #span: Span;
  readonly #attributes: Attributes;
  #status = 0;

  constructor(span: Span, attributes: Attributes) {
    this.#span = span;
    this.#attributes = attributes;
  }

  responded(status: number): void {
    this.#status = status;
    this.#attributes['http.response.status_code'] = status;
  }

  attribute(name: string, value: string): void {
    this.#attributes[name] = value;
  }

  end(errorType?: string | null): void {
    const type = errorType === undefined && this.#status >= 400 ? String(this.#status) : errorType;
    if (typeof type === 'string') {
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
