import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { hasOpenssl, selfSigned } from '../helpers/certs.ts';
import {
  connectH2,
  ERROR,
  FLAG,
  FRAME,
  frame,
  headerBlock,
  type RawH2,
  requestHeaders,
} from '../helpers/h2-frames.ts';
import { connectRaw } from '../helpers/raw-connection.ts';
import { testScope } from '../helpers/scope.ts';
import { MAIN_JS, request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

/**
 * Clients that stop reading a response (an HTTP/2 stream whose window stays 0, an HTTP/1.1 reader
 * that stopped reading) and clients that leave mid-response, against the real process: each must
 * give the route's upstream connections back (docs/security.md "Client limits"). Also the first-byte
 * timeout of the plain listener with h2c detection on. A route of two upstream slots, 1 s timeouts.
 */
const scope = testScope();
const HOST = 'app.test';
/** More than every buffer between the upstream and a client that reads nothing (loopback included). */
const BIG_BYTES = 256 * 1024 * 1024;

/** One request the upstream is answering with a big body; `aborted` settles when its connection closes before the end. */
interface Download {
  url: string;
  aborted: Promise<void>;
  isAborted(): boolean;
}

async function bigUpstream(downloads: Download[]): Promise<Upstream> {
  return scope.upstream({
    handler: (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (!req.url?.startsWith('/big')) {
        res.end('small');
        return;
      }
      let cut = false;
      const aborted = new Promise<void>((resolve) =>
        res.once('close', () => {
          if (res.writableFinished) return;
          cut = true;
          resolve();
        }),
      );
      downloads.push({ url: req.url, aborted, isAborted: () => cut });
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      const bytes = Number(new URL(req.url, 'http://x').searchParams.get('bytes') ?? BIG_BYTES);
      let sent = 0;
      const pump = () => {
        while (sent < bytes && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
    },
  });
}

/** A SETTINGS frame granting every stream a flow-control window of 0 (SETTINGS_INITIAL_WINDOW_SIZE). */
function zeroWindowSettings(): Buffer {
  const payload = Buffer.alloc(6);
  payload.writeUInt16BE(0x4, 0);
  payload.writeUInt32BE(0, 2);
  return frame(FRAME.SETTINGS, 0, 0, payload);
}

/** WINDOW_UPDATE: `increment` more bytes for stream `id` (0: the connection). */
function windowUpdate(id: number, increment: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(increment);
  return frame(FRAME.WINDOW_UPDATE, 0, id, payload);
}

/** A raw HTTP/2 connection (h2c, or TLS) that never lets a byte of response body through, with a GET per path. */
async function zeroWindowClient(port: number, paths: string[], tls = false): Promise<RawH2> {
  const connection = await connectH2(port, { tls });
  connection.send(
    zeroWindowSettings(),
    ...paths.map((path, i) =>
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        1 + 2 * i,
        headerBlock(requestHeaders(HOST, path)),
      ),
    ),
  );
  return connection;
}

const upstreams = (upstream: Upstream) => ({
  upstreams: { [HOST]: { paths: { '/': { servers: [upstream.address] } } } },
});

/** Two upstream slots for the route, and a short wait for one: a held route answers 503 quickly. */
const TWO_SLOTS = {
  upstream_max_connections: 2,
  upstream_max_connections_per_route: 2,
  upstream_queue_size: 1,
  upstream_queue_timeout_seconds: 0.5,
  http2_cleartext: true,
};

/** A TLS listener beside the plain one: the HTTP/2 attacks are tried on both (ALPN h2 and h2c). */
function tlsListener(): Record<string, unknown> {
  const certificate = selfSigned(HOST);
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-send-timeout-tls-'));
  writeFileSync(join(dir, 'tls.crt'), certificate.cert);
  writeFileSync(join(dir, 'tls.key'), certificate.key);
  scope.keep({ close: async () => rmSync(dir, { recursive: true, force: true }) });
  return {
    proxy_address_tls: '127.0.0.1:0',
    tls_certificate: join(dir, 'tls.crt'),
    tls_key_file: join(dir, 'tls.key'),
  };
}

const skip = hasOpenssl() ? false : 'openssl is needed to make a certificate';

const small = (tollgate: Tollgate) => request(tollgate.proxyUrl, { path: '/small', headers: { host: HOST } });

describe('client_send_timeout_seconds: a response the client stops taking is reset', { skip }, () => {
  const downloads: Download[] = [];
  let tollgate: Tollgate;
  before(async () => {
    const upstream = await bigUpstream(downloads);
    tollgate = await scope.tollgate({
      main: {
        ...TWO_SLOTS,
        ...tlsListener(),
        client_send_timeout_seconds: 1,
        client_first_byte_timeout_seconds: 1,
      },
      upstreams: upstreams(upstream),
    });
  });

  it('HTTP/2 zero-window streams holding every slot are reset and their upstream requests aborted; the route serves again', {
    timeout: 30_000,
  }, async () => {
    const connections = [
      await zeroWindowClient(tollgate.tlsPort as number, ['/big/h2-1'], true),
      await zeroWindowClient(tollgate.proxyPort, ['/big/h2-2']),
    ];
    await waitFor(() => downloads.filter((d) => d.url.startsWith('/big/h2-')).length === 2);
    const resets = await Promise.all(
      connections.map((c) => c.waitFor((f) => f.streamId === 1 && f.type === FRAME.RST_STREAM)),
    );
    for (const [i, reset] of resets.entries()) assert.equal(connections[i]?.errorCode(reset), ERROR.CANCEL);
    // The upstream sees its requests go: the slots are free again.
    await Promise.all(downloads.filter((d) => d.url.startsWith('/big/h2-')).map((d) => d.aborted));
    const answer = await small(tollgate);
    assert.equal(answer.status, 200);
    assert.equal(answer.body, 'small');
    // The connections themselves live on: the client may still use them.
    for (const connection of connections) {
      assert.equal(connection.socket.destroyed, false);
      connection.socket.destroy();
    }

    await waitFor(() => tollgate.logs().filter((l) => l.msg === 'access' && l.reason).length >= 2);
    const line = tollgate.logs().find((l) => l.msg === 'access' && l.path === '/big/h2-1');
    assert.equal(line?.status, 200);
    assert.equal(line?.completed, false);
    assert.equal(line?.reason, 'client_send_timeout');
    assert.match(
      await tollgate.metrics(),
      /^tollgate_client_send_timeouts_total\{route="app\.test\/"\} [2-9]/m,
    );
  });

  it('a slow HTTP/2 reader that keeps taking bytes is never reset, however long the download takes', {
    timeout: 30_000,
  }, async () => {
    // 256 KiB every 100 ms: more than the loopback buffers hold, so the upstream is held back for
    // seconds (its request stays in flight, longer than the send timeout) yet never a second idle.
    const total = 8 * 1024 * 1024;
    const step = 256 * 1024;
    const connection = await zeroWindowClient(tollgate.proxyPort, [`/big/slow?bytes=${total}`]);
    let received = 0;
    const ended = connection.waitFor(
      (f) =>
        f.streamId === 1 &&
        (f.type === FRAME.RST_STREAM || (f.type === FRAME.DATA && (f.flags & FLAG.END_STREAM) !== 0)),
    );
    const pacer = setInterval(() => connection.send(windowUpdate(1, step), windowUpdate(0, step)), 100);
    try {
      const last = await ended;
      assert.notEqual(last.type, FRAME.RST_STREAM, 'the stream was reset');
    } finally {
      clearInterval(pacer);
    }
    for (const f of connection.frames)
      if (f.streamId === 1 && f.type === FRAME.DATA) received += f.payload.length;
    assert.equal(received, total);
    assert.equal(downloads.find((d) => d.url.startsWith('/big/slow'))?.isAborted(), false);
    connection.socket.destroy();
  });

  it('an HTTP/1.1 client that stops reading has its connection closed and its upstream request aborted', {
    timeout: 30_000,
  }, async () => {
    const socket = net.connect(tollgate.proxyPort, '127.0.0.1');
    await once(socket, 'connect');
    socket.pause();
    socket.write(`GET /big/h1 HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
    await waitFor(() => downloads.some((d) => d.url === '/big/h1'));
    await downloads.find((d) => d.url === '/big/h1')?.aborted;
    assert.equal((await small(tollgate)).status, 200);
    // What was sent before the cut is still readable; then the connection ends, short of the body.
    let received = 0;
    socket.on('data', (d: Buffer) => {
      received += d.length;
    });
    socket.on('error', () => {});
    socket.resume();
    await once(socket, 'close');
    assert.ok(received < BIG_BYTES, `received ${received}`);
  });

  it('with http2_cleartext, a silent, a one-byte and a partial-preface connection are closed after client_first_byte_timeout_seconds', {
    timeout: 30_000,
  }, async () => {
    const silent = await connectRaw(tollgate.proxyPort);
    const oneByte = await connectRaw(tollgate.proxyPort);
    oneByte.socket.write('P');
    const partial = await connectRaw(tollgate.proxyPort);
    partial.socket.write('PRI * HTTP/2.0\r\n');
    await Promise.all([silent.closed, oneByte.closed, partial.closed]);
    for (const connection of [silent, oneByte, partial]) assert.equal(connection.received(), '');
    assert.equal((await small(tollgate)).status, 200);
  });
});

describe('a small response handed over whole is reset too when its bytes cannot reach the client', {
  skip,
}, () => {
  const downloads: Download[] = [];
  let tollgate: Tollgate;
  before(async () => {
    const upstream = await bigUpstream(downloads);
    // A long keep-alive: only the send timeout can end these streams within the test.
    tollgate = await scope.tollgate({
      main: {
        ...TWO_SLOTS,
        ...tlsListener(),
        client_send_timeout_seconds: 1,
        keepalive_timeout_seconds: 120,
      },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers: [upstream.address] },
              '/private': {
                servers: [upstream.address],
                authorization: { type: 'basic', creds: 'admin:s3cret-pass' },
              },
            },
          },
        },
      },
    });
  });

  const endOf = (connection: RawH2) =>
    connection.waitFor(
      (f) =>
        f.streamId === 1 &&
        (f.type === FRAME.RST_STREAM || (f.type === FRAME.DATA && (f.flags & FLAG.END_STREAM) !== 0)),
    );

  it("HTTP/2: a zero-window stream whose small answer (the upstream's, or Tollgate's own 401) was written whole gets RST_STREAM CANCEL; readers, prompt or late, get it whole", {
    timeout: 30_000,
  }, async () => {
    const stalledPaths = ['/small/stalled-h2c', '/small/stalled-tls', '/private/stalled'];
    const stalled = [
      await zeroWindowClient(tollgate.proxyPort, ['/small/stalled-h2c']),
      await zeroWindowClient(tollgate.tlsPort as number, ['/small/stalled-tls'], true),
      await zeroWindowClient(tollgate.proxyPort, ['/private/stalled']),
    ];
    // Opens its window only once the answer's headers are in: the body waited for it, a moment.
    const late = await zeroWindowClient(tollgate.proxyPort, ['/small/late']);
    const lateEnd = endOf(late);
    await late.waitFor((f) => f.streamId === 1 && f.type === FRAME.HEADERS);
    late.send(windowUpdate(1, 1024));
    // A client with the default window, several answers on one connection it keeps open.
    const reader = await connectH2(tollgate.proxyPort);
    reader.send(
      ...[1, 3, 5].map((id) =>
        frame(
          FRAME.HEADERS,
          FLAG.END_HEADERS | FLAG.END_STREAM,
          id,
          headerBlock(requestHeaders(HOST, `/small/reader-${id}`)),
        ),
      ),
    );

    const resets = await Promise.all(stalled.map(endOf));
    for (const [i, reset] of resets.entries()) {
      assert.equal(reset.type, FRAME.RST_STREAM);
      assert.equal(stalled[i]?.errorCode(reset), ERROR.CANCEL);
    }
    // The send timeout has passed for every stream above: none of the readers was cut.
    assert.equal((await lateEnd).type, FRAME.DATA);
    assert.equal(late.frames.filter((f) => f.type === FRAME.RST_STREAM).length, 0);
    for (const id of [1, 3, 5]) {
      const end = await reader.waitFor(
        (f) => f.streamId === id && f.type === FRAME.DATA && (f.flags & FLAG.END_STREAM) !== 0,
      );
      assert.ok(end);
    }
    assert.equal(reader.frames.filter((f) => f.type === FRAME.RST_STREAM).length, 0);
    // Stream resets only: every connection lives on.
    for (const connection of [...stalled, late, reader]) {
      assert.equal(connection.socket.destroyed, false);
      connection.socket.destroy();
    }

    await waitFor(() => tollgate.logs().filter((l) => l.msg === 'access' && l.reason).length >= 3);
    for (const path of stalledPaths) {
      const line = tollgate.logs().find((l) => l.msg === 'access' && l.path === path);
      assert.equal(line?.status, path.startsWith('/private') ? 401 : 200, path);
      assert.equal(line?.completed, false, path);
      assert.equal(line?.reason, 'client_send_timeout', path);
    }
    const lateLine = tollgate.logs().find((l) => l.msg === 'access' && l.path === '/small/late');
    assert.equal(lateLine?.completed, true);
  });
});

describe('upstream requests of an HTTP/2 client that leaves are aborted', { skip }, () => {
  const downloads: Download[] = [];
  let tollgate: Tollgate;
  before(async () => {
    const upstream = await bigUpstream(downloads);
    // Long client timeouts: only the client's leaving can end these requests within the test.
    tollgate = await scope.tollgate({
      main: {
        ...TWO_SLOTS,
        ...tlsListener(),
        client_send_timeout_seconds: 120,
        keepalive_timeout_seconds: 120,
      },
      upstreams: upstreams(upstream),
    });
  });

  for (const listener of ['TLS', 'h2c'] as const) {
    it(`a client that disconnects with zero-window streams in flight frees the upstream at once (${listener})`, {
      timeout: 30_000,
    }, async () => {
      const paths = [`/big/gone-${listener}-1`, `/big/gone-${listener}-2`];
      const connection =
        listener === 'TLS'
          ? await zeroWindowClient(tollgate.tlsPort as number, paths, true)
          : await zeroWindowClient(tollgate.proxyPort, paths);
      const mine = () => downloads.filter((d) => paths.includes(d.url));
      await waitFor(() => mine().length === 2);
      connection.socket.destroy();
      await Promise.all(mine().map((d) => d.aborted));
      assert.equal((await small(tollgate)).status, 200);
    });
  }
});

describe('HTTP/2 sessions whose streams are all stalled are not exempt from keepalive_timeout_seconds', () => {
  const downloads: Download[] = [];
  let tollgate: Tollgate;
  before(async () => {
    const upstream = await bigUpstream(downloads);
    tollgate = await scope.tollgate({
      main: { ...TWO_SLOTS, client_send_timeout_seconds: 120, keepalive_timeout_seconds: 1 },
      upstreams: upstreams(upstream),
    });
  });

  it('a zero-window session with a finished and a held response is closed when idle; the upstream is freed', {
    timeout: 30_000,
  }, async () => {
    const connection = await zeroWindowClient(tollgate.proxyPort, ['/small', '/big/idle']);
    await waitFor(() => downloads.length === 1);
    await connection.closed;
    await downloads[0]?.aborted;
    assert.equal(
      connection.frames.some((f) => f.type === FRAME.DATA),
      false,
    );
  });
});

describe('validate: client_send_timeout_seconds', () => {
  it('refuses a value that is not a positive number, naming file:line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-send-timeout-'));
    try {
      await writeFile(
        join(dir, 'main.yaml'),
        'proxy_address_http: "127.0.0.1:0"\nclient_send_timeout_seconds: 0\n',
      );
      await writeFile(
        join(dir, 'upstreams.yaml'),
        `upstreams:\n  ${HOST}:\n    paths:\n      "/":\n        servers: ["127.0.0.1:3000"]\n`,
      );
      const result = spawnSync(process.execPath, [MAIN_JS, 'validate', '--config', join(dir, 'main.yaml')], {
        encoding: 'utf8',
        env: { ...process.env, TOLLGATE_CONFIG: '' },
        timeout: 60_000,
      });
      assert.equal(result.status, 1, result.stdout);
      assert.match(
        result.stderr,
        /main\.yaml:2:30: client_send_timeout_seconds: 0 is out of range \(must be > 0 and <= 2147483\)/,
      );
      await writeFile(
        join(dir, 'main.yaml'),
        'proxy_address_http: "127.0.0.1:0"\nclient_send_timeout_seconds: 2.5\n',
      );
      const valid = spawnSync(process.execPath, [MAIN_JS, 'validate', '--config', join(dir, 'main.yaml')], {
        encoding: 'utf8',
        env: { ...process.env, TOLLGATE_CONFIG: '' },
        timeout: 60_000,
      });
      assert.equal(valid.status, 0, valid.stderr);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
