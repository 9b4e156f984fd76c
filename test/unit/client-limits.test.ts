import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  applyClientLimits,
  type ClientLimits,
  openFileLimit,
  RESERVED_DESCRIPTORS,
  safeConnectionCap,
} from '../../src/client-limits.ts';
import { connectRaw } from '../helpers/raw-connection.ts';

const servers: http.Server[] = [];
after(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

/** A server with `limits` whose handler answers after `delayMs`, having read the whole body. */
async function serve(limits: ClientLimits, delayMs = 0) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => setTimeout(() => res.end('ok'), delayMs));
  });
  applyClientLimits(server, limits);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as net.AddressInfo).port;
}

const LIMITS: ClientLimits = { firstByteMs: 150, bodyIdleMs: 150, maxConnections: 100 };

describe('client limits on a real server', () => {
  it('closes a connection that never sends a byte', async () => {
    const conn = await connectRaw(await serve(LIMITS));
    await conn.closed;
    assert.equal(conn.received(), '');
  });

  it('a request in time is answered even when the answer takes longer than the first-byte limit', async () => {
    const conn = await connectRaw(await serve(LIMITS, LIMITS.firstByteMs * 3));
    conn.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.match(await conn.responses('\r\n\r\nok'), /^HTTP\/1\.1 200/);
    conn.socket.destroy();
  });

  it('closes a connection whose request body stops arriving', async () => {
    const conn = await connectRaw(await serve(LIMITS));
    conn.socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab');
    await conn.closed;
    assert.equal(conn.received(), '');
  });

  it('a complete body is answered however long the answer takes', async () => {
    const conn = await connectRaw(await serve(LIMITS, LIMITS.bodyIdleMs * 3));
    conn.socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab');
    conn.socket.write('cd');
    assert.match(await conn.responses('\r\n\r\nok'), /^HTTP\/1\.1 200/);
    conn.socket.destroy();
  });

  it('closes connections over the cap at once and keeps serving the ones it holds', async () => {
    const port = await serve({ firstByteMs: 60_000, bodyIdleMs: 60_000, maxConnections: 2 });
    const held = [await connectRaw(port), await connectRaw(port)];
    // The server counts a connection once it has accepted it: make sure both are in before the third.
    for (const conn of held) {
      conn.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      await conn.responses('\r\n\r\nok');
    }
    const refused = await connectRaw(port);
    await refused.closed;
    assert.equal(refused.received(), '');
    const first = held[0];
    assert.ok(first);
    first.socket.write('GET /again HTTP/1.1\r\nHost: x\r\n\r\n');
    await first.responses('\r\n\r\nok', 2);
    for (const conn of held) conn.socket.destroy();
  });
});

describe('a connection cap that cannot run out of descriptors', () => {
  it('reads the soft limit from /proc/self/limits', () => {
    const file = join(tmpdir(), `limits-${process.pid}`);
    writeFileSync(
      file,
      'Limit                     Soft Limit           Hard Limit           Units     \n' +
        'Max open files            20000                1048576              files     \n',
    );
    assert.equal(openFileLimit(file), 20_000);
    writeFileSync(file, 'Max open files            unlimited            unlimited            files     \n');
    assert.equal(openFileLimit(file), null);
    assert.equal(openFileLimit(join(tmpdir(), 'no-such-file')), null);
  });

  it('keeps half of what the reserve leaves, never more than configured', () => {
    assert.equal(safeConnectionCap(10_000, 20_000), (20_000 - RESERVED_DESCRIPTORS) / 2);
    assert.equal(safeConnectionCap(10_000, 20_000, 2), (20_000 - RESERVED_DESCRIPTORS) / 4);
    assert.equal(safeConnectionCap(10_000, 1_536), (1_536 - RESERVED_DESCRIPTORS) / 2);
    assert.equal(safeConnectionCap(10_000, 100), 1);
    assert.equal(safeConnectionCap(500, 1_048_576), 500);
    assert.equal(safeConnectionCap(500, null), 500);
  });
});
