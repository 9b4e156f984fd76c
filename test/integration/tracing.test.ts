import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AuthService, OAUTH2_PROXY_COOKIE, startOauth2Proxy } from '../helpers/auth-services.ts';
import { connectHttp2, h2Request } from '../helpers/h2-client.ts';
import { type CollectedSpan, type OtlpCollector, startOtlpCollector } from '../helpers/otlp-collector.ts';
import {
  type RefusedAddress,
  refusedAddress,
  request,
  startTollgate,
  startTollgates,
  type Tollgate,
  waitFor,
} from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';
import { accessLinesByWorker, liveWorkers, sample } from '../helpers/workers.ts';

/**
 * OpenTelemetry tracing through the built process (docs/observability.md#tracing), exporting to a
 * collector of the tests' own that decodes OTLP/HTTP protobuf and JSON.
 */

const HOST = 'app.example.com';
/** Spans leave in batches; a short delay keeps the tests from waiting the default 5 s. */
const FAST_BATCHES = { batch_delay_seconds: 0.05 };
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN_ID = '00f067aa0ba902b7';

const serverSpanOf = (collector: OtlpCollector, path: string) =>
  collector.waitForSpans((span) => span.kind === 'server' && span.attributes['url.path'] === path);

const childrenOf = (collector: OtlpCollector, parent: CollectedSpan) =>
  collector.spans.filter((span) => span.parentSpanId === parent.spanId && span.traceId === parent.traceId);

/** Waits for the SERVER span of `path` and its CLIENT children (they end first, so come no later). */
async function traceOf(collector: OtlpCollector, path: string, children = 1) {
  const [server] = await serverSpanOf(collector, path);
  assert.ok(server);
  await waitFor(() => childrenOf(collector, server).length >= children, 20_000);
  return { server, children: childrenOf(collector, server) };
}

describe('tracing: spans, context and attributes (OTLP/HTTP protobuf)', () => {
  let collector: OtlpCollector;
  let upstream: Upstream;
  let auth: AuthService;
  let dead: RefusedAddress;
  let tollgate: Tollgate;

  before(async () => {
    [collector, upstream, auth, dead] = await Promise.all([
      startOtlpCollector(),
      startUpstream({ name: 'app' }),
      startOauth2Proxy(),
      refusedAddress(),
    ]);
    const servers = [upstream.address];
    tollgate = await startTollgate({
      main: {
        http2_cleartext: true,
        tracing: {
          endpoint: collector.origin,
          protocol: 'http/protobuf',
          service_name: 'edge-proxy',
          ...FAST_BATCHES,
        },
      },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/api': { servers },
              '/private': { servers, authorization: { type: 'basic', creds: 'admin:s3cret-pass' } },
              '/fwd': {
                servers,
                authorization: {
                  type: 'forward',
                  url: `${auth.origin}/oauth2/auth`,
                  auth_response_headers: ['X-Auth-Request-User'],
                },
              },
              '/dead': { servers: [dead.address] },
            },
          },
        },
      },
    });
  });

  after(async () => {
    try {
      await tollgate?.stop();
    } finally {
      await dead?.release();
      await Promise.all([collector, upstream, auth].map((closable) => closable?.close()));
    }
  });

  const send = (path: string, headers: Record<string, string> = {}) =>
    request(tollgate.proxyUrl, { path, headers: { host: HOST, ...headers } });

  it('starts a trace: one SERVER span with HTTP attributes, a CLIENT child per upstream attempt, whose id the upstream gets as traceparent; the access log names the trace', async () => {
    const res = await send('/api/items?page=2');
    assert.equal(res.status, 200);
    const { server, children } = await traceOf(collector, '/api/items');
    assert.equal(server.name, 'GET /api');
    assert.equal(server.parentSpanId, '');
    assert.equal(server.status, 'unset');
    assert.deepEqual(
      {
        method: server.attributes['http.request.method'],
        route: server.attributes['http.route'],
        path: server.attributes['url.path'],
        query: server.attributes['url.query'],
        status: server.attributes['http.response.status_code'],
        protocol: server.attributes['network.protocol.version'],
        client: server.attributes['client.address'],
        authMethod: server.attributes['tollgate.auth.method'],
      },
      {
        method: 'GET',
        route: '/api',
        path: '/api/items',
        query: 'page=2',
        status: 200,
        protocol: '1.1',
        client: '127.0.0.1',
        authMethod: 'none',
      },
    );
    assert.equal(server.resource['service.name'], 'edge-proxy');
    assert.equal(children.length, 1);
    const [client] = children as [CollectedSpan];
    assert.equal(client.kind, 'client');
    assert.equal(client.attributes['server.port'], upstream.port);
    assert.equal(client.attributes['http.response.status_code'], 200);
    assert.ok(
      client.startMs >= server.startMs && client.endMs <= server.endMs,
      'the attempt lies inside the request',
    );
    const received = upstream.requests.find((r) => r.url === '/api/items?page=2');
    assert.equal(received?.headers.traceparent, `00-${server.traceId}-${client.spanId}-01`);
    assert.ok(collector.contentTypes.every((type) => type === 'application/x-protobuf'));
    // The access line may reach us after the spans (the log is written asynchronously): wait for it.
    const accessLine = () =>
      tollgate.logs().find((l) => l.msg === 'access' && l.path === '/api/items?page=2');
    await waitFor(() => accessLine() !== undefined);
    assert.equal(accessLine()?.trace_id, server.traceId);
  });

  it("continues a valid incoming traceparent and replaces the caller's own upstream; an invalid one starts a new trace", async () => {
    const caller = `00-${TRACE_ID}-${CALLER_SPAN_ID}-01`;
    assert.equal((await send('/api/continued', { traceparent: caller, tracestate: 'vendor=1' })).status, 200);
    const { server, children } = await traceOf(collector, '/api/continued');
    assert.equal(server.traceId, TRACE_ID);
    assert.equal(server.parentSpanId, CALLER_SPAN_ID);
    const received = upstream.requests.find((r) => r.url === '/api/continued');
    assert.equal(received?.headers.traceparent, `00-${TRACE_ID}-${children[0]?.spanId}-01`);
    assert.equal(received?.headers.tracestate, 'vendor=1');

    // Version ff is forbidden and an all-zero trace id is invalid (W3C Trace Context).
    for (const [path, bad] of [
      ['/api/bad-version', `ff-${TRACE_ID}-${CALLER_SPAN_ID}-01`],
      ['/api/zero-trace', `00-${'0'.repeat(32)}-${CALLER_SPAN_ID}-01`],
    ] as const) {
      assert.equal((await send(path, { traceparent: bad })).status, 200);
      const [span] = await serverSpanOf(collector, path);
      assert.notEqual(span?.traceId, TRACE_ID);
      assert.equal(span?.parentSpanId, '');
      const upstreamSaw = upstream.requests.find((r) => r.url === path)?.headers.traceparent;
      assert.match(String(upstreamSaw), new RegExp(`^00-${span?.traceId}-[0-9a-f]{16}-01$`));
    }
  });

  it("an untrusted client's unsampled flag does not stop recording at sample_ratio 1: the ratio decides, the trace id is continued", async () => {
    const trace = 'c'.repeat(32);
    const res = await send('/api/not-sampled-caller', { traceparent: `00-${trace}-${CALLER_SPAN_ID}-00` });
    assert.equal(res.status, 200);
    const { server, children } = await traceOf(collector, '/api/not-sampled-caller');
    assert.equal(server.traceId, trace);
    assert.equal(server.parentSpanId, CALLER_SPAN_ID);
    const received = upstream.requests.find((r) => r.url === '/api/not-sampled-caller');
    assert.equal(received?.headers.traceparent, `00-${trace}-${children[0]?.spanId}-01`);
  });

  it('never records the token parameter, in any spelling, in url.path, url.query or anywhere in the export', async () => {
    const path =
      '/api/report?tollgatetoken=SECRET-ONE&keep=1&TollgateToken=SECRET-TWO&tollgate%74oken=SECRET-THREE&tollgatetoken[]=SECRET-FOUR';
    assert.equal((await send(path)).status, 200);
    const [server] = await serverSpanOf(collector, '/api/report');
    assert.equal(server?.attributes['url.path'], '/api/report');
    assert.equal(server?.attributes['url.query'], 'keep=1');
    const { children } = await traceOf(collector, '/api/report');
    assert.equal(children[0]?.attributes['url.full'], `http://${upstream.address}/api/report?keep=1`);
    const everything = Buffer.concat(collector.bodies).toString('latin1');
    assert.doesNotMatch(everything, /SECRET-/);
  });

  it('an HTTP/2 request is traced the same way, its traceparent continued from the HEADERS frame', async () => {
    const session = await connectHttp2(tollgate.proxyUrl, HOST);
    try {
      const res = await h2Request(session, {
        ':method': 'GET',
        ':path': '/api/over-h2',
        ':authority': HOST,
        ':scheme': 'http',
        traceparent: `00-${TRACE_ID}-${CALLER_SPAN_ID}-01`,
      });
      assert.equal(res.status, 200);
    } finally {
      session.close();
    }
    const { server, children } = await traceOf(collector, '/api/over-h2');
    assert.equal(server.traceId, TRACE_ID);
    assert.equal(server.attributes['network.protocol.version'], '2');
    assert.equal(server.attributes['server.address'], HOST);
    const received = upstream.requests.find((r) => r.url === '/api/over-h2');
    assert.equal(received?.headers.traceparent, `00-${TRACE_ID}-${children[0]?.spanId}-01`);
  });

  it('records the auth method and result on the SERVER span; a refusal (4xx) is not a server error', async () => {
    assert.equal((await send('/private/a')).status, 401);
    const basic = `Basic ${Buffer.from('admin:s3cret-pass').toString('base64')}`;
    assert.equal((await send('/private/b', { authorization: basic })).status, 200);
    const [refused] = await serverSpanOf(collector, '/private/a');
    const [allowed] = await serverSpanOf(collector, '/private/b');
    assert.deepEqual(
      [refused, allowed].map((span) => [
        span?.attributes['tollgate.auth.method'],
        span?.attributes['tollgate.auth.result'],
        span?.attributes['tollgate.auth.reason'],
        span?.attributes['http.response.status_code'],
        span?.status,
      ]),
      [
        ['basic', 'refused', 'missing_credentials', 401, 'unset'],
        ['basic', 'allowed', undefined, 200, 'unset'],
      ],
    );
    // Refused before any upstream attempt: no CLIENT span.
    assert.equal(childrenOf(collector, refused as CollectedSpan).length, 0);
  });

  it('a forward-auth check is a CLIENT span of the request, and the auth service gets its traceparent', async () => {
    assert.equal((await send('/fwd/in', { cookie: OAUTH2_PROXY_COOKIE })).status, 200);
    const { server, children } = await traceOf(collector, '/fwd/in', 2);
    const check = children.find((span) => span.attributes['tollgate.call'] === 'forward_auth');
    const attempt = children.find((span) => span.attributes['tollgate.call'] === undefined);
    assert.ok(check && attempt, JSON.stringify(children));
    assert.equal(check.kind, 'client');
    assert.equal(check.attributes['http.response.status_code'], 202);
    assert.equal(check.attributes['tollgate.auth.result'], 'allowed');
    assert.ok(check.endMs <= attempt.startMs + 1, 'the check comes before the upstream attempt');
    const seen = auth.checks.find((c) => c.headers['x-forwarded-uri'] === '/fwd/in');
    assert.equal(seen?.headers.traceparent, `00-${server.traceId}-${check.spanId}-01`);
    assert.equal(server.attributes['tollgate.auth.method'], 'forward');
    assert.equal(server.attributes['tollgate.auth.result'], 'allowed');

    assert.equal((await send('/fwd/out')).status, 401);
    const denied = await traceOf(collector, '/fwd/out');
    assert.equal(denied.children.length, 1, 'only the check: the upstream is never tried');
    assert.equal(denied.children[0]?.attributes['tollgate.auth.result'], 'denied');
    assert.equal(denied.children[0]?.status, 'unset', "the auth service's 401 is an answer, not a failure");
    assert.equal(denied.server.attributes['tollgate.auth.result'], 'refused');
    assert.equal(denied.server.attributes['tollgate.auth.reason'], 'auth_service_401');
  });

  it('a 5xx makes the SERVER span an error; the failed attempt says why; a request matching no route is traced too', async () => {
    assert.equal((await send('/dead/x')).status, 502);
    const { server, children } = await traceOf(collector, '/dead/x');
    assert.equal(server.status, 'error');
    assert.equal(server.attributes['error.type'], '502');
    assert.equal(children[0]?.status, 'error');
    assert.equal(children[0]?.attributes['error.type'], 'connect');

    assert.equal(
      (await request(tollgate.proxyUrl, { path: '/nowhere', headers: { host: 'other.test' } })).status,
      404,
    );
    const [unrouted] = await serverSpanOf(collector, '/nowhere');
    assert.equal(unrouted?.attributes['http.route'], undefined);
    assert.equal(unrouted?.attributes['http.response.status_code'], 404);
    assert.equal(unrouted?.status, 'unset');
  });
});

describe('tracing: OTLP/HTTP JSON, sample_ratio 0', () => {
  /** The one peer in trusted_proxies: a request sent from this loopback address comes "through" it. */
  const TRUSTED_PROXY = '127.0.0.2';
  let collector: OtlpCollector;
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    [collector, upstream] = await Promise.all([startOtlpCollector(), startUpstream()]);
    tollgate = await startTollgate({
      main: {
        trusted_proxies: [TRUSTED_PROXY],
        tracing: { endpoint: collector.origin, protocol: 'http/json', sample_ratio: 0, ...FAST_BATCHES },
      },
      upstreams: { upstreams: { [HOST]: { paths: { '/': { servers: [upstream.address] } } } } },
    });
  });

  after(async () => {
    try {
      await tollgate?.stop();
    } finally {
      await Promise.all([collector, upstream].map((closable) => closable?.close()));
    }
  });

  it("exports nothing for new traces while requests work; a trusted proxy's sampled caller is still followed (parent-based)", async () => {
    for (let i = 0; i < 5; i++) {
      const res = await request(tollgate.proxyUrl, { path: `/unsampled/${i}`, headers: { host: HOST } });
      assert.equal(res.status, 200);
      // Not sampled, but the context still travels: the upstream can join the (unsampled) trace.
      assert.match(
        String(upstream.requests.at(-1)?.headers.traceparent),
        /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/,
      );
    }
    const caller = `00-${TRACE_ID}-${CALLER_SPAN_ID}-01`;
    const res = await request(tollgate.proxyUrl, {
      path: '/sampled',
      headers: { host: HOST, traceparent: caller },
      localAddress: TRUSTED_PROXY,
    });
    assert.equal(res.status, 200);
    // Spans leave in the order they ended: once the last request's are in, earlier ones would be too.
    const { server, children } = await traceOf(collector, '/sampled');
    assert.equal(server.traceId, TRACE_ID);
    assert.equal(children[0]?.kind, 'client');
    assert.deepEqual(
      collector.spans.filter((span) => span.traceId !== TRACE_ID),
      [],
      'no span of an unsampled request',
    );
    assert.ok(
      collector.contentTypes.length > 0 &&
        collector.contentTypes.every((t) => t.startsWith('application/json')),
    );
    // The access lines may reach us after the spans (the log is written asynchronously): wait for them.
    const accessLines = () => tollgate.logs().filter((line) => line.msg === 'access');
    await waitFor(() => accessLines().length >= 6);
    const lines = accessLines();
    assert.deepEqual(
      lines.map((line) => line.trace_id),
      [undefined, undefined, undefined, undefined, undefined, TRACE_ID],
    );
  });

  it("an untrusted client's sampled traceparent records nothing, routed or not; its trace id still travels upstream unsampled", async () => {
    const untrustedTrace = 'a'.repeat(32);
    const untrusted = `00-${untrustedTrace}-${CALLER_SPAN_ID}-01`;
    for (let i = 0; i < 3; i++) {
      const res = await request(tollgate.proxyUrl, {
        path: `/forced/${i}`,
        headers: { host: HOST, traceparent: untrusted },
      });
      assert.equal(res.status, 200);
      // The trace id is continued (the upstream may still join it), the sampled flag is not; the
      // parent id is a new one (the unrecorded CLIENT span's), not the caller's.
      const sent = String(upstream.requests.find((r) => r.url === `/forced/${i}`)?.headers.traceparent);
      assert.match(sent, new RegExp(`^00-${untrustedTrace}-[0-9a-f]{16}-00$`));
      assert.notEqual(sent.split('-')[2], CALLER_SPAN_ID);
      assert.notEqual(sent.split('-')[2], '0'.repeat(16));
    }
    // A request matching no route is refused before routing: its span follows the same rule.
    const unrouted = await request(tollgate.proxyUrl, {
      path: '/forced/unrouted',
      headers: { host: 'unknown.example.com', traceparent: untrusted },
    });
    assert.equal(unrouted.status, 404);

    // A later request from the trusted proxy is exported: spans leave in the order they ended, so
    // once its span is in, any span of the earlier requests would be too.
    const trustedTrace = 'b'.repeat(32);
    const marker = await request(tollgate.proxyUrl, {
      path: '/marker',
      headers: { host: HOST, traceparent: `00-${trustedTrace}-${CALLER_SPAN_ID}-01` },
      localAddress: TRUSTED_PROXY,
    });
    assert.equal(marker.status, 200);
    const { server } = await traceOf(collector, '/marker');
    assert.equal(server.traceId, trustedTrace);
    assert.deepEqual(
      collector.spans.filter((span) => span.traceId === untrustedTrace).map((span) => span.name),
      [],
      "no span of an untrusted client's forced request",
    );
    const lines = tollgate
      .logs()
      .filter((line) => line.msg === 'access' && String(line.path).startsWith('/forced'));
    assert.equal(lines.length, 4);
    assert.ok(lines.every((line) => line.trace_id === undefined));
  });
});

describe('tracing: a broken collector never delays a request', () => {
  let refusing: OtlpCollector;
  let stalled: OtlpCollector;
  let upstream: Upstream;
  let tollgates: Tollgate[];

  before(async () => {
    [refusing, stalled, upstream] = await Promise.all([
      startOtlpCollector(),
      startOtlpCollector(),
      startUpstream(),
    ]);
    refusing.mode = 'error';
    stalled.mode = 'hang';
    const upstreams = { upstreams: { [HOST]: { paths: { '/': { servers: [upstream.address] } } } } };
    // A small queue so that a stalled export fills it with a few requests.
    const tracing = (collector: OtlpCollector) => ({
      endpoint: collector.origin,
      queue_size: 4,
      ...FAST_BATCHES,
    });
    tollgates = await startTollgates(
      { main: { tracing: tracing(refusing) }, upstreams },
      { main: { tracing: tracing(stalled), shutdown_grace_seconds: 1 }, upstreams },
    );
  });

  after(async () => {
    await Promise.all((tollgates ?? []).map((tollgate) => tollgate.stop()));
    await Promise.all([refusing, stalled, upstream].map((closable) => closable?.close()));
  });

  it('a collector answering 500 or never answering: requests are served at once, the lost spans counted', async () => {
    const [toRefusing, toStalled] = tollgates as [Tollgate, Tollgate];
    for (const tollgate of [toRefusing, toStalled]) {
      const started = performance.now();
      for (let i = 0; i < 12; i++) {
        const res = await request(tollgate.proxyUrl, { path: `/r/${i}`, headers: { host: HOST } });
        assert.equal(res.status, 200);
      }
      // An export waits up to 10 s for the collector: a request waiting on it could not do 12 in 5 s.
      assert.ok(performance.now() - started < 5_000, 'requests were held up by the export');
    }
    let text = '';
    await waitFor(async () => {
      text = await toRefusing.metrics();
      return (sample(text, 'tollgate_trace_spans_dropped_total{reason="export_failed"}') ?? 0) > 0;
    }, 20_000);
    await waitFor(async () => {
      text = await toStalled.metrics();
      return (sample(text, 'tollgate_trace_spans_dropped_total{reason="queue_full"}') ?? 0) > 0;
    }, 20_000);
    // 24 spans (a SERVER and a CLIENT span per request), one batch of at most 4 stuck in the export
    // and 4 in the queue: the rest were dropped.
    assert.ok((sample(text, 'tollgate_trace_spans_dropped_total{reason="queue_full"}') ?? 0) >= 12, text);
    assert.equal(stalled.spans.length, 0);
    const warnings = toRefusing.logs().filter((line) => line.event === 'trace_export_failed');
    assert.equal(warnings.length, 1, 'logged once per outage, not once per batch');
  });

  it('shuts down in time even when the collector never answers the last flush', async () => {
    const toStalled = tollgates[1] as Tollgate;
    assert.equal(await toStalled.stop(), 0);
  });
});

describe('tracing with workers', () => {
  let collector: OtlpCollector;
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    [collector, upstream] = await Promise.all([startOtlpCollector(), startUpstream()]);
    tollgate = await startTollgate({
      main: { workers: 2, tracing: { endpoint: collector.origin, ...FAST_BATCHES } },
      upstreams: { upstreams: { [HOST]: { paths: { '/': { servers: [upstream.address] } } } } },
    });
  });

  after(async () => {
    try {
      await tollgate?.stop();
    } finally {
      await Promise.all([collector, upstream].map((closable) => closable?.close()));
    }
  });

  it('every worker exports its own spans', async () => {
    const workers = liveWorkers(tollgate);
    assert.equal(workers.length, 2);
    const exporters = () => new Set(collector.spans.map((span) => Number(span.resource['process.pid'])));
    // The kernel spreads new connections over the workers: a fresh connection each time reaches both.
    for (let i = 0; i < 400 && accessLinesByWorker(tollgate).size < 2; i++) {
      assert.equal(
        (await request(tollgate.proxyUrl, { path: `/w/${i}`, headers: { host: HOST } })).status,
        200,
      );
    }
    assert.equal(accessLinesByWorker(tollgate).size, 2, 'both workers served');
    await waitFor(() => exporters().size === 2, 20_000);
    assert.deepEqual([...exporters()].sort(), workers.sort());
  });
});
