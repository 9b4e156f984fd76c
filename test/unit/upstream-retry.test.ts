import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import type { RetryConfig } from '../../src/config/types.ts';
import type { ForwardingRequest } from '../../src/request/record.ts';
import { retryOf } from '../../src/sources/kubernetes/gateway/retry.ts';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { RetryState } from '../../src/upstream/retry.ts';
import { retryIndex } from '../../src/upstream/server-choice.ts';

/** A response that can close, as the forwarder's `res`, on a route with `timeouts`. */
function fakeRequest(responseMs: number | null = null) {
  const res = Object.assign(new EventEmitter(), { headersSent: false, destroyed: false });
  return {
    route: { id: 'example.test/retry', timeouts: responseMs === null ? null : { responseMs } },
    res,
    candidates: [{}, {}, {}],
  } as unknown as ForwardingRequest & { res: typeof res };
}

const config = (over: Partial<RetryConfig> = {}): RetryConfig => ({
  codes: [500, 503],
  attempts: 2,
  backoffMs: 1,
  budgetMs: null,
  ...over,
});

describe('RetryState (upstream/retry.ts)', () => {
  it('retries a listed code only, only without a body, and only as many times as attempts', async () => {
    const request = fakeRequest();
    const retry = new RetryState(request, config());
    assert.equal(retry.retriesStatus(502, false), false);
    assert.equal(retry.retriesStatus(500, true), false);
    for (let left = 2; left > 0; left--) {
      assert.equal(retry.retriesStatus(500, false), true);
      await new Promise<void>((resolve) => retry.after('status', resolve));
    }
    assert.equal(retry.retriesStatus(500, false), false);
    assert.equal(retry.retriesFailure(classifyUpstreamError({ code: 'ECONNRESET' }), false), false);
    request.res.emit('close');
  });

  it('retries failures before any answer, but not TLS failures or requests with a body', () => {
    const request = fakeRequest();
    const retry = new RetryState(request, config({ codes: [] }));
    assert.equal(retry.retriesFailure(classifyUpstreamError({ code: 'ECONNREFUSED' }), false), true);
    assert.equal(retry.retriesFailure(classifyUpstreamError({ code: 'UND_ERR_SOCKET' }), false), true);
    assert.equal(
      retry.retriesFailure(classifyUpstreamError({ code: 'UND_ERR_HEADERS_TIMEOUT' }), false),
      true,
    );
    assert.equal(retry.retriesFailure(classifyUpstreamError({ code: 'CERT_HAS_EXPIRED' }), false), false);
    assert.equal(retry.retriesFailure(classifyUpstreamError({ code: 'ECONNRESET' }), true), false);
    assert.equal(retry.retriesStatus(500, false), false);
    request.res.emit('close');
  });

  it('never calls again once the client left during the backoff', async () => {
    const request = fakeRequest();
    const retry = new RetryState(request, config({ backoffMs: 50 }));
    let called = false;
    retry.after('status', () => {
      called = true;
    });
    request.res.emit('close');
    await new Promise((resolve) => setTimeout(resolve, 80));
    assert.equal(called, false);
  });

  it('aborts the attempt in flight as a timeout when the request budget passes, and retries no more', async () => {
    const request = fakeRequest();
    const retry = new RetryState(request, config({ budgetMs: 5 }));
    const aborted = await new Promise<Error>((resolve) =>
      retry.begin({ controller: { abort: resolve } as never }),
    );
    assert.equal((aborted as NodeJS.ErrnoException).code, 'UND_ERR_HEADERS_TIMEOUT');
    assert.equal(classifyUpstreamError(aborted).answer, 'gateway_timeout');
    assert.equal(retry.expired, true);
    assert.equal(retry.retriesStatus(500, false), false);
    request.res.emit('close');
  });

  it("times each attempt by the route's response timeout, and not once the answer is relayed", async () => {
    const request = fakeRequest(5);
    const retry = new RetryState(request, config());
    const aborted = await new Promise<Error>((resolve) =>
      retry.begin({ controller: { abort: resolve } as never }),
    );
    assert.match(aborted.message, /backend request timeout/);
    let late = false;
    retry.begin({ controller: { abort: () => (late = true) } as never });
    retry.answered();
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(late, false);
    request.res.emit('close');
  });

  it('a retry goes to the next candidate, the first after the last', () => {
    const request = fakeRequest();
    assert.deepEqual(
      [0, 1, 2].map((index) => retryIndex(request, index)),
      [1, 2, 0],
    );
  });
});

describe('retryOf (sources/kubernetes/gateway/retry.ts)', () => {
  it('reads codes, attempts and backoff, with the rule’s timeouts.request as the budget', () => {
    assert.deepEqual(
      retryOf({
        retry: { codes: [500, 502, 500], attempts: 3, backoff: '100ms' },
        timeouts: { request: '1s' },
      }),
      { codes: [500, 502], attempts: 3, backoffMs: 100, budgetMs: 1000 },
    );
    assert.deepEqual(retryOf({ retry: {} }), { codes: [], attempts: 1, backoffMs: 25, budgetMs: null });
    assert.equal(retryOf({}), null);
  });

  it('refuses codes outside 400-599, attempts that are not 0-10 and backoffs that are not durations', () => {
    for (const retry of [
      { codes: [200] },
      { codes: [600] },
      { codes: ['500'] },
      { attempts: -1 },
      { attempts: 1.5 },
      { attempts: 11 },
      { backoff: '1 second' },
      { backoff: 100 },
      { backoff: '2m' },
    ])
      assert.equal(typeof retryOf({ retry }), 'string', JSON.stringify(retry));
  });
});
