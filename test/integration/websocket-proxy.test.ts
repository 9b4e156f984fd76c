import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { hasOpenssl, selfSigned } from '../helpers/certs.ts';
import {
  freePort,
  type RefusedAddress,
  refusedAddress,
  request,
  startTollgate,
  type Tollgate,
  waitFor,
} from '../helpers/tollgate.ts';
import {
  type EchoUpstream,
  mustOpen,
  mustRefuse,
  nextMessage,
  startEchoUpstream,
} from '../helpers/websocket.ts';

describe('WebSockets through the proxy', () => {
  let upstream: EchoUpstream;
  let tollgate: Tollgate;
  let ws: string;
  let silent: net.Server;
  let dead: RefusedAddress;

  before(async () => {
    upstream = await startEchoUpstream();
    dead = await refusedAddress();
    // Accepts connections and never answers: the handshake must time out.
    silent = net.createServer(() => {}).listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const silentPort = (silent.address() as AddressInfo).port;
    tollgate = await startTollgate({
      main: { upstream_response_timeout_seconds: 1 },
      upstreams: {
        sticky_sessions: true,
        upstreams: {
          'ws.test': {
            paths: {
              '/': { servers: [upstream.address] },
              '/secure': { servers: [upstream.address], to_https: true },
              '/private': {
                servers: [upstream.address],
                authorization: { type: 'basic', creds: 'alice:wonderland' },
              },
              '/limited': { servers: [upstream.address], rate_limit: 1 },
              '/dead': { servers: [dead.address] },
              '/silent': { servers: [`127.0.0.1:${silentPort}`] },
            },
          },
        },
      },
    });
    ws = tollgate.proxyUrl.replace('http:', 'ws:');
  });
  after(async () => {
    await tollgate.stop();
    await upstream.close();
    silent.close();
    await dead.release();
  });

  it('echoes text and binary messages both ways, on the normalised path, with proxy headers', async () => {
    const socket = await mustOpen(`${ws}/chat/../chat//room?x=1`, {
      host: 'ws.test',
      'x-tollgate-subject': 'forged',
      cookie: 'a=1',
    });
    socket.send('hello');
    const text = await nextMessage(socket);
    assert.equal(text.data.toString(), 'hello');
    assert.equal(text.isBinary, false);
    const payload = Buffer.alloc(1024 * 1024, 7); // bigger than any socket buffer: it must stream
    socket.send(payload);
    const binary = await nextMessage(socket);
    assert.equal(binary.isBinary, true);
    assert.ok(binary.data.equals(payload));

    const handshake = upstream.handshakes.at(-1);
    assert.ok(handshake);
    assert.equal(handshake.url, '/chat/room?x=1');
    assert.equal(handshake.headers.host, 'ws.test');
    assert.equal(handshake.headers.upgrade, 'websocket');
    assert.equal(handshake.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(handshake.headers['x-forwarded-proto'], 'http');
    assert.equal(handshake.headers['x-forwarded-host'], 'ws.test');
    assert.equal(handshake.headers['x-tollgate-subject'], undefined);
    assert.equal(handshake.headers.cookie, 'a=1');
    socket.close();
    await once(socket, 'close');
  });

  it('closes the upstream side when the client closes', async () => {
    const socket = await mustOpen(`${ws}/client-closes`, { host: 'ws.test' });
    socket.send('ping');
    await nextMessage(socket);
    const serverSide = upstream.sockets.at(-1);
    assert.ok(serverSide);
    const closed = once(serverSide, 'close');
    socket.close(1000, 'done');
    const [code] = (await closed) as [number];
    assert.equal(code, 1000);
  });

  it('closes the client side when the upstream closes', async () => {
    const socket = await mustOpen(`${ws}/server-closes`, { host: 'ws.test' });
    const closed = once(socket, 'close');
    socket.send('close please');
    const [code, reason] = (await closed) as [number, Buffer];
    assert.equal(code, 1000);
    assert.equal(reason.toString(), 'bye');
  });

  it('closes the client side when the upstream connection is cut', async () => {
    const socket = await mustOpen(`${ws}/server-dies`, { host: 'ws.test' });
    socket.send('ping');
    await nextMessage(socket);
    const closed = once(socket, 'close');
    upstream.sockets.at(-1)?.terminate(); // TCP close without a close frame
    const [code] = (await closed) as [number];
    assert.equal(code, 1006);
  });

  it('sends the sticky cookie with the 101', async () => {
    const socket = new WebSocket(`${ws}/sticky`, { headers: { host: 'ws.test' } });
    const upgraded = once(socket, 'upgrade');
    await once(socket, 'open'); // emitted in the same tick as 'upgrade'
    const [response] = (await upgraded) as [http.IncomingMessage];
    assert.match(String(response.headers['set-cookie']), /^tollgate_sticky=/);
    socket.close();
  });

  it('serves other Upgrade protocols as plain requests', async () => {
    const res = await request(`${tollgate.proxyUrl}/plain`, {
      headers: { host: 'ws.test', connection: 'Upgrade', upgrade: 'h2c' },
    });
    assert.equal(res.status, 426); // the echo upstream's answer to a plain GET: it was forwarded
  });

  it('answers 404 for an unknown host', async () => {
    const refused = await mustRefuse(`${ws}/`, { host: 'nobody.test' });
    assert.equal(refused.status, 404);
  });

  it('redirects a plain-HTTP upgrade on a to_https route like any GET', async () => {
    const refused = await mustRefuse(`${ws}/secure/feed?a=1`, { host: 'ws.test' });
    assert.equal(refused.status, 301);
    assert.equal(refused.headers.location, 'https://ws.test/secure/feed?a=1');
  });

  it('authenticates the upgrade and forwards the subject, not the credentials', async () => {
    const refused = await mustRefuse(`${ws}/private/feed`, { host: 'ws.test' });
    assert.equal(refused.status, 401);
    assert.match(String(refused.headers['www-authenticate']), /^Basic/);
    const wrong = await mustRefuse(`${ws}/private/feed`, {
      host: 'ws.test',
      authorization: `Basic ${Buffer.from('alice:nope').toString('base64')}`,
    });
    assert.equal(wrong.status, 401);

    const socket = await mustOpen(`${ws}/private/feed`, {
      host: 'ws.test',
      authorization: `Basic ${Buffer.from('alice:wonderland').toString('base64')}`,
    });
    const handshake = upstream.handshakes.at(-1);
    assert.ok(handshake);
    assert.equal(handshake.url, '/private/feed');
    assert.equal(handshake.headers.authorization, undefined);
    assert.equal(handshake.headers['x-tollgate-subject'], 'alice');
    socket.close();
  });

  it('rate-limits upgrades like requests', async () => {
    const socket = await mustOpen(`${ws}/limited`, { host: 'ws.test' });
    const refused = await mustRefuse(`${ws}/limited`, { host: 'ws.test' });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers['retry-after'], '1');
    socket.close();
  });

  it('answers 502 when the upstream is down', async () => {
    const refused = await mustRefuse(`${ws}/dead`, { host: 'ws.test' });
    assert.equal(refused.status, 502);
  });

  it('answers 504 when the upstream does not answer the handshake in time', async () => {
    const refused = await mustRefuse(`${ws}/silent`, { host: 'ws.test' });
    assert.equal(refused.status, 504);
  });

  it('writes one access line per WebSocket, when it ends, with status 101 and whether it closed cleanly', async () => {
    const access = (path: string) =>
      tollgate.logs().find((line) => line.msg === 'access' && line.path === path && line.status === 101);
    // '/client-closes' ended with a 1000 close handshake both ways; '/server-dies' was cut (1006).
    await waitFor(() => access('/client-closes') !== undefined && access('/server-dies') !== undefined);
    assert.equal(access('/client-closes')?.completed, true);
    assert.equal(access('/server-dies')?.completed, false);
  });
});

describe('WebSockets over the TLS listener (wss)', { skip: hasOpenssl() ? false : 'no openssl' }, () => {
  it('proxies wss on a to_https route without redirecting, with X-Forwarded-Proto https', async () => {
    const upstream = await startEchoUpstream();
    const cert = selfSigned('localhost');
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-wss-'));
    await writeFile(join(dir, 'tls.crt'), cert.cert);
    await writeFile(join(dir, 'tls.key'), cert.key);
    const tlsPort = await freePort();
    const tollgate = await startTollgate({
      main: {
        proxy_address_tls: `127.0.0.1:${tlsPort}`,
        tls_certificate: join(dir, 'tls.crt'),
        tls_key_file: join(dir, 'tls.key'),
      },
      upstreams: {
        to_https: true,
        upstreams: { 'ws.test': { paths: { '/': { servers: [upstream.address] } } } },
      },
    });
    try {
      const socket = await new Promise<WebSocket>((resolve, reject) => {
        const client = new WebSocket(`wss://localhost:${tlsPort}/feed`, {
          headers: { host: 'ws.test' },
          ca: cert.cert,
        });
        client.once('open', () => resolve(client));
        client.once('error', reject);
        client.once('unexpected-response', (_req, res) =>
          reject(new Error(`refused with ${res.statusCode}`)),
        );
      });
      socket.send('over tls');
      assert.equal((await nextMessage(socket)).data.toString(), 'over tls');
      assert.equal(upstream.handshakes.at(-1)?.headers['x-forwarded-proto'], 'https');
      socket.close();
      await once(socket, 'close');
    } finally {
      await tollgate.stop();
      await upstream.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
