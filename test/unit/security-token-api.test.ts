import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { test } from 'node:test';
import { tokenApiForTests } from '../helpers/token-api.ts';
import { request } from '../helpers/tollgate.ts';

/**
 * Adversarial checks of the token API's master-key guessing limit and body handling, beyond the
 * status table covered by auth-token-api.test.ts.
 */

const MASTERKEY = 'security-test-masterkey';
const ATTEMPTS = 3;
const api = tokenApiForTests({
  masterkey: () => MASTERKEY,
  failureLimit: { attempts: ATTEMPTS, windowSeconds: 60 },
});

/** A raw connection that has sent everything but the last byte of its request. */
function heldRequest(body: string, localAddress: string): { release(): void; status: Promise<number> } {
  const socket = net.connect({ port: api.port, host: '127.0.0.1', localAddress });
  let answer = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    answer += chunk;
  });
  socket.on('error', () => {});
  const status = new Promise<number>((resolve) => {
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0)));
  });
  socket.write(
    `POST /jwt HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body.slice(0, -1)}`,
  );
  return { release: () => socket.write(body.slice(-1)), status };
}

test('concurrent wrong master keys cannot get past the guessing limit', async () => {
  // All requests pass the early 429 check while their bodies are still arriving, then complete at once:
  // only ATTEMPTS of them may be compared with the master key, the rest must be answered 429.
  const from = '127.0.0.3';
  const held = Array.from({ length: 20 }, (_, i) =>
    heldRequest(JSON.stringify({ master_key: `guess-${i}`, owner: 'a', valid: 1 }), from),
  );
  await new Promise((resolve) => setTimeout(resolve, 300));
  for (const request of held) request.release();
  const statuses = await Promise.all(held.map((request) => request.status));
  const compared = statuses.filter((status) => status === 403).length;
  assert.equal(compared, ATTEMPTS, `statuses: ${statuses.join(',')}`);
  assert.equal(statuses.filter((status) => status === 429).length, statuses.length - ATTEMPTS);
  assert.doesNotMatch(api.lines.join(''), /guess-\d/);
});

test('a right master key does not use up the guessing budget', async () => {
  const from = '127.0.0.4';
  const post = (masterKey: string) =>
    request(`${api.url}/jwt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ master_key: masterKey, owner: 'a', valid: 1 }),
      localAddress: from,
    });
  for (let i = 0; i < ATTEMPTS + 2; i++) assert.equal((await post(MASTERKEY)).status, 200);
  for (let i = 0; i < ATTEMPTS; i++) assert.equal((await post(`nope-${i}`)).status, 403);
  assert.equal((await post(MASTERKEY)).status, 429);
});

test('a chunked body over 16 KiB without Content-Length is answered 413 and the connection closed', async () => {
  const socket = net.connect({ port: api.port, host: '127.0.0.1', localAddress: '127.0.0.5' });
  let answer = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    answer += chunk;
  });
  socket.on('error', () => {});
  socket.write(
    'POST /jwt HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
  );
  const chunk = 'x'.repeat(4096);
  // Keeps streaming until the server closes: an endless body must not be drained forever.
  const writer = setInterval(() => {
    if (!socket.destroyed) socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
  }, 5);
  await once(socket, 'close');
  clearInterval(writer);
  assert.match(answer, /^HTTP\/1\.1 413 /);
  assert.match(answer, /"error":"payload_too_large"/);
});

test('__proto__ in the body pollutes nothing and is not a master key', async () => {
  const res = await request(`${api.url}/jwt`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: `{"__proto__": {"master_key": "${MASTERKEY}", "owner": "a", "valid": 1}, "owner": "a", "valid": 1}`,
    localAddress: '127.0.0.6',
  });
  assert.equal(res.status, 400);
  assert.equal(({} as Record<string, unknown>).master_key, undefined);
});
