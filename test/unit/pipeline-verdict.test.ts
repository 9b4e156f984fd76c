import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { localResponseBytes } from '../../src/local-response.ts';
import { redirect, refuse, respond } from '../../src/pipeline/verdict.ts';
import type { Answer, Redirect } from '../../src/request/verdict.ts';

/** Serves one verdict through a real ServerResponse and returns what a client receives. */
async function served(verdict: Answer | Redirect) {
  let bytes = -1;
  const server = http.createServer((_req, res) => {
    respond(res, verdict);
    bytes = localResponseBytes(res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {
      redirect: 'manual',
    });
    return { status: res.status, headers: res.headers, body: await res.text(), bytes };
  } finally {
    server.close();
  }
}

describe('respond: the one place a verdict becomes a response', () => {
  it('writes a catalogue error as small JSON with its status, extra headers and a length', async () => {
    const res = await served(refuse('rate_limited', { 'retry-after': '1' }));
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.deepEqual(JSON.parse(res.body), { error: 'rate_limited', message: 'too many requests' });
    assert.equal(Number(res.headers.get('content-length')), Buffer.byteLength(res.body));
    assert.equal(res.bytes, Buffer.byteLength(res.body), 'the access log sees the size');
  });

  it('lets a stage word the message more precisely, keeping the code', async () => {
    const res = await served(refuse('bad_request', {}, 'more than one Host header'));
    assert.deepEqual(JSON.parse(res.body), { error: 'bad_request', message: 'more than one Host header' });
  });

  it('writes a redirect with Location and a short text body', async () => {
    const res = await served(redirect(308, 'https://example.com/a?b'));
    assert.equal(res.status, 308);
    assert.equal(res.headers.get('location'), 'https://example.com/a?b');
    assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(res.body, 'Redirecting to https://example.com/a?b\n');
    assert.equal(Number(res.headers.get('content-length')), Buffer.byteLength(res.body));
  });
});
