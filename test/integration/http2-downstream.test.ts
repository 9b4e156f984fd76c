import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { hasOpenssl, selfSigned } from '../helpers/certs.ts';
import { connectHttp2, h2Request } from '../helpers/h2-client.ts';
import {
  connectH2,
  ERROR,
  FLAG,
  FRAME,
  frame,
  headerBlock,
  type RawH2,
  type ReceivedFrame,
  requestHeaders,
  rstStream,
} from '../helpers/h2-frames.ts';
import { connectRaw } from '../helpers/raw-connection.ts';
import { testScope } from '../helpers/scope.ts';
import { type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

const run = promisify(execFile);
const API_KEY = 'h2-test-key-51c0';

/** The first frame that answers stream `id`: its response HEADERS or its RST_STREAM. */
const answerOf = (connection: RawH2, id: number) =>
  connection.waitFor((f) => f.streamId === id && (f.type === FRAME.HEADERS || f.type === FRAME.RST_STREAM));
/** A response HEADERS block starting with a fully indexed `:status` (RFC 7541 static table 8–14). */
const STATUS_INDEX: Record<number, number> = { 136: 200, 140: 400, 141: 404 };
const statusOf = (f: ReceivedFrame) => STATUS_INDEX[f.payload[0] as number] ?? -1;

describe('HTTP/2 on the proxy listeners (TLS with ALPN, h2c beside HTTP/1.1)', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;
  let tlsOrigin: string;
  let plainOrigin: string;
  const sessions: http2.ClientHttp2Session[] = [];
  const session = async (origin: string) => {
    const s = await connectHttp2(origin);
    sessions.push(s);
    return s;
  };
  /** curl's `<http version> <status>` for one GET of app.test `path`. */
  const curl = async (args: string[], url: string) =>
    (await run('curl', ['-s', ...args, '-o', '/dev/null', '-w', '%{http_version} %{http_code}', url])).stdout;
  const curlTls = (version: string, path: string) =>
    curl(
      ['-k', version, '--resolve', `app.test:${tollgate.tlsPort}:127.0.0.1`],
      `https://app.test:${tollgate.tlsPort}${path}`,
    );
  const curlPlain = (version: string, path: string) =>
    curl([version, '-H', 'Host: app.test'], `${plainOrigin}${path}`);
  const requestsTo = (path: string) => upstream.requests.filter((r) => r.url.startsWith(path)).length;

  before(async () => {
    const certificate = selfSigned('app.test');
    const certDir = mkdtempSync(join(tmpdir(), 'tollgate-h2-'));
    writeFileSync(join(certDir, 'tls.crt'), certificate.cert);
    writeFileSync(join(certDir, 'tls.key'), certificate.key);
    scope.keep({ close: async () => rmSync(certDir, { recursive: true, force: true }) });
    upstream = await scope.upstream({ name: 'echo' });
    const dead = await scope.deadServer();
    tollgate = await scope.tollgate({
      main: {
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: join(certDir, 'tls.crt'),
        tls_key_file: join(certDir, 'tls.key'),
        http2_cleartext: true,
        http2: { max_resets_per_second: 10, max_header_list_bytes: 8192, max_concurrent_streams: 4 },
      },
      upstreams: {
        upstreams: {
          'app.test': {
            paths: {
              '/': { servers: [upstream.address] },
              '/secret': { servers: [upstream.address], authorization: { type: 'apikey', creds: API_KEY } },
              '/down': { servers: [dead] },
            },
          },
        },
      },
    });
    tlsOrigin = `https://127.0.0.1:${tollgate.tlsPort}`;
    plainOrigin = tollgate.proxyUrl;
  });
  after(() => {
    for (const s of sessions) s.destroy();
  });

  it('the TLS listener negotiates h2: routed by :authority, forwarded with Host and without pseudo-headers', async () => {
    const s = await session(tlsOrigin);
    assert.equal(s.alpnProtocol, 'h2');
    const response = await h2Request(s, { ':path': '/tls-echo?x=1', ':authority': 'app.test' });
    assert.equal(response.status, 200);
    const seen = response.json<{ url: string; headers: Record<string, string> }>();
    assert.equal(seen.url, '/tls-echo?x=1');
    assert.equal(seen.headers.host, 'app.test');
    assert.equal(seen.headers['x-forwarded-proto'], 'https');
    assert.deepEqual(
      Object.keys(seen.headers).filter((name) => name.startsWith(':')),
      [],
    );
    await waitFor(() => tollgate.logs().some((l) => l.msg === 'access' && l.path === '/tls-echo?x=1'));
    const line = tollgate.logs().find((l) => l.msg === 'access' && l.path === '/tls-echo?x=1');
    assert.equal(line?.protocol, '2');
  });

  it('the same TLS port still serves HTTP/1.1 to clients that offer only http/1.1', async () => {
    assert.equal(await curlTls('--http1.1', '/tls-h1'), '1.1 200');
  });

  it('h2c with prior knowledge and HTTP/1.1 share the plain port; the client address is the TCP peer', async () => {
    const s = await session(plainOrigin);
    const response = await h2Request(s, { ':path': '/h2c-echo', ':authority': 'app.test' });
    assert.equal(response.status, 200);
    const seen = response.json<{ headers: Record<string, string> }>();
    assert.equal(seen.headers.host, 'app.test');
    assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(seen.headers['x-forwarded-proto'], 'http');
    assert.equal(await curlPlain('--http1.1', '/h1-echo'), '1.1 200');
    await waitFor(() => tollgate.logs().some((l) => l.msg === 'access' && l.path === '/h2c-echo'));
    const line = tollgate.logs().find((l) => l.msg === 'access' && l.path === '/h2c-echo');
    assert.equal(line?.client_ip, '127.0.0.1');
    assert.equal(line?.protocol, '2');
  });

  it('curl --http2 (TLS) and --http2-prior-knowledge (h2c) speak HTTP/2 through the proxy', async () => {
    assert.equal(await curlTls('--http2', '/curl-tls'), '2 200');
    assert.equal(await curlPlain('--http2-prior-knowledge', '/curl-h2c'), '2 200');
  });

  it('nghttp and h2load (several streams per connection) get their answers over h2c', async () => {
    const nghttp = await run('nghttp', ['-n', '-s', '-H', ':authority: app.test', `${plainOrigin}/nghttp`]);
    assert.match(nghttp.stdout, /200/);
    const h2load = await run('h2load', [
      '-n',
      '40',
      '-c',
      '2',
      '-m',
      '4',
      '-H',
      ':authority: app.test',
      `${plainOrigin}/h2load`,
    ]);
    assert.match(h2load.stdout, /40 succeeded, 0 failed, 0 errored/);
    assert.match(h2load.stdout, /status codes: 40 2xx/);
  });

  it('a request body without content-length (DATA frames only) reaches the upstream whole', async () => {
    const s = await session(tlsOrigin);
    const response = await h2Request(s, { ':method': 'POST', ':path': '/upload', ':authority': 'app.test' }, [
      'a'.repeat(1000),
      'b'.repeat(2000),
      'c'.repeat(3000),
    ]);
    assert.equal(response.status, 200);
    assert.equal(response.json<{ bodyBytes: number }>().bodyBytes, 6000);
  });

  it('auth applies on h2 as on HTTP/1.1', async () => {
    const s = await session(tlsOrigin);
    const refused = await h2Request(s, { ':path': '/secret/x', ':authority': 'app.test' });
    assert.equal(refused.status, 401);
    assert.equal(refused.json<{ error: string }>().error, 'missing_credentials');
    const admitted = await h2Request(s, {
      ':path': '/secret/x',
      ':authority': 'app.test',
      'x-api-key': API_KEY,
    });
    assert.equal(admitted.status, 200);
  });

  it('a refusal before the body arrived ends the stream with RST_STREAM NO_ERROR (no Connection: close on h2)', async () => {
    const connection = await connectH2(tollgate.proxyPort);
    connection.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS,
        1,
        headerBlock([
          ...requestHeaders('app.test', '/secret/upload', 'POST'),
          ['content-length', '100000'],
          ['expect', '100-continue'],
        ]),
      ),
      frame(FRAME.DATA, 0, 1, Buffer.alloc(1000, 0x61)),
    );
    const answer = await answerOf(connection, 1);
    assert.equal(answer.type, FRAME.HEADERS);
    const body = await connection.waitFor((f) => f.streamId === 1 && f.type === FRAME.DATA);
    assert.equal(JSON.parse(body.payload.toString('utf8')).error, 'missing_credentials');
    const reset = await connection.waitFor((f) => f.streamId === 1 && f.type === FRAME.RST_STREAM);
    assert.equal(connection.errorCode(reset), ERROR.NO_ERROR);
    // The connection itself stays usable.
    connection.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        3,
        headerBlock(requestHeaders('app.test', '/after-401')),
      ),
    );
    assert.equal(statusOf(await answerOf(connection, 3)), 200);
    connection.socket.destroy();
    // node:http2 warns when told to send a Connection header, which HTTP/2 forbids.
    assert.doesNotMatch(tollgate.stderr(), /connection header/i);
  });

  it(':authority and Host naming different hosts is a 400, and nothing reaches the upstream', async () => {
    const before = requestsTo('/mismatch');
    const connection = await connectH2(tollgate.proxyPort);
    connection.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        1,
        headerBlock([...requestHeaders('app.test', '/mismatch'), ['host', 'other.test']]),
      ),
    );
    const answer = await answerOf(connection, 1);
    assert.equal(answer.type, FRAME.HEADERS);
    assert.equal(statusOf(answer), 400);
    // Agreeing ones are fine.
    connection.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        3,
        headerBlock([...requestHeaders('app.test', '/mismatch-ok'), ['host', 'APP.test']]),
      ),
    );
    assert.equal(statusOf(await answerOf(connection, 3)), 200);
    connection.socket.destroy();
    assert.equal(requestsTo('/mismatch'), before + 1, 'only the agreeing request was forwarded');
  });

  it('connection-specific headers and TE other than trailers are refused (RST_STREAM PROTOCOL_ERROR); te: trailers passes', async () => {
    const refused: Array<[string, string]> = [
      ['connection', 'keep-alive'],
      ['keep-alive', 'timeout=5'],
      ['proxy-connection', 'keep-alive'],
      ['transfer-encoding', 'chunked'],
      ['upgrade', 'h2c'],
      ['te', 'gzip'],
    ];
    const connection = await connectH2(tollgate.proxyPort);
    let id = 1;
    for (const header of refused) {
      connection.send(
        frame(
          FRAME.HEADERS,
          FLAG.END_HEADERS | FLAG.END_STREAM,
          id,
          headerBlock([...requestHeaders('app.test', `/conn-specific-${header[0]}`), header]),
        ),
      );
      const answer = await answerOf(connection, id);
      assert.equal(answer.type, FRAME.RST_STREAM, `${header[0]} is refused`);
      assert.equal(connection.errorCode(answer), ERROR.PROTOCOL_ERROR);
      id += 2;
    }
    connection.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        id,
        headerBlock([...requestHeaders('app.test', '/te-trailers'), ['te', 'trailers']]),
      ),
    );
    assert.equal(statusOf(await answerOf(connection, id)), 200);
    connection.socket.destroy();
    assert.equal(requestsTo('/conn-specific'), 0);
  });

  it('a content-length the DATA frames contradict never reaches the upstream as a complete request', async () => {
    for (const [declared, sent] of [
      ['10', 'abc'],
      ['2', 'abcdef'],
    ] as const) {
      const connection = await connectH2(tollgate.proxyPort);
      connection.send(
        frame(
          FRAME.HEADERS,
          FLAG.END_HEADERS,
          1,
          headerBlock([
            ...requestHeaders('app.test', `/smuggle-${declared}`, 'POST'),
            ['content-length', declared],
          ]),
        ),
        frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from(sent)),
      );
      // A stream error (RST_STREAM) or a connection error (GOAWAY): either way no answer.
      const outcome = await connection.waitFor(
        (f) => (f.type === FRAME.RST_STREAM && f.streamId === 1) || f.type === FRAME.GOAWAY,
      );
      assert.equal(connection.errorCode(outcome) !== ERROR.NO_ERROR, true);
      connection.socket.destroy();
    }
    assert.equal(requestsTo('/smuggle'), 0, 'the upstream recorded no complete request');
  });

  it('Upgrade: h2c on HTTP/1.1 is not honoured nor forwarded', async () => {
    const connection = await connectRaw(tollgate.proxyPort);
    connection.socket.write(
      'GET /upgrade-h2c HTTP/1.1\r\nHost: app.test\r\nConnection: Upgrade, HTTP2-Settings\r\n' +
        'Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
    );
    const received = await connection.responses('"bodyBytes"');
    assert.match(received, /^HTTP\/1\.1 200 /);
    connection.socket.destroy();
    const seen = upstream.requests.find((r) => r.url === '/upgrade-h2c');
    assert.ok(seen);
    assert.equal(seen.headers.upgrade, undefined);
    assert.equal(seen.headers['http2-settings'], undefined);
  });

  it('a stream beyond max_concurrent_streams is refused and never forwarded', async () => {
    const connection = await connectH2(tollgate.proxyPort);
    // The limit is a SETTINGS value: it binds once the client acknowledged it (our ACK goes first).
    await connection.waitFor((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0);
    // Five uploads whose bodies have not ended: four streams stay open, the fifth is one too many.
    for (const id of [1, 3, 5, 7, 9]) {
      connection.send(
        frame(
          FRAME.HEADERS,
          FLAG.END_HEADERS,
          id,
          headerBlock(requestHeaders('app.test', `/concurrent-${id}`, 'POST')),
        ),
      );
    }
    // nghttp2 answers with a connection error (GOAWAY PROTOCOL_ERROR, last stream 7), which RFC 9113
    // §5.1.2 allows as well as a stream error; either way stream 9 is never processed.
    const refusal = await connection.waitFor(
      (f) => (f.type === FRAME.RST_STREAM && f.streamId === 9) || f.type === FRAME.GOAWAY,
    );
    if (refusal.type === FRAME.GOAWAY) assert.ok((refusal.payload.readUInt32BE(0) & 0x7fffffff) < 9);
    assert.notEqual(connection.errorCode(refusal), ERROR.NO_ERROR);
    connection.socket.destroy();
    await connection.closed;
    assert.equal(requestsTo('/concurrent-9'), 0);
  });

  it('rapid reset: more than max_resets_per_second cancelled streams get GOAWAY ENHANCE_YOUR_CALM', async () => {
    const connection = await connectH2(tollgate.proxyPort);
    let id = 1;
    for (let i = 0; i < 50; i++, id += 2) {
      connection.send(
        frame(
          FRAME.HEADERS,
          FLAG.END_HEADERS | FLAG.END_STREAM,
          id,
          headerBlock(requestHeaders('app.test', '/rr')),
        ),
        rstStream(id, ERROR.CANCEL),
      );
    }
    const goaway = await connection.waitFor((f) => f.type === FRAME.GOAWAY);
    assert.equal(connection.errorCode(goaway), ERROR.ENHANCE_YOUR_CALM);
    await connection.closed;
    // Other clients are served as before.
    const s = await session(plainOrigin);
    assert.equal((await h2Request(s, { ':path': '/after-rr', ':authority': 'app.test' })).status, 200);
  });

  it('CONTINUATION flood: the connection is closed long before the flood ends', async () => {
    const connection = await connectH2(tollgate.proxyPort);
    connection.send(frame(FRAME.HEADERS, 0, 1, headerBlock(requestHeaders('app.test', '/flood'))));
    const filler = frame(FRAME.CONTINUATION, 0, 1, headerBlock([['x-filler', 'f'.repeat(100)]]));
    let sent = 0;
    while (sent < 10_000 && !connection.socket.destroyed && connection.socket.writable) {
      connection.send(filler);
      sent++;
      if (sent % 50 === 0) await new Promise((r) => setImmediate(r));
    }
    await connection.closed;
    assert.ok(sent < 10_000, `closed after ${sent} CONTINUATION frames`);
    assert.equal(requestsTo('/flood'), 0);
  });

  it('a header list above max_header_list_bytes is refused (431) and not forwarded', async () => {
    const connection = await connectH2(tollgate.proxyPort);
    // The limit is a SETTINGS value: it binds once the client acknowledged it (our ACK goes first).
    await connection.waitFor((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0);
    connection.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_STREAM,
        1,
        headerBlock([...requestHeaders('app.test', '/big'), ['x-a', 'a'.repeat(6000)]]),
      ),
      frame(FRAME.CONTINUATION, FLAG.END_HEADERS, 1, headerBlock([['x-b', 'b'.repeat(6000)]])),
    );
    const answer = await connection
      .waitFor(
        (f) =>
          (f.streamId === 1 && (f.type === FRAME.HEADERS || f.type === FRAME.RST_STREAM)) ||
          f.type === FRAME.GOAWAY,
      )
      .catch(() => null);
    assert.ok(answer, 'the stream is answered');
    if (answer.type === FRAME.HEADERS) assert.match(answer.payload.toString('latin1'), /431/);
    connection.socket.destroy();
    assert.equal(requestsTo('/big'), 0);
  });

  describe("gRPC requests get gRPC answers from Tollgate's own refusals", () => {
    const grpc = { 'content-type': 'application/grpc', te: 'trailers', ':method': 'POST' };
    for (const [name, authority, path, status, grpcStatus] of [
      ['401 → 16 UNAUTHENTICATED', 'app.test', '/secret/svc.Method', 401, 16],
      ['404 → 12 UNIMPLEMENTED', 'unknown.test', '/svc.Method', 404, 12],
      ['502 → 14 UNAVAILABLE', 'app.test', '/down/svc.Method', 502, 14],
    ] as const) {
      it(name, async () => {
        const s = await session(tlsOrigin);
        const response = await h2Request(s, { ...grpc, ':authority': authority, ':path': path });
        assert.equal(response.status, 200);
        assert.equal(response.headers['content-type'], 'application/grpc');
        assert.equal(response.headers['grpc-status'], String(grpcStatus));
        assert.equal(typeof response.headers['grpc-message'], 'string');
        assert.equal(response.endedWithHeaders, true, 'trailers-only: one HEADERS frame ends the stream');
        assert.equal(response.body.length, 0);
        // The log and the metrics keep the HTTP status Tollgate decided.
        await waitFor(() =>
          tollgate
            .logs()
            .some((l) => l.msg === 'access' && l.grpc_status === grpcStatus && l.status === status),
        );
      });
    }
    it('the metrics count the refusal under its HTTP status', async () => {
      const metrics = await tollgate.metrics();
      assert.match(metrics, /tollgate_requests_total\{[^}]*status="401"[^}]*\} [1-9]/);
    });
  });
});

describe('http2_cleartext off (the default): the plain port speaks only HTTP/1.1', () => {
  const scope = testScope();
  let tollgate: Tollgate;
  let upstream: Upstream;

  before(async () => {
    upstream = await scope.upstream();
    tollgate = await scope.tollgate({
      upstreams: { upstreams: { 'app.test': { paths: { '/': { servers: [upstream.address] } } } } },
    });
  });

  it('the HTTP/2 preface is answered as a malformed HTTP/1.1 request, never with SETTINGS', async () => {
    const connection = await connectRaw(tollgate.proxyPort);
    connection.socket.write(
      Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(FRAME.SETTINGS, 0, 0)]),
    );
    await connection.closed;
    assert.match(connection.received(), /^HTTP\/1\.1 400 /);
    assert.equal(upstream.requests.length, 0);
  });
});

describe('HTTP/2: to_https, rate limits and the client timeouts', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let tollgate: Tollgate;
  let upstream: Upstream;
  const sessions: http2.ClientHttp2Session[] = [];
  after(() => {
    for (const s of sessions) s.destroy();
  });

  before(async () => {
    const certificate = selfSigned('app.test');
    const certDir = mkdtempSync(join(tmpdir(), 'tollgate-h2-limits-'));
    writeFileSync(join(certDir, 'tls.crt'), certificate.cert);
    writeFileSync(join(certDir, 'tls.key'), certificate.key);
    scope.keep({ close: async () => rmSync(certDir, { recursive: true, force: true }) });
    upstream = await scope.upstream({
      handler: (req, res) => {
        // Slower than every client timeout below: waiting on the upstream is never the client's silence.
        const delay = req.url === '/slow' ? 1_500 : 0;
        setTimeout(() => res.end(`done ${req.url}`), delay);
      },
    });
    tollgate = await scope.tollgate({
      main: {
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: join(certDir, 'tls.crt'),
        tls_key_file: join(certDir, 'tls.key'),
        http2_cleartext: true,
        client_first_byte_timeout_seconds: 0.5,
        keepalive_timeout_seconds: 0.5,
        client_body_timeout_seconds: 0.5,
      },
      upstreams: {
        upstreams: {
          'app.test': {
            paths: {
              '/': { servers: [upstream.address] },
              '/secure': { servers: [upstream.address], to_https: true },
              '/limited': { servers: [upstream.address], rate_limit: 2 },
            },
          },
        },
      },
    });
  });

  it('to_https redirects an h2c request, but not one on the TLS listener', async () => {
    const plain = await connectHttp2(tollgate.proxyUrl);
    sessions.push(plain);
    const redirected = await h2Request(plain, { ':path': '/secure/page?a=1', ':authority': 'app.test:8080' });
    assert.equal(redirected.status, 301);
    assert.equal(redirected.headers.location, 'https://app.test/secure/page?a=1');
    const secure = await connectHttp2(`https://127.0.0.1:${tollgate.tlsPort}`);
    sessions.push(secure);
    assert.equal(
      (await h2Request(secure, { ':path': '/secure/page', ':authority': 'app.test' })).status,
      200,
    );
  });

  it('rate limits count HTTP/2 requests (streams of one connection included)', async () => {
    const s = await connectHttp2(tollgate.proxyUrl);
    sessions.push(s);
    const statuses = await Promise.all(
      [1, 2, 3, 4].map(
        async (n) => (await h2Request(s, { ':path': `/limited/${n}`, ':authority': 'app.test' })).status,
      ),
    );
    assert.deepEqual(
      statuses.toSorted((a, b) => a - b),
      [200, 200, 429, 429],
    );
  });

  it('a connection that opens no stream is closed after client_first_byte_timeout_seconds', async () => {
    const connection = await connectH2(tollgate.proxyPort);
    await connection.closed;
    assert.equal(
      connection.frames.some((f) => f.type === FRAME.HEADERS),
      false,
    );
  });

  it('an idle connection is sent GOAWAY and closed after keepalive_timeout_seconds', async () => {
    const connection = await connectH2(tollgate.proxyPort);
    connection.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        1,
        headerBlock(requestHeaders('app.test', '/idle')),
      ),
    );
    assert.equal(statusOf(await answerOf(connection, 1)), 200);
    const goaway = await connection.waitFor((f) => f.type === FRAME.GOAWAY);
    assert.equal(connection.errorCode(goaway), ERROR.NO_ERROR);
    await connection.closed;
  });

  it('a request body that stalls has its stream cancelled; the connection and its other streams live on', async () => {
    const connection = await connectH2(tollgate.proxyPort);
    connection.send(
      frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, headerBlock(requestHeaders('app.test', '/stalled', 'POST'))),
      frame(FRAME.DATA, 0, 1, Buffer.from('first part, then nothing')),
    );
    const reset = await connection.waitFor((f) => f.streamId === 1 && f.type === FRAME.RST_STREAM);
    assert.equal(connection.errorCode(reset), ERROR.CANCEL);
    connection.send(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        3,
        headerBlock(requestHeaders('app.test', '/after')),
      ),
    );
    assert.equal(statusOf(await answerOf(connection, 3)), 200);
    connection.socket.destroy();
    assert.equal(
      upstream.requests.some((r) => r.url === '/stalled'),
      false,
    );
  });

  it('a stream waiting on a slow upstream outlives every client timeout, on TLS and h2c', async () => {
    for (const origin of [`https://127.0.0.1:${tollgate.tlsPort}`, tollgate.proxyUrl]) {
      const s = await connectHttp2(origin);
      sessions.push(s);
      const response = await h2Request(s, { ':path': '/slow', ':authority': 'app.test' });
      assert.equal(response.status, 200, origin);
      assert.equal(response.body.toString(), 'done /slow');
    }
  });
});
