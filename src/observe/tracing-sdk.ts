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
import { BatchSpanProcessor, type SpanExporter, TracerProvider } from '@opentelemetry/sdk-trace';
import type { TracingSettings } from '../config/types.ts';
import { protocolOf } from '../local-response.ts';
import type { ClientSpan, ProxyRequest, RequestTrace } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import type { UpstreamServer } from '../routing/types.ts';
import { registerTracingMetrics } from './metrics.ts';
import { countingExporter, queueDropMeterProvider } from './tracing-export.ts';
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
function injectIntoList(span: Span, headers: string[]): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    const name = (headers[i] as string).toLowerCase();
    if (name === 'traceparent' || name === 'tracestate') headers.splice(i, 2);
  }
  const context = span.spanContext();
  headers.push('traceparent', traceparentOf(context));
  if (context.traceState !== undefined) headers.push('tracestate', context.traceState.serialize());
}

function injectIntoRecord(span: Span, headers: Record<string, string>): void {
  const context = span.spanContext();
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
  return settings.protocol === 'http/json'
    ? new JsonTraceExporter({ url })
    : new ProtobufTraceExporter({ url });
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

function methodAttributes(method: string | undefined, attributes: Attributes): string {
  const raw = method ?? 'GET';
  if (KNOWN_METHODS.has(raw)) {
    attributes['http.request.method'] = raw;
    return raw;
  }
  attributes['http.request.method'] = '_OTHER';
  attributes['http.request.method_original'] = raw;
  return 'HTTP';
}

/** `url.path` and `url.query` as recorded: the query without any token parameter (docs/tokens.md). */
function urlAttributes(context: SpanFactory, path: string, query: string, attributes: Attributes): void {
  attributes['url.path'] = path;
  const kept = query === '' ? '' : context.redactQuery(query, path);
  if (kept !== '') attributes['url.query'] = kept;
}

/** A SERVER span is an error only when the server failed (5xx), not when the client did. */
function endServerSpan(span: Span, status: number): void {
  span.setAttribute('http.response.status_code', status);
  if (status >= 500) {
    span.setAttribute('error.type', String(status));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

function traceUnrouted(context: SpanFactory, request: UnroutedRequest): string | null {
  const { req } = request;
  const attributes: Attributes = {
    'network.protocol.version': protocolOf(req),
    'client.address': request.clientIp,
  };
  const name = methodAttributes(req.method, attributes);
  if (request.path !== null) urlAttributes(context, request.path, request.query, attributes);
  const span = context.tracer.startSpan(
    name,
    { kind: SpanKind.SERVER, attributes, startTime: request.startedAt },
    parentOf(context, req.headers, request.peerTrusted),
  );
  const traceId = span.isRecording() ? span.spanContext().traceId : null;
  endServerSpan(span, request.status);
  return traceId;
}

/** The spans of one routed request. An object with fields, not closures: one allocation per request. */
class TracedRequest implements RequestTrace {
  readonly traceId: string | null;
  readonly #context: SpanFactory;
  readonly #span: Span;
  /** The server span as the parent of this request's client spans. */
  readonly #asParent: Context;

  constructor(context: SpanFactory, request: ProxyRequest) {
    this.#context = context;
    const { req, route } = request;
    const attributes: Attributes = {
      'http.route': route.prefix,
      'url.scheme': request.secure ? 'https' : 'http',
      'server.address': request.host,
      'network.protocol.version': protocolOf(req),
      'client.address': request.clientIp,
      'tollgate.auth.method': route.auth?.type ?? 'none',
    };
    const method = methodAttributes(req.method, attributes);
    urlAttributes(context, request.path, request.query, attributes);
    this.#span = context.tracer.startSpan(
      `${method} ${route.prefix}`,
      { kind: SpanKind.SERVER, attributes, startTime: request.startedAt },
      parentOf(context, req.headers, request.peerTrusted),
    );
    this.#asParent = trace.setSpan(ROOT_CONTEXT, this.#span);
    this.traceId = this.#span.isRecording() ? this.#span.spanContext().traceId : null;
  }

  authOutcome(request: ProxyRequest, verdict: Verdict): void {
    if (verdict.kind === 'pass') {
      if (request.route.auth !== null) this.#span.setAttribute('tollgate.auth.result', 'allowed');
      return;
    }
    if (verdict.kind === 'redirect' || (verdict.error === undefined && verdict.status < 400)) {
      // A browser link exchanged for a cookie, or an auth service's login redirect.
      this.#span.setAttribute('tollgate.auth.result', 'redirected');
      return;
    }
    this.#span.setAttributes({
      'tollgate.auth.result': 'refused',
      // Tollgate's own error code, or the auth service's refusal relayed as it came.
      'tollgate.auth.reason': verdict.error ?? `auth_service_${verdict.status}`,
    });
  }

  upstreamAttempt(request: ProxyRequest, server: UpstreamServer, headers: string[]): ClientSpan {
    const { host, port } = hostAndPort(server.origin);
    const method = request.req.method ?? 'GET';
    const query =
      request.forwardQuery === '' ? '' : this.#context.redactQuery(request.forwardQuery, request.path);
    const attributes: Attributes = {
      'server.address': host,
      'server.port': port,
      'url.full': `${server.origin}${request.path}${query === '' ? '' : `?${query}`}`,
    };
    const name = methodAttributes(method, attributes);
    const span = this.#context.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, this.#asParent);
    injectIntoList(span, headers);
    return new CallSpan(span);
  }

  authCall(origin: string, method: string, headers: Record<string, string>): ClientSpan {
    const { host, port } = hostAndPort(origin);
    // Never the auth service's configured path or query: they may hold a secret.
    const attributes: Attributes = {
      'http.request.method': method,
      'server.address': host,
      'server.port': port,
      'tollgate.call': 'forward_auth',
    };
    const span = this.#context.tracer.startSpan(
      `${method} forward-auth`,
      { kind: SpanKind.CLIENT, attributes },
      this.#asParent,
    );
    injectIntoRecord(span, headers);
    return new CallSpan(span);
  }

  end(status: number): void {
    endServerSpan(this.#span, status);
  }
}

/** A CLIENT span: an error when the call failed or was answered 4xx/5xx (semantic conventions). */
class CallSpan implements ClientSpan {
  readonly #span: Span;
  #status = 0;

  constructor(span: Span) {
    this.#span = span;
  }

  responded(status: number): void {
    this.#status = status;
    this.#span.setAttribute('http.response.status_code', status);
  }

  attribute(name: string, value: string): void {
    this.#span.setAttribute(name, value);
  }

  end(errorType?: string | null): void {
    const type = errorType === undefined && this.#status >= 400 ? String(this.#status) : errorType;
    if (typeof type === 'string') {
      this.#span.setAttribute('error.type', type);
      this.#span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.#span.end();
  }
}

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
