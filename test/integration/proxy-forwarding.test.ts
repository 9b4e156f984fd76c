import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

describe('forwarding through the proxy process', () => {
  let a: Upstream;
  let b: Upstream;
  let special: Upstream;
  let fallback: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    a = await startUpstream({ name: 'a' });
    b = await startUpstream({ name: 'b' });
    fallback = await startUpstream({ name: 'fallback' });
    special = await startUpstream({
      name: 'special',
      handler: (req, res) => {
        switch (req.url) {
          case '/special/hop':
            res.writeHead(200, {
              connection: 'x-upstream-private, keep-alive',
              'x-upstream-private': 'secret',
              'keep-alive': 'timeout=5',
              'x-kept': 'yes',
            });
            res.end('ok');
            return;
          case '/special/no-content':
            res.writeHead(204);
            res.end();
            return;
          case '/special/not-modified':
            res.writeHead(304, { etag: '"v1"' });
            res.end();
            return;
          case '/special/chunked':
            res.writeHead(200, { 'content-type': 'text/plain' });
            res.write('one,');
            setTimeout(() => res.end('two'), 20);
            return;
          case '/special/cookies':
            res.writeHead(200, { 'set-cookie': ['a=1; Path=/', 'b=2; Path=/'] });
            res.end('cookies');
            return;
          default:
            res.writeHead(200, { 'content-length': '5' });
            res.end(req.method === 'HEAD' ? undefined : 'hello');
        }
      },
    });
    tollgate = await startTollgate({
      upstreams: {
        upstreams: {
          'app.example.com': {
            paths: {
              '/': { servers: [a.address, b.address] },
              '/special': { servers: [special.address] },
              '/only-a': { servers: [a.address] },
              '/private': {
                servers: [a.address],
                authorization: { type: 'basic', creds: 'alice:wonderland' },
              },
            },
          },
          'narrow.example.com': { paths: { '/v1': { servers: [a.address] } } },
          DEFAULT: { paths: { '/': { servers: [fallback.address] } } },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await Promise.all([a, b, special, fallback].map((u) => u?.close()));
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    request(tollgate.proxyUrl, { path, headers: { host: 'app.example.com', ...headers } });

  it('routes by Host and keeps Host for the upstream', async () => {
    const res = await get('/only-a/x?q=1');
    assert.equal(res.status, 200);
    const echoed = res.json<{ server: string; url: string; headers: Record<string, string> }>();
    assert.equal(echoed.server, 'a');
    assert.equal(echoed.url, '/only-a/x?q=1');
    assert.equal(echoed.headers.host, 'app.example.com');
  });

  it('normalises Host: case, port and trailing dot', async () => {
    for (const host of ['APP.Example.com', 'app.example.com:8080', 'app.example.com.']) {
      const res = await request(tollgate.proxyUrl, { path: '/only-a', headers: { host } });
      assert.equal(res.json<{ server: string }>().server, 'a', host);
    }
  });

  it('sends unknown hosts to DEFAULT', async () => {
    const res = await request(tollgate.proxyUrl, { path: '/x', headers: { host: 'other.example.org' } });
    assert.equal(res.json<{ server: string }>().server, 'fallback');
  });

  it('normalises hostile paths before routing and forwards the normalised path', async () => {
    for (const [raw, expected] of [
      ['/a/../only-a/x', '/only-a/x'],
      ['//only-a', '/only-a'],
      ['/%2e%2e/only-a/%2E/y', '/only-a/y'],
      ['/only-a/./%7Euser', '/only-a/~user'],
    ] as const) {
      const res = await get(raw);
      assert.equal(res.status, 200, raw);
      const echoed = res.json<{ server: string; url: string }>();
      assert.equal(echoed.url, expected, raw);
      assert.equal(echoed.server, 'a', raw);
    }
  });

  it('refuses encoded slashes and backslashes with 400 and a JSON body', async () => {
    for (const raw of ['/only-a%2Fx', '/only-a%5cx', '/a%2F..%2Fonly-a', '/narrow/..;/only-a']) {
      const res = await get(raw);
      assert.equal(res.status, 400, raw);
      assert.equal(res.json<{ error: string }>().error, 'bad_path');
    }
  });

  it('answers 400 for a missing or malformed Host', async () => {
    // HTTP/1.0 allows a request without Host; node:http would add one, so write it by hand.
    const socket = net.connect(tollgate.proxyPort, '127.0.0.1');
    socket.end('GET /only-a HTTP/1.0\r\n\r\n');
    let raw = '';
    for await (const chunk of socket) raw += chunk;
    assert.match(raw, /^HTTP\/1\.1 400 /);
    assert.match(raw, /"error":"bad_request"/);
    const malformed = await request(tollgate.proxyUrl, { path: '/', headers: { host: 'bad host@x' } });
    assert.equal(malformed.status, 400);
  });

  it('answers parser-level errors with the same JSON bodies: 431 for huge headers, 400 for garbage, 400 without Host', async () => {
    const huge = await request(tollgate.proxyUrl, {
      path: '/only-a',
      headers: { host: 'app.example.com', 'x-filler': 'a'.repeat(40_000) },
    });
    assert.equal(huge.status, 431);
    assert.equal(huge.json<{ error: string }>().error, 'headers_too_large');
    const raw = async (text: string) => {
      const socket = net.connect(tollgate.proxyPort, '127.0.0.1');
      socket.end(text);
      let answer = '';
      for await (const chunk of socket) answer += chunk;
      return answer;
    };
    assert.match(await raw('NOT HTTP AT ALL\r\n\r\n'), /^HTTP\/1\.1 400 [\s\S]*"error":"bad_request"/);
    assert.match(
      await raw('GET /only-a HTTP/1.1\r\nConnection: close\r\n\r\n'),
      /^HTTP\/1\.1 400 [\s\S]*"error":"bad_request"/,
    );
    assert.equal((await get('/only-a')).status, 200);
  });

  it('logs the size of responses Tollgate writes itself', async () => {
    const missing = await request(tollgate.proxyUrl, {
      path: '/v2/sized',
      headers: { host: 'narrow.example.com' },
    });
    assert.equal(missing.status, 404);
    await waitFor(() =>
      tollgate.logs().some((l) => l.msg === 'access' && l.status === 404 && l.bytes === missing.body.length),
    );
  });

  it('refuses a request with two Host headers, and keeps serving after many of them', async () => {
    for (let i = 0; i < 20; i++) {
      const socket = net.connect(tollgate.proxyPort, '127.0.0.1');
      socket.end(
        'GET /only-a HTTP/1.1\r\nHost: app.example.com\r\nHost: other.example.org\r\nConnection: close\r\n\r\n',
      );
      let raw = '';
      for await (const chunk of socket) raw += chunk;
      assert.match(raw, /^HTTP\/1\.1 400 /);
      assert.match(raw, /more than one Host header/);
    }
    assert.equal((await get('/only-a')).status, 200);
  });

  it('round-robins across the servers of a path', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) seen.push((await get('/rr')).json<{ server: string }>().server);
    assert.deepEqual(seen.filter((s) => s === 'a').length, 3, seen.join());
    assert.deepEqual(seen.filter((s) => s === 'b').length, 3, seen.join());
    for (let i = 1; i < seen.length; i++) assert.notEqual(seen[i], seen[i - 1]);
  });

  it('strips hop-by-hop request headers and sets X-Forwarded-*', async () => {
    const res = await get('/only-a', {
      connection: 'keep-alive, x-client-private',
      'x-client-private': 'secret',
      'keep-alive': 'timeout=5',
      // Only `TE: trailers` passes (gRPC needs it, docs/traffic.md#grpc); a transfer coding never does.
      te: 'gzip, trailers',
      'proxy-authorization': 'Basic Zm9vOmJhcg==',
      'x-forwarded-for': '6.6.6.6',
      'x-forwarded-proto': 'https',
      'x-tollgate-subject': 'spoofed',
      'x-end-to-end': 'kept',
    });
    const { headers } = res.json<{ headers: Record<string, string> }>();
    for (const name of [
      'x-client-private',
      'keep-alive',
      'te',
      'proxy-authorization',
      'x-tollgate-subject',
    ]) {
      assert.equal(headers[name], undefined, name);
    }
    assert.equal(headers['x-end-to-end'], 'kept');
    // The peer (127.0.0.1) is not a trusted proxy: its X-Forwarded-For is replaced, not believed.
    assert.equal(headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(headers['x-forwarded-proto'], 'http');
    assert.equal(headers['x-forwarded-host'], 'app.example.com');
  });

  it('strips hop-by-hop response headers and keeps end-to-end ones', async () => {
    const res = await get('/special/hop');
    assert.equal(res.status, 200);
    assert.equal(res.headers['x-upstream-private'], undefined);
    assert.equal(res.headers['keep-alive'], undefined);
    assert.equal(res.headers['x-kept'], 'yes');
    assert.equal(res.body, 'ok');
  });

  it('relays HEAD, 204, 304, chunked bodies and several Set-Cookie headers', async () => {
    const head = await request(tollgate.proxyUrl, {
      method: 'HEAD',
      path: '/special/head',
      headers: { host: 'app.example.com' },
    });
    assert.equal(head.status, 200);
    assert.equal(head.headers['content-length'], '5');
    assert.equal(head.body, '');
    assert.equal((await get('/special/no-content')).status, 204);
    const notModified = await get('/special/not-modified');
    assert.equal(notModified.status, 304);
    assert.equal(notModified.headers.etag, '"v1"');
    const chunked = await get('/special/chunked');
    assert.equal(chunked.body, 'one,two');
    assert.equal(chunked.headers['transfer-encoding'], 'chunked');
    const cookies = await get('/special/cookies');
    assert.deepEqual(cookies.headers['set-cookie'], ['a=1; Path=/', 'b=2; Path=/']);
  });

  it('streams request bodies (chunked and with length) to the upstream', async () => {
    const body = Buffer.alloc(3 * 1024 * 1024, 7);
    const res = await request(tollgate.proxyUrl, {
      method: 'POST',
      path: '/only-a/upload',
      headers: { host: 'app.example.com', 'content-length': String(body.length) },
      body,
    });
    assert.equal(res.json<{ bodyBytes: number }>().bodyBytes, body.length);

    const chunkedBytes = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          port: tollgate.proxyPort,
          host: '127.0.0.1',
          method: 'PUT',
          path: '/only-a/chunked',
          headers: { host: 'app.example.com' },
        },
        (r) => {
          let text = '';
          r.setEncoding('utf8').on('data', (d: string) => {
            text += d;
          });
          r.on('end', () => resolve((JSON.parse(text) as { bodyBytes: number }).bodyBytes));
        },
      );
      req.on('error', reject);
      req.write('x'.repeat(1000));
      setTimeout(() => req.end('y'.repeat(24)), 20);
    });
    assert.equal(chunkedBytes, 1024);
  });

  /** A POST with Expect: 100-continue that sends its body only when told to continue. */
  function postExpectingContinue(path: string, headers: Record<string, string> = {}) {
    return new Promise<{ sawContinue: boolean; status: number; body: string }>((resolve, reject) => {
      let sawContinue = false;
      const req = http.request({
        port: tollgate.proxyPort,
        host: '127.0.0.1',
        method: 'POST',
        path,
        headers: { host: 'app.example.com', expect: '100-continue', 'content-length': '4', ...headers },
      });
      req.on('continue', () => {
        sawContinue = true;
        req.end('body');
      });
      req.on('response', (r) => {
        let body = '';
        r.setEncoding('utf8').on('data', (d: string) => {
          body += d;
        });
        r.on('end', () => {
          resolve({ sawContinue, status: r.statusCode ?? 0, body });
          req.destroy();
        });
      });
      req.on('error', reject);
      req.flushHeaders();
    });
  }

  it('handles Expect: 100-continue', async () => {
    const result = await postExpectingContinue('/only-a/expect');
    assert.ok(result.sawContinue);
    assert.equal(result.status, 200);
    const echoed = JSON.parse(result.body) as { bodyBytes: number; headers: Record<string, string> };
    assert.equal(echoed.bodyBytes, 4);
    assert.equal(echoed.headers.expect, undefined);
  });

  it('says 100 Continue only once authentication admitted the request', async () => {
    const refused = await postExpectingContinue('/private/upload');
    assert.equal(refused.status, 401);
    assert.equal(refused.sawContinue, false, 'the client was never asked for its body');
    const admitted = await postExpectingContinue('/private/upload', {
      authorization: `Basic ${Buffer.from('alice:wonderland').toString('base64')}`,
    });
    assert.equal(admitted.sawContinue, true);
    assert.equal(admitted.status, 200);
  });

  it('answers 404 with a JSON body when no route matches, and counts requests by route', async () => {
    const missing = await request(tollgate.proxyUrl, {
      path: '/v2',
      headers: { host: 'narrow.example.com' },
    });
    assert.equal(missing.status, 404);
    assert.equal(missing.headers['content-type'], 'application/json');
    assert.equal(missing.json<{ error: string }>().error, 'not_found');
    const res = await request(tollgate.proxyUrl, { path: '/', headers: { host: 'app.example.com' } });
    assert.equal(res.status, 200);
    const metrics = await tollgate.metrics();
    assert.match(
      metrics,
      /tollgate_requests_total\{route="app\.example\.com\/",method="GET",status="200"\} \d+/,
    );
    assert.match(
      metrics,
      /tollgate_request_duration_seconds_bucket\{le="[^"]+",route="app\.example\.com\/only-a"\}/,
    );
    assert.match(metrics, /tollgate_requests_total\{route="\(none\)",method="GET",status="404"\} \d+/);
    assert.match(metrics, /process_resident_memory_bytes/);
  });

  it('writes one access line per request, without the raw query of unrouted requests', async () => {
    const routed = await request(tollgate.proxyUrl, {
      path: '/only-a/logged?x=1',
      headers: { host: 'App.Example.com:8080' },
    });
    assert.equal(routed.status, 200);
    await waitFor(() => tollgate.logs().some((l) => l.msg === 'access' && l.path === '/only-a/logged?x=1'));
    const line = tollgate.logs().find((l) => l.msg === 'access' && l.path === '/only-a/logged?x=1');
    assert.ok(line);
    assert.equal(line.method, 'GET');
    assert.equal(line.host, 'app.example.com');
    assert.equal(line.status, 200);
    assert.equal(line.route, 'app.example.com/only-a');
    assert.equal(line.upstream, a.address);
    assert.equal(line.client_ip, '127.0.0.1');
    assert.equal(typeof line.duration_ms, 'number');
    assert.ok((line.bytes as number) > 0);
  });

  it('logs the normalised host and path of 404 and 400 answers, without the token parameter', async () => {
    const notFound = await request(tollgate.proxyUrl, {
      path: '/a/../nowhere/./x?tollgatetoken=secret-404&keep=1',
      headers: { host: 'Narrow.Example.com:8080' },
    });
    assert.equal(notFound.status, 404);
    const badHost = await request(tollgate.proxyUrl, {
      path: '/%7Esomeone?tollgatetoken=secret-400',
      headers: { host: 'bad host!' },
    });
    assert.equal(badHost.status, 400);
    const access = (status: number) =>
      tollgate
        .logs()
        .find(
          (l) =>
            l.msg === 'access' &&
            l.status === status &&
            l.route === '(none)' &&
            typeof l.path === 'string' &&
            (l.path.startsWith('/nowhere') || l.path.includes('someone')),
        );
    await waitFor(() => access(404) !== undefined && access(400) !== undefined);
    assert.equal(access(404)?.path, '/nowhere/x?keep=1');
    assert.equal(access(400)?.path, '/~someone');
    // As on routed lines: lower case, no port; a Host that cannot be normalised is not logged raw.
    assert.equal(access(404)?.host, 'narrow.example.com');
    assert.equal(access(400)?.host, null);
    assert.equal(tollgate.stdout().includes('secret-40'), false, 'no token in any log line');
  });

  it('reports a port already in use in one clear line and exits 1, never claiming to serve', async () => {
    const busy = await startTollgate({
      upstreams: { upstreams: { DEFAULT: { paths: { '/': { servers: [a.address] } } } } },
      main: { proxy_address_http: `127.0.0.1:${tollgate.proxyPort}` },
      waitReady: false,
    });
    const code = await busy.exited;
    assert.equal(code, 1);
    const failure = new RegExp(
      `cannot listen on 127\\.0\\.0\\.1:${tollgate.proxyPort} \\(proxy_address_http\\): address already in use`,
    );
    assert.match(busy.stderr(), failure);
    // The log says the start failed, and why; no drain of a proxy that never served.
    const failed = busy.logs().filter((line) => line.event === 'start_failed');
    assert.equal(failed.length, 1, busy.stdout());
    assert.equal(failed[0]?.level, 'error');
    assert.match(String(failed[0]?.error), failure);
    for (const claim of ['still serving', 'draining', 'shutting down', 'shutdown complete']) {
      assert.ok(!busy.stdout().includes(claim), `'${claim}' logged by a start that failed: ${busy.stdout()}`);
    }
    await busy.stop();
  });
});
