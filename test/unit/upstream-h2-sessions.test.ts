import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { type AddressInfo, connect } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import type { Dispatcher } from 'undici';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { H2SessionPool } from '../../src/upstream/h2-session-pool.ts';

interface Answer {
  status: number;
  body: string;
  trailers: Record<string, unknown>;
}

/** One request through the pool, with a handler shaped like the forwarder's. */
function send(pool: H2SessionPool, path: string, body: string | null = null): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let status = 0;
    const chunks: Buffer[] = [];
    const handler: Dispatcher.DispatchHandler = {
      onResponseStart: (_ctrl, statusCode) => {
        status = statusCode;
      },
      onResponseData: (_ctrl, chunk) => {
        chunks.push(chunk);
      },
      onResponseEnd: (_ctrl, trailers) =>
        resolve({
          status,
          body: Buffer.concat(chunks).toString(),
          trailers: Object.fromEntries(Object.entries(trailers)),
        }),
      onResponseError: (_ctrl, error) => reject(error),
    };
    pool.dispatch(
      {
        origin: 'http://upstream.test',
        method: 'POST',
        path,
        headers: ['host', 'upstream.test', 'te', 'trailers'],
        body,
      },
      handler,
    );
  });
}

const servers: http2.Http2Server[] = [];
const pools: H2SessionPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
  for (const server of servers.splice(0)) server.close();
});

/** An h2c server on loopback; `sessions` counts the connections it accepted. */
async function h2cServer(
  settings: http2.Settings,
  onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void,
) {
  const server = http2.createServer({ settings });
  const sessions: http2.ServerHttp2Session[] = [];
  server.on('session', (session) => sessions.push(session));
  server.on('stream', onStream);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return { port: (server.address() as AddressInfo).port, sessions };
}

function poolTo(
  port: number,
  idleTimeoutMs = 60_000,
  timeouts = { headersMs: 5_000, bodyMs: 5_000 },
): H2SessionPool {
  const pool = new H2SessionPool({
    origin: `http://127.0.0.1:${port}`,
    dial: (callback) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => callback(null, socket));
      socket.once('error', (error) => callback(error, null));
    },
    maxStreamsPerSession: 100,
    idleTimeoutMs,
    timeouts,
  });
  pools.push(pool);
  return pool;
}

/** Answers with the request body and a gRPC-style trailer. */
function echo(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  stream.on('end', () => {
    stream.respond({ ':status': 200 }, { waitForTrailers: true });
    stream.on('wantTrailers', () =>
      stream.sendTrailers({ 'grpc-status': '0', path: String(headers[':path']) }),
    );
    stream.end(Buffer.concat(chunks));
  });
}

describe('upstream HTTP/2 sessions on node:http2 (docs/traffic.md#http2-to-upstreams)', () => {
  it('streams a body both ways and passes the trailers; later requests reuse the session', async () => {
    const { port, sessions } = await h2cServer({}, echo);
    const pool = poolTo(port);
    const first = await send(pool, '/one', 'hello');
    assert.deepEqual(first, { status: 200, body: 'hello', trailers: { 'grpc-status': '0', path: '/one' } });
    const answers = await Promise.all([send(pool, '/a', 'x'), send(pool, '/b', 'y'), send(pool, '/c', null)]);
    assert.deepEqual(
      answers.map((answer) => answer.body),
      ['x', 'y', ''],
    );
    assert.equal(sessions.length, 1);
  });

  it("opens another session when every one carries the peer's SETTINGS_MAX_CONCURRENT_STREAMS", async () => {
    const held: http2.ServerHttp2Stream[] = [];
    let release: () => void = () => {};
    const allHeld = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { port, sessions } = await h2cServer({ maxConcurrentStreams: 2 }, (stream, headers) => {
      stream.resume();
      if (headers[':path'] === '/warm') {
        stream.respond({ ':status': 200 }, { endStream: true });
        return;
      }
      held.push(stream);
      // Answered only once all five are open at the same time.
      if (held.length === 5) release();
      void allHeld.then(() => {
        if (!stream.closed) stream.respond({ ':status': 200 }, { endStream: true });
      });
    });
    const pool = poolTo(port);
    // One session open before the burst.
    await send(pool, '/warm');
    const answers = await Promise.all([1, 2, 3, 4, 5].map((n) => send(pool, `/${n}`)));
    assert.deepEqual(
      answers.map((answer) => answer.status),
      [200, 200, 200, 200, 200],
    );
    // 5 streams at 2 per session: 3 sessions, the warm-up one included.
    assert.equal(sessions.length, 3);
  });

  it('a session the server shuts down (GOAWAY, close) takes no new stream; the next request opens another', async () => {
    const { port, sessions } = await h2cServer({}, (stream) => {
      stream.respond({ ':status': 200 }, { endStream: true });
      // A graceful shutdown after this answer: GOAWAY, then the connection closes.
      stream.session?.close();
    });
    const pool = poolTo(port);
    assert.equal((await send(pool, '/1')).status, 200);
    await once(sessions[0] as http2.ServerHttp2Session, 'close');
    assert.equal((await send(pool, '/2')).status, 200);
    assert.equal(sessions.length, 2);
  });

  it('closes a session left idle for the idle timeout', async () => {
    const { port, sessions } = await h2cServer({}, echo);
    const pool = poolTo(port, 50);
    await send(pool, '/1', 'x');
    // The client closes it: the server sees the connection end without doing anything itself.
    await once(sessions[0] as http2.ServerHttp2Session, 'close');
    assert.equal((await send(pool, '/2', 'y')).body, 'y');
    assert.equal(sessions.length, 2);
  });

  it('a server that is not there fails as a connect error (another server may be tried)', async () => {
    const { port } = await h2cServer({}, echo);
    const server = servers.pop() as http2.Http2Server;
    await new Promise((resolve) => server.close(resolve));
    const error = await send(poolTo(port), '/1').then(
      () => assert.fail('answered'),
      (failure: Error) => failure,
    );
    assert.deepEqual(
      { kind: classifyUpstreamError(error).kind, notSent: classifyUpstreamError(error).notSent },
      { kind: 'connect', notSent: true },
    );
  });

  it('a paused response holds the upstream back (flow control) until resumed', async () => {
    const total = 4 * 1024 * 1024;
    let blocked: () => void = () => {};
    const serverBlocked = new Promise<void>((resolve) => {
      blocked = resolve;
    });
    let written = 0;
    let stalls = 0;
    const { port } = await h2cServer({}, (stream) => {
      stream.respond({ ':status': 200 });
      const pump = () => {
        while (written < total) {
          written += 64 * 1024;
          if (!stream.write(Buffer.alloc(64 * 1024, 1))) {
            // The first stall is the server's own buffer; the second, the client's stream window.
            if (++stalls === 2) blocked();
            stream.once('drain', pump);
            return;
          }
        }
        stream.end();
      };
      pump();
    });
    const pool = poolTo(port);
    let received = 0;
    let controller: Dispatcher.DispatchController | null = null;
    let paused: () => void = () => {};
    const responsePaused = new Promise<void>((resolve) => {
      paused = resolve;
    });
    const ended = new Promise<void>((resolve, reject) => {
      pool.dispatch(
        {
          origin: 'http://upstream.test',
          method: 'GET',
          path: '/big',
          headers: ['host', 'upstream.test'],
          body: null,
        },
        {
          onResponseStart: (ctrl) => {
            controller = ctrl;
            ctrl.pause();
            paused();
          },
          onResponseData: (_ctrl, chunk) => {
            received += chunk.length;
          },
          onResponseEnd: () => resolve(),
          onResponseError: (_ctrl, error) => reject(error),
        },
      );
    });
    await Promise.all([responsePaused, serverBlocked]);
    // The server could write no more than the HTTP/2 windows allow, far from the whole body.
    assert.ok(written < total / 2, `${written} bytes written while the client was paused`);
    // Paused before the first DATA frame: the handler saw none of it.
    assert.equal(received, 0);
    (controller as Dispatcher.DispatchController | null)?.resume();
    await ended;
    assert.equal(received, total);
  });

  it('an aborted request cancels its upstream stream (RST_STREAM CANCEL), the session lives on', async () => {
    let cancelled: (code: number) => void = () => {};
    const upstreamClosed = new Promise<number>((resolve) => {
      cancelled = resolve;
    });
    const { port, sessions } = await h2cServer({}, (stream, headers) => {
      if (headers[':path'] === '/after') {
        stream.respond({ ':status': 200 }, { endStream: true });
        return;
      }
      stream.respond({ ':status': 200 });
      stream.write('first');
      stream.on('close', () => cancelled(stream.rstCode));
    });
    const pool = poolTo(port);
    const failure = await new Promise<Error>((resolve) => {
      pool.dispatch(
        {
          origin: 'http://upstream.test',
          method: 'GET',
          path: '/slow',
          headers: ['host', 'upstream.test'],
          body: null,
        },
        {
          onResponseData: (ctrl) => ctrl.abort(new Error('client closed the connection')),
          onResponseError: (_ctrl, error) => resolve(error),
        },
      );
    });
    assert.equal(failure.message, 'client closed the connection');
    assert.equal(await upstreamClosed, http2.constants.NGHTTP2_CANCEL);
    assert.equal((await send(pool, '/after')).status, 200);
    assert.equal(sessions.length, 1);
  });

  it('a stream reset before an answer is a failure of the request, never an answer', async () => {
    const { port } = await h2cServer({}, (stream) => {
      stream.on('error', () => {});
      stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
    const error = await send(poolTo(port), '/1', 'x').then(
      () => assert.fail('answered'),
      (failure: Error) => failure,
    );
    assert.match(error.message, /NGHTTP2_INTERNAL_ERROR|closed before/);
  });
  it('fails a request with the headers timeout, then the body timeout, whether the two are one value or not', async () => {
    const { port } = await h2cServer({}, (stream, headers) => {
      stream.resume();
      // /silent never answers; /stalled answers its headers, then never ends its body.
      if (headers[':path'] === '/stalled') {
        stream.respond({ ':status': 200 });
        stream.write('part');
      }
    });
    for (const timeouts of [
      { headersMs: 150, bodyMs: 150 },
      { headersMs: 100, bodyMs: 250 },
      { headersMs: 250, bodyMs: 100 },
    ]) {
      const pool = poolTo(port, 60_000, timeouts);
      const silent = await send(pool, '/silent').then(
        () => assert.fail('answered'),
        (error: NodeJS.ErrnoException) => error,
      );
      assert.equal(silent.code, 'UND_ERR_HEADERS_TIMEOUT', JSON.stringify(timeouts));
      assert.match(silent.message, /headers timeout/);
      const stalled = await send(pool, '/stalled').then(
        () => assert.fail('answered'),
        (error: NodeJS.ErrnoException) => error,
      );
      assert.equal(stalled.code, 'UND_ERR_BODY_TIMEOUT', JSON.stringify(timeouts));
      assert.match(stalled.message, /body timeout/);
    }
  });
});
