import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connectRaw, type RawConnection } from '../helpers/raw-connection.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const HOST = 'app.example.com';
const KEY = 'client-limits-key-5d1';

/**
 * Slow and silent clients against the real process: each used to hold a connection (and with it
 * descriptors and upstream connections) for as long as it liked. Loopback only, bounded counts.
 */
describe('client limits through the proxy process', () => {
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    upstream = await startUpstream({ name: 'app' });
    tollgate = await startTollgate({
      main: {
        client_first_byte_timeout_seconds: 1,
        client_body_timeout_seconds: 1,
        client_header_timeout_seconds: 2,
        max_client_connections: 40,
        access_log: false,
      },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers: [upstream.address] },
              '/secure': { servers: [upstream.address], authorization: { type: 'apikey', creds: KEY } },
            },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
  });

  it('closes a connection that never sends a byte', { timeout: 30_000 }, async () => {
    const conn = await connectRaw(tollgate.proxyPort);
    await conn.closed;
    assert.equal(conn.received(), '');
  });

  it('closes a connection whose upload stalls, and the upstream request is abandoned', {
    timeout: 30_000,
  }, async () => {
    const conn = await connectRaw(tollgate.proxyPort);
    conn.socket.write(
      `POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 1000\r\n\r\n${'x'.repeat(10)}`,
    );
    await conn.closed;
    assert.doesNotMatch(conn.received(), /HTTP\/1\.1 200/);
  });

  it('answers 401 to an unauthenticated upload with Connection: close and does not wait for its body', {
    timeout: 30_000,
  }, async () => {
    const conn = await connectRaw(tollgate.proxyPort);
    conn.socket.write(
      `POST /secure HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 100000\r\n\r\n${'x'.repeat(10)}`,
    );
    await conn.closed;
    assert.match(conn.received(), /^HTTP\/1\.1 401 /);
    assert.match(conn.received(), /\r\nconnection: close\r\n/i);
  });

  it('answers 408 to headers that trickle in, soon after client_header_timeout_seconds', {
    timeout: 30_000,
  }, async () => {
    const conn = await connectRaw(tollgate.proxyPort);
    conn.socket.write(`GET / HTTP/1.1\r\nHost: ${HOST}\r\n`);
    const started = performance.now();
    // One byte every 300 ms keeps the connection from being silent; bounded to 60 bytes.
    let sent = 0;
    const trickle = setInterval(() => {
      if (sent++ < 60 && !conn.socket.destroyed) conn.socket.write('X');
    }, 300);
    try {
      await conn.closed;
    } finally {
      clearInterval(trickle);
    }
    const seconds = (performance.now() - started) / 1000;
    assert.match(conn.received(), /^HTTP\/1\.1 408 /);
    assert.match(conn.received(), /"error":"request_timeout"/);
    // Node used to sweep for late headers every 30 s, answering up to 30 s late.
    assert.ok(seconds < 12, `408 came after ${seconds.toFixed(1)} s for a 2 s limit`);
  });

  it('a flood of connections over the cap is shed while held connections, /healthz and reloads keep working', {
    timeout: 30_000,
  }, async () => {
    // Its own process, with silent connections allowed to stay: the flood must last the whole test.
    const routes = (extra: Record<string, unknown> = {}) => ({
      upstreams: {
        [HOST]: {
          paths: {
            '/secure': { servers: [upstream.address], authorization: { type: 'apikey', creds: KEY } },
            ...extra,
          },
        },
      },
    });
    const flooded = await startTollgate({
      main: { client_first_byte_timeout_seconds: 60, max_client_connections: 40, access_log: false },
      upstreams: routes(),
    });
    const held = await connectRaw(flooded.proxyPort);
    const ask = (path: string) => `GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\nx-api-key: ${KEY}\r\n\r\n`;
    const flood: RawConnection[] = [];
    try {
      held.socket.write(ask('/secure'));
      await held.responses('"server":"app"', 1);
      // Twice the cap, held silent by the test.
      for (let i = 0; i < 80; i++) flood.push(await connectRaw(flooded.proxyPort));
      // Over the cap, connections are closed as soon as they are accepted.
      await waitFor(() => flood.filter((c) => c.socket.destroyed).length >= 30, 10_000);

      const started = performance.now();
      held.socket.write(ask('/secure'));
      await held.responses('"server":"app"', 2);
      const ms = performance.now() - started;
      assert.ok(ms < 2_000, `a held connection waited ${Math.round(ms)} ms behind the flood`);
      assert.equal((await request(`${flooded.adminUrl}/healthz`)).status, 200);

      const readyHash = async () =>
        (await request(`${flooded.adminUrl}/readyz`)).json<{ config_hash: string }>().config_hash;
      const before = await readyHash();
      await flooded.writeUpstreams(routes({ '/new': { servers: [upstream.address] } }));
      await waitFor(async () => (await readyHash()) !== before, 10_000);
      held.socket.write(ask('/new'));
      const answers = await held.responses('"server":"app"', 3);
      assert.match(answers.slice(answers.lastIndexOf('HTTP/1.1 ')), /^HTTP\/1\.1 200 /);
    } finally {
      for (const conn of flood) conn.socket.destroy();
      held.socket.destroy();
    }
    // Once the flood lets go, new connections are served again.
    await waitFor(
      async () =>
        (await request(`${flooded.proxyUrl}/secure`, { headers: { host: HOST, 'x-api-key': KEY } }))
          .status === 200,
      10_000,
    );
    await flooded.stop();
  });
});
