import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ForwardingRequest } from '../../src/request/record.ts';
import type { UpstreamServer } from '../../src/routing/types.ts';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { failoverIndex, spareServer } from '../../src/upstream/server-choice.ts';
import { fakeServer } from '../helpers/fake-routes.ts';

/** Server choice's "which next" for the forwarder (the candidate list itself: balance-selection). */
const servers = [fakeServer('10.8.0.1:80'), fakeServer('10.8.0.2:80'), fakeServer('10.8.0.3:80')];
const request = { candidates: servers } as unknown as ForwardingRequest;
const failure = (code: string) => classifyUpstreamError(Object.assign(new Error(code), { code }));

describe('failover after a failed attempt', () => {
  test('a request the server cannot have seen goes to the next candidate, with or without a body', () => {
    assert.equal(failoverIndex(request, 0, failure('ECONNREFUSED'), false), 1);
    assert.equal(failoverIndex(request, 1, failure('ECONNREFUSED'), true), 2);
    assert.equal(failoverIndex(request, 0, failure('UND_ERR_CONNECT_TIMEOUT'), true), 1);
  });

  test('a stale keep-alive connection is retried only when no body was consumed', () => {
    assert.equal(failoverIndex(request, 0, failure('ECONNRESET'), false), 1);
    assert.equal(failoverIndex(request, 0, failure('ECONNRESET'), true), -1);
  });

  test('a server that may have seen the request is not asked again elsewhere', () => {
    assert.equal(failoverIndex(request, 0, failure('UND_ERR_HEADERS_TIMEOUT'), false), -1);
    assert.equal(failoverIndex(request, 0, failure('SOMETHING_ELSE'), false), -1);
  });

  test('after the last candidate there is none', () => {
    assert.equal(failoverIndex(request, 2, failure('ECONNREFUSED'), false), -1);
  });
});

describe('a spare server when the first is at its connection limit', () => {
  const release = () => {};
  test('the first later candidate with a free slot, in the candidates order', () => {
    const asked: string[] = [];
    const spare = spareServer(request, 0, (server: UpstreamServer) => {
      asked.push(server.address);
      return server === servers[2] ? release : null;
    });
    assert.deepEqual(asked, ['10.8.0.2:80', '10.8.0.3:80']);
    assert.deepEqual(spare, { index: 2, server: servers[2], release });
  });

  test('none free: null (the request waits in the first one’s queue)', () => {
    assert.equal(
      spareServer(request, 0, () => null),
      null,
    );
    assert.equal(
      spareServer(request, 2, () => release),
      null,
    );
  });
});
