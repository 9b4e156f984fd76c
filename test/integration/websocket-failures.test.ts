import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import type { Tollgate } from '../helpers/tollgate.ts';
import { blackholeAddress } from '../helpers/upstream.ts';
import { mustOpen, mustRefuse, nextMessage, startEchoUpstream } from '../helpers/websocket.ts';

/**
 * WebSocket upgrades take the same upstream path as plain requests: connect timeout, failover before
 * the upgrade is sent, one failure classification, passive health, and a checked 101.
 */
const scope = testScope();

function proxyFor(paths: Record<string, unknown>, main: Record<string, unknown> = {}): Promise<Tollgate> {
  return scope.tollgate({ upstreams: { upstreams: { 'ws.test': { paths } } }, main });
}

const wsUrl = (tollgate: Tollgate, path: string) => `${tollgate.proxyUrl.replace('http:', 'ws:')}${path}`;

/** tollgate_upstream_errors_total for one server and kind, summed over routes. */
function errorCount(metrics: string, server: string, kind: string): number {
  const escaped = server.replaceAll('.', '\\.');
  const line = new RegExp(
    `^tollgate_upstream_errors_total\\{[^}]*server="${escaped}",kind="${kind}"\\} (\\d+)$`,
    'gm',
  );
  return [...metrics.matchAll(line)].reduce((sum, match) => sum + Number(match[1]), 0);
}

/** A raw TCP upstream that answers every upgrade with `answer(key)` and records everything it receives. */
async function rawUpstream(answer: (key: string) => string) {
  const received: Buffer[] = [];
  const closed: Promise<void>[] = [];
  const server = net.createServer((socket) => {
    closed.push(once(socket, 'close').then(() => {}));
    socket.on('error', () => {});
    let answered = false;
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk);
      const text = Buffer.concat(received).toString('latin1');
      if (answered || !text.includes('\r\n\r\n')) return;
      answered = true;
      const key = /sec-websocket-key: *(\S+)/i.exec(text)?.[1] ?? '';
      socket.write(answer(key));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return scope.keep({
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    received: () => Buffer.concat(received).toString('latin1'),
    allClosed: () => Promise.all(closed),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

const accept = (key: string) =>
  createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');

describe('WebSocket upgrades on the shared upstream path', () => {
  it('a refused connection fails over to the next server, counted as a connect failure', async () => {
    const echo = scope.keep(await startEchoUpstream());
    const dead = await scope.deadServer();
    const tollgate = await proxyFor({ '/': { servers: [dead, echo.address] } });
    const socket = await mustOpen(wsUrl(tollgate, '/feed'), { host: 'ws.test' });
    socket.send('through the second server');
    assert.equal((await nextMessage(socket)).data.toString(), 'through the second server');
    socket.close();
    assert.equal(errorCount(await tollgate.metrics(), dead, 'connect'), 1);
  });

  it('the upstream connect timeout applies to upgrades, then the next server is tried', async () => {
    const echo = scope.keep(await startEchoUpstream());
    const blackhole = scope.keep(await blackholeAddress());
    const tollgate = await proxyFor(
      {
        '/failover': { servers: [blackhole.address, echo.address] },
        '/only': { servers: [blackhole.address] },
      },
      { upstream_connect_timeout_seconds: 0.5, upstream_response_timeout_seconds: 60 },
    );
    const socket = await mustOpen(wsUrl(tollgate, '/failover'), { host: 'ws.test' });
    socket.close();
    // Alone, the hanging server costs the connect timeout (not the 60 s handshake timeout): a 502.
    const refused = await mustRefuse(wsUrl(tollgate, '/only'), { host: 'ws.test' });
    assert.equal(refused.status, 502);
    assert.equal(errorCount(await tollgate.metrics(), blackhole.address, 'timeout'), 2);
  });

  it('a host name that does not resolve is a connect failure, as for plain requests', async () => {
    const tollgate = await proxyFor({ '/': { servers: ['tollgate-test.invalid:80'] } });
    const refused = await mustRefuse(wsUrl(tollgate, '/'), { host: 'ws.test' });
    assert.equal(refused.status, 502);
    assert.equal(errorCount(await tollgate.metrics(), 'tollgate-test.invalid:80', 'connect'), 1);
  });

  it('passive health ejects a server seen only through WebSocket traffic', async () => {
    // Unreachable (here: a name that does not resolve) is a connect failure, which ejects; a second
    // server, as passive health never takes a route's only one (docs/traffic.md#server-health).
    const gone = 'tollgate-test.invalid:80';
    const echo = scope.keep(await startEchoUpstream());
    const tollgate = await proxyFor({ '/': { servers: [gone, echo.address] } });
    const open = async () => {
      const socket = await mustOpen(wsUrl(tollgate, '/'), { host: 'ws.test' });
      socket.close();
    };
    // Round robin puts the dead server first every other upgrade; each such upgrade fails over.
    for (let i = 0; i < 8 && errorCount(await tollgate.metrics(), gone, 'connect') < 3; i++) await open();
    assert.equal(errorCount(await tollgate.metrics(), gone, 'connect'), 3);
    // Ejected after three connect failures: upgrades go to the live server without another attempt.
    for (let i = 0; i < 4; i++) await open();
    const metrics = await tollgate.metrics();
    assert.equal(errorCount(metrics, gone, 'connect'), 3);
    assert.match(
      metrics,
      new RegExp(`tollgate_upstream_up\\{route="ws\\.test/",server="${gone.replaceAll('.', '\\.')}"\\} 0`),
    );
    assert.ok(tollgate.logs().some((line) => line.msg === 'upstream server ejected' && line.server === gone));
  });

  it('a 101 with the wrong Sec-WebSocket-Accept is a 502 and never becomes a tunnel', async () => {
    const liar = await rawUpstream(
      () =>
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Accept: bm90IHRoZSByaWdodCBhY2NlcHQ=\r\n\r\n',
    );
    const tollgate = await proxyFor({ '/': { servers: [liar.address] } });
    // The attack: a raw client that, once "upgraded", writes a second request on the same socket.
    const client = net.connect({ host: '127.0.0.1', port: tollgate.proxyPort });
    await once(client, 'connect');
    const reply: Buffer[] = [];
    client.on('data', (chunk: Buffer) => reply.push(chunk));
    client.write(
      'GET /chat HTTP/1.1\r\nHost: ws.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    client.write('GET /smuggled HTTP/1.1\r\nHost: ws.test\r\n\r\n');
    client.on('error', () => {});
    await once(client, 'close');
    const text = Buffer.concat(reply).toString('latin1');
    assert.match(text, /^HTTP\/1\.1 502 /);
    assert.match(text, /WebSocket handshake is not valid: wrong Sec-WebSocket-Accept/);
    await liar.allClosed();
    assert.doesNotMatch(liar.received(), /smuggled/);
    assert.equal(errorCount(await tollgate.metrics(), liar.address, 'protocol'), 1);
  });

  it('a 101 without Upgrade: websocket is refused too; a valid raw 101 opens the tunnel', async () => {
    const noUpgrade = await rawUpstream(
      (key) =>
        `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nSec-WebSocket-Accept: ${accept(key)}\r\n\r\n`,
    );
    const honest = await rawUpstream(
      (key) =>
        `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: ${accept(key)}\r\n\r\n`,
    );
    const tollgate = await proxyFor({
      '/no-upgrade': { servers: [noUpgrade.address] },
      '/honest': { servers: [honest.address] },
    });
    const refused = await mustRefuse(wsUrl(tollgate, '/no-upgrade'), { host: 'ws.test' });
    assert.equal(refused.status, 502);
    const socket = await mustOpen(wsUrl(tollgate, '/honest'), { host: 'ws.test' });
    socket.terminate();
  });

  it('a final answer other than 101 is relayed as it is, and counts as the server answering', async () => {
    const refusing = await rawUpstream(
      () =>
        'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope',
    );
    const tollgate = await proxyFor({ '/': { servers: [refusing.address] } });
    const refused = await mustRefuse(wsUrl(tollgate, '/'), { host: 'ws.test' });
    assert.equal(refused.status, 403);
    assert.equal(refused.body, 'nope');
  });

  it('informational answers before the 101 are skipped', async () => {
    const hinting = await rawUpstream(
      (key) =>
        'HTTP/1.1 103 Early Hints\r\nLink: </app.js>; rel=preload\r\n\r\n' +
        `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: ${accept(key)}\r\n\r\n`,
    );
    const tollgate = await proxyFor({ '/': { servers: [hinting.address] } });
    const socket = await mustOpen(wsUrl(tollgate, '/'), { host: 'ws.test' });
    socket.terminate();
  });

  /** Writes a raw upgrade request and returns everything the proxy answered before closing. */
  async function rawUpgrade(port: number, extraHeaders: string, body = ''): Promise<string> {
    const client = net.connect({ host: '127.0.0.1', port });
    await once(client, 'connect');
    const reply: Buffer[] = [];
    client.on('data', (chunk: Buffer) => reply.push(chunk));
    client.on('error', () => {});
    client.write(
      `GET / HTTP/1.1\r\nHost: ws.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n${extraHeaders}\r\n${body}`,
    );
    await once(client, 'close');
    return Buffer.concat(reply).toString('latin1');
  }

  it('a malformed Sec-WebSocket-Key, or a handshake with a body, is refused before any upstream is asked', async () => {
    const echo = scope.keep(await startEchoUpstream());
    const tollgate = await proxyFor({ '/': { servers: [echo.address] } });
    const badKey = await rawUpgrade(
      tollgate.proxyPort,
      'Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n',
    );
    assert.match(badKey, /^HTTP\/1\.1 400 /);
    const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: ws.test\r\n\r\n';
    const withBody = await rawUpgrade(
      tollgate.proxyPort,
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: ${smuggled.length}\r\n`,
      smuggled,
    );
    assert.match(withBody, /^HTTP\/1\.1 400 /);
    assert.match(withBody, /cannot carry a body/);
    assert.equal(echo.handshakes.length, 0);
  });
});
