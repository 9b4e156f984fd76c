import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectedAccept, handshakeProblem } from '../../src/proxy/websocket.ts';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { CloseFrameWatcher } from '../../src/upstream/tunnel.ts';

const error = (code?: string) => Object.assign(new Error('x'), code === undefined ? {} : { code });

describe('one classification of upstream failures (requests and upgrades)', () => {
  it('unreachable in any way is a connect failure, safe to retry elsewhere', () => {
    for (const code of ['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']) {
      assert.deepEqual(classifyUpstreamError(error(code)), {
        kind: 'connect',
        unreachable: true,
        notSent: true,
        staleConnection: false,
        answer: 'bad_gateway',
      });
    }
  });

  it('timeouts: a connect timeout may fail over; late headers are a 504', () => {
    assert.equal(classifyUpstreamError(error('UND_ERR_CONNECT_TIMEOUT')).notSent, true);
    assert.equal(classifyUpstreamError(error('UND_ERR_CONNECT_TIMEOUT')).kind, 'timeout');
    assert.equal(classifyUpstreamError(error('UND_ERR_HEADERS_TIMEOUT')).answer, 'gateway_timeout');
    assert.equal(classifyUpstreamError(error('UND_ERR_HEADERS_TIMEOUT')).notSent, false);
  });

  it('only a server that could not be reached is a passive health signal, never a slow answer', () => {
    const unreachable = (code?: string) => classifyUpstreamError(error(code)).unreachable;
    assert.equal(unreachable('ECONNREFUSED'), true);
    assert.equal(unreachable('ENOTFOUND'), true);
    assert.equal(unreachable('UND_ERR_CONNECT_TIMEOUT'), true);
    for (const code of [
      'UND_ERR_HEADERS_TIMEOUT',
      'UND_ERR_BODY_TIMEOUT',
      'ECONNRESET',
      'ERR_SSL_X',
      undefined,
    ])
      assert.equal(unreachable(code), false, String(code));
  });

  it('resets are stale-connection candidates; anything else is a protocol error', () => {
    assert.equal(classifyUpstreamError(error('ECONNRESET')).kind, 'reset');
    assert.equal(classifyUpstreamError(error('ECONNRESET')).staleConnection, true);
    assert.equal(classifyUpstreamError(error('HPE_INVALID_CONSTANT')).kind, 'protocol');
    assert.equal(classifyUpstreamError(error()).kind, 'protocol');
  });
});

describe('the upstream 101 check', () => {
  const key = 'dGhlIHNhbXBsZSBub25jZQ==';
  const good = { upgrade: 'websocket', connection: 'Upgrade', 'sec-websocket-accept': expectedAccept(key) };

  it('RFC 6455 example: the accept for the sample nonce', () => {
    assert.equal(expectedAccept(key), 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
    assert.equal(handshakeProblem(101, good, key), null);
  });

  it('anything else is named', () => {
    assert.match(String(handshakeProblem(200, good, key)), /status 200/);
    assert.match(String(handshakeProblem(101, { ...good, upgrade: 'h2c' }, key)), /Upgrade/);
    assert.match(String(handshakeProblem(101, { ...good, connection: 'keep-alive' }, key)), /Connection/);
    assert.match(String(handshakeProblem(101, { ...good, 'sec-websocket-accept': 'x' }, key)), /Accept/);
    assert.match(
      String(handshakeProblem(101, { upgrade: 'websocket', connection: 'upgrade' }, key)),
      /Accept/,
    );
  });
});

/** A frame as a client sends it (masked) or a server does (not). */
function frame(opcode: number, payload: Buffer, masked: boolean): Buffer {
  const length = payload.length;
  const header =
    length < 126
      ? Buffer.from([0x80 | opcode, (masked ? 0x80 : 0) | length])
      : length < 65536
        ? Buffer.from([0x80 | opcode, (masked ? 0x80 : 0) | 126, length >> 8, length & 0xff])
        : Buffer.concat([Buffer.from([0x80 | opcode, (masked ? 0x80 : 0) | 127]), bigLength(length)]);
  if (!masked) return Buffer.concat([header, payload]);
  const mask = Buffer.from([1, 2, 3, 4]);
  const body = Buffer.from(payload.map((byte, i) => byte ^ (mask[i % 4] as number)));
  return Buffer.concat([header, mask, body]);
}

function bigLength(length: number): Buffer {
  const buffer = Buffer.alloc(8);
  buffer.writeBigUInt64BE(BigInt(length));
  return buffer;
}

const closePayload = (code: number) =>
  Buffer.concat([Buffer.from([code >> 8, code & 0xff]), Buffer.from('bye')]);

describe('watching Close frames in a relayed stream', () => {
  it('skips data frames of every length class and finds the Close and its code, byte by byte too', () => {
    for (const masked of [true, false]) {
      const stream = Buffer.concat([
        frame(0x1, Buffer.from('hi'), masked),
        frame(0x2, Buffer.alloc(300, 0x88), masked),
        frame(0x2, Buffer.alloc(70_000, 0x88), masked),
        frame(0x8, closePayload(1000), masked),
      ]);
      const whole = new CloseFrameWatcher();
      whole.push(stream);
      assert.equal(whole.closed, true);
      assert.equal(whole.code, 1000);
      const bytewise = new CloseFrameWatcher();
      for (const byte of stream) bytewise.push(Buffer.from([byte]));
      assert.equal(bytewise.code, 1000);
    }
  });

  it('a payload full of 0x88 bytes is not mistaken for a Close', () => {
    const watcher = new CloseFrameWatcher();
    watcher.push(frame(0x2, Buffer.alloc(1000, 0x88), true));
    assert.equal(watcher.closed, false);
  });

  it('a Close without a code', () => {
    const watcher = new CloseFrameWatcher();
    watcher.push(frame(0x8, Buffer.alloc(0), false));
    assert.equal(watcher.closed, true);
    assert.equal(watcher.code, null);
  });
});
