import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { type AuthService, OAUTH2_PROXY_COOKIE, startOauth2Proxy } from '../helpers/auth-services.ts';
import { type OtlpCollector, startOtlpCollector } from '../helpers/otlp-collector.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Sampling decided by Tollgate before the SDK (docs/observability.md#tracing): a new trace follows
 * its trace id (TraceIdRatioBasedSampler's rule), a trusted proxy's flag is followed both ways, and
 * an unsampled request exports nothing but still sends a `traceparent` (flag `00`) to the upstream
 * and the auth service.
 */

const HOST = 'app.example.com';
const RATIO = 0.5;
/** The one peer in trusted_proxies: a request sent from this loopback address comes "through" it. */
const TRUSTED_PROXY = '127.0.0.2';
const CALLER_SPAN_ID = '00f067aa0ba902b7';
/** XOR of its 32-bit parts is 1: the ratio rule records it at any ratio above 0. */
const LUCKY_TRACE_ID = `${'0'.repeat(31)}1`;
/** XOR of its 32-bit parts is 0xffffffff: the ratio rule records it only at 1. */
const UNLUCKY_TRACE_ID = `${'f'.repeat(8)}${'0'.repeat(24)}`;

const byTraceId = new TraceIdRatioBasedSampler(RATIO);
const ruleSampled = (traceId: string) =>
  byTraceId.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/;

describe('tracing: sampling decided before the SDK, sample_ratio 0.5', () => {
  let collector: OtlpCollector;
  let upstream: Upstream;
  let auth: AuthService;
  let tollgate: Tollgate;

  before(async () => {
    [collector, upstream, auth] = await Promise.all([
      startOtlpCollector(),
      startUpstream(),
      startOauth2Proxy(),
    ]);
    tollgate = await startTollgate({
      main: {
        trusted_proxies: [TRUSTED_PROXY],
        tracing: { endpoint: collector.origin, sample_ratio: RATIO, batch_delay_seconds: 0.05 },
      },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers: [upstream.address] },
              '/fwd': {
                servers: [upstream.address],
                authorization: { type: 'forward', url: `${auth.origin}/oauth2/auth` },
              },
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
      await Promise.all([collector, upstream, auth].map((closable) => closable?.close()));
    }
  });

  /** Sends a request from the trusted proxy with a sampled traceparent, and waits for its span: spans
   * leave in the order they ended, so any span of an earlier request would be in by then. */
  async function flushedBy(path: string, traceId: string) {
    const res = await request(tollgate.proxyUrl, {
      path,
      headers: { host: HOST, traceparent: `00-${traceId}-${CALLER_SPAN_ID}-01` },
      localAddress: TRUSTED_PROXY,
    });
    assert.equal(res.status, 200);
    await collector.waitForSpans((span) => span.kind === 'server' && span.attributes['url.path'] === path);
  }

  it('a new trace is recorded exactly when its trace id passes the ratio rule; an unsampled one exports nothing and still sends traceparent 00', async () => {
    const sent = new Map<string, string>();
    for (let i = 0; i < 40; i++) {
      const path = `/new/${i}`;
      assert.equal((await request(tollgate.proxyUrl, { path, headers: { host: HOST } })).status, 200);
      const traceparent = String(upstream.requests.find((r) => r.url === path)?.headers.traceparent);
      const match = TRACEPARENT.exec(traceparent);
      assert.ok(match, `${path}: ${traceparent}`);
      const [, traceId, , flags] = match as unknown as [string, string, string, string];
      // The flag sent is the decision, and the decision is the ratio rule on the trace id sent.
      assert.equal(flags, ruleSampled(traceId) ? '01' : '00', `${path}: ${traceparent}`);
      sent.set(path, traceparent);
    }
    const sampled = [...sent].filter(([, tp]) => tp.endsWith('-01'));
    const unsampled = [...sent].filter(([, tp]) => tp.endsWith('-00'));
    // 40 draws at 0.5: all on one side has a probability of 2e-12.
    assert.ok(sampled.length > 0 && unsampled.length > 0, `${sampled.length} sampled of 40`);

    await flushedBy('/flush-new', 'a'.repeat(32));
    for (const [path, traceparent] of sampled) {
      const [, traceId, spanId] = TRACEPARENT.exec(traceparent) as unknown as [string, string, string];
      const servers = collector.spans.filter((s) => s.kind === 'server' && s.attributes['url.path'] === path);
      assert.equal(servers.length, 1, path);
      assert.equal(servers[0]?.traceId, traceId);
      const clients = collector.spans.filter((s) => s.parentSpanId === servers[0]?.spanId);
      assert.deepEqual(
        clients.map((s) => s.spanId),
        [spanId],
        'the upstream got its CLIENT span',
      );
    }
    for (const [path, traceparent] of unsampled) {
      const traceId = traceparent.split('-')[1];
      assert.deepEqual(
        collector.spans.filter((s) => s.traceId === traceId || s.attributes['url.path'] === path),
        [],
        `nothing exported for ${path}`,
      );
    }
    // The access log names the trace of a sampled request only.
    const accessLine = (path: string) =>
      tollgate.logs().find((line) => line.msg === 'access' && line.path === path);
    await waitFor(() => [...sent.keys()].every((path) => accessLine(path) !== undefined));
    for (const [path, traceparent] of sent) {
      const expected = traceparent.endsWith('-01') ? traceparent.split('-')[1] : undefined;
      assert.equal(accessLine(path)?.trace_id, expected, path);
    }
  });

  it("a trusted proxy's flag is followed both ways, whatever its trace id says to the ratio rule; tracestate travels", async () => {
    assert.ok(ruleSampled(LUCKY_TRACE_ID) && !ruleSampled(UNLUCKY_TRACE_ID));
    // Four of each: a decision drawn at random instead of following the flag would pass all eight
    // with a probability of 1 in 256.
    for (let i = 0; i < 4; i++) {
      // Unsampled by the proxy, though its trace id passes the ratio: not recorded, context continued.
      const quietPath = `/trusted-unsampled/${i}`;
      const quiet = await request(tollgate.proxyUrl, {
        path: quietPath,
        headers: {
          host: HOST,
          traceparent: `00-${LUCKY_TRACE_ID}-${CALLER_SPAN_ID}-00`,
          tracestate: 'edge=1',
        },
        localAddress: TRUSTED_PROXY,
      });
      assert.equal(quiet.status, 200);
      const quietSent = upstream.requests.find((r) => r.url === quietPath)?.headers;
      const quietMatch = TRACEPARENT.exec(String(quietSent?.traceparent));
      assert.equal(quietMatch?.[1], LUCKY_TRACE_ID);
      assert.equal(quietMatch?.[3], '00');
      assert.notEqual(quietMatch?.[2], CALLER_SPAN_ID, 'a span id of its own, not the caller’s');
      assert.equal(quietSent?.tracestate, 'edge=1');

      // Sampled by the proxy, though its trace id fails the ratio: recorded, as the caller's child.
      const loudPath = `/trusted-sampled/${i}`;
      const loud = await request(tollgate.proxyUrl, {
        path: loudPath,
        headers: {
          host: HOST,
          traceparent: `00-${UNLUCKY_TRACE_ID}-${CALLER_SPAN_ID}-01`,
          tracestate: 'edge=2',
        },
        localAddress: TRUSTED_PROXY,
      });
      assert.equal(loud.status, 200);
      const [server] = await collector.waitForSpans(
        (span) => span.kind === 'server' && span.attributes['url.path'] === loudPath,
      );
      assert.equal(server?.traceId, UNLUCKY_TRACE_ID);
      assert.equal(server?.parentSpanId, CALLER_SPAN_ID);
      const loudSent = upstream.requests.find((r) => r.url === loudPath)?.headers;
      const client = collector.spans.find((s) => s.parentSpanId === server?.spanId);
      assert.equal(loudSent?.traceparent, `00-${UNLUCKY_TRACE_ID}-${client?.spanId}-01`);
      assert.equal(loudSent?.tracestate, 'edge=2');
    }
    assert.deepEqual(
      collector.spans.filter((s) => s.traceId === LUCKY_TRACE_ID),
      [],
      "nothing of the proxy's unsampled request",
    );
  });

  it('an unsampled request sends the auth service a traceparent 00 too, and exports nothing of the check', async () => {
    const path = '/fwd/unsampled';
    const res = await request(tollgate.proxyUrl, {
      path,
      headers: {
        host: HOST,
        cookie: OAUTH2_PROXY_COOKIE,
        traceparent: `00-${LUCKY_TRACE_ID}-${CALLER_SPAN_ID}-00`,
      },
      localAddress: TRUSTED_PROXY,
    });
    assert.equal(res.status, 200);
    const checked = auth.checks.find((c) => c.headers['x-forwarded-uri'] === path)?.headers.traceparent;
    const forwarded = upstream.requests.find((r) => r.url === path)?.headers.traceparent;
    const check = TRACEPARENT.exec(String(checked));
    const attempt = TRACEPARENT.exec(String(forwarded));
    assert.equal(check?.[1], LUCKY_TRACE_ID, String(checked));
    assert.equal(check?.[3], '00');
    assert.equal(attempt?.[1], LUCKY_TRACE_ID, String(forwarded));
    assert.equal(attempt?.[3], '00');
    assert.notEqual(check?.[2], attempt?.[2], 'each call is a span of its own');

    await flushedBy('/flush-fwd', 'b'.repeat(32));
    assert.deepEqual(
      collector.spans.filter((s) => s.traceId === LUCKY_TRACE_ID),
      [],
      'nothing exported for the unsampled request',
    );
  });
});
