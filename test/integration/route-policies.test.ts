import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { reloadCount } from '../helpers/reload-metrics.ts';
import {
  MAIN_JS,
  request,
  type SimpleResponse,
  startTollgate,
  type Tollgate,
  waitFor,
} from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Request policies of upstreams.yaml paths (docs/policies.md) through the built process: source
 * ranges, CORS, max_body_bytes, rewrite, in the pipeline's order and before authentication where
 * the docs say so.
 */

const HOST = 'policies.test';
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('route policies from upstreams.yaml', () => {
  let app: Upstream;
  /** Its own upstream for the body-limit routes, to count what reaches it. */
  let sink: Upstream;
  /** Request heads the sink saw (its 'request' event fires before any body byte). */
  let sinkHeads = 0;
  /** Answers at once, before reading the body, and keeps the response open. */
  let early: http.Server;
  let tollgate: Tollgate;

  const get = (path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<SimpleResponse> =>
    request(`${tollgate.proxyUrl}${path}`, { method, headers: { host: HOST, ...headers } });
  const upstreamUrl = (res: SimpleResponse) => {
    assert.equal(res.status, 200, res.body);
    return String(res.json().url);
  };

  before(async () => {
    app = await startUpstream({ name: 'app' });
    sink = await startUpstream({ name: 'sink' });
    sink.server.on('request', () => {
      sinkHeads++;
    });
    early = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('started\n');
    });
    early.listen(0, '127.0.0.1');
    await once(early, 'listening');
    const earlyAddress = `127.0.0.1:${(early.address() as net.AddressInfo).port}`;
    const servers = [app.address];
    tollgate = await startTollgate({
      main: { access_log: false, trusted_proxies: ['127.0.0.2/32'], http2_cleartext: true },
      upstreams: {
        max_body_bytes: '1k',
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers },
              '/internal': { servers, source_ranges: ['10.0.0.0/8', '192.0.2.7'] },
              '/local': { servers, source_ranges: ['127.0.0.0/8'], deny_ranges: ['127.0.0.9/32'] },
              '/denied': {
                servers,
                deny_ranges: ['127.0.0.1'],
                authorization: { type: 'basic', creds: 'alice:pw' },
              },
              '/api': { servers, rewrite: { prefix: '/v2' } },
              '/strip': { servers, rewrite: { prefix: '/' } },
              '/old': { servers, rewrite: { regex: '^/old/([^/]+)/(.*)$', replacement: '/new/$2/$1' } },
              '/enc': { servers, rewrite: { regex: '^/enc/(.*)', replacement: '/x%2F$1' } },
              '/redos': { servers, rewrite: { regex: '^/redos/(a+)+$', replacement: '/matched' } },
              '/cors': {
                servers,
                cors: {
                  allow_origins: ['https://app.example.com', 'https://*.tenant.example.com'],
                  allow_methods: ['GET', 'POST'],
                  allow_headers: ['Authorization', 'Content-Type'],
                  expose_headers: ['X-Request-Id'],
                  allow_credentials: true,
                  max_age_seconds: 600,
                },
              },
              '/cors-any': { servers, cors: { allow_origins: ['*'] } },
              '/cors-auth': {
                servers,
                authorization: { type: 'basic', creds: 'alice:pw' },
                cors: { allow_origins: ['https://app.example.com'], allow_credentials: true },
              },
              '/upload': { servers: [sink.address], max_body_bytes: 100 },
              '/upload-global': { servers: [sink.address] },
              '/upload-early': { servers: [earlyAddress], max_body_bytes: 100 },
              '/upload-unlimited': { servers: [sink.address], max_body_bytes: 0 },
              '/upload-auth': {
                servers: [sink.address],
                max_body_bytes: 100,
                authorization: { type: 'basic', creds: 'alice:pw' },
              },
            },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await app?.close();
    await sink?.close();
    early?.closeAllConnections();
    early?.close();
  });

  describe('source_ranges and deny_ranges', () => {
    it('refuses a client outside source_ranges with 403 source_denied', async () => {
      const res = await get('/internal/x');
      assert.equal(res.status, 403);
      assert.equal(res.json().error, 'source_denied');
      assert.equal(upstreamUrl(await get('/local/x')), '/local/x');
    });

    it('checks the client address behind a trusted proxy, IPv4-mapped or not', async () => {
      const via = (forwarded: string) =>
        request(`${tollgate.proxyUrl}/internal/x`, {
          headers: { host: HOST, 'x-forwarded-for': forwarded },
          localAddress: '127.0.0.2',
        });
      assert.equal((await via('10.1.2.3')).status, 200);
      assert.equal((await via('::ffff:10.1.2.3')).status, 200);
      assert.equal((await via('192.0.2.7')).status, 200);
      assert.equal((await via('192.0.2.8')).status, 403);
      // Not trusted: its X-Forwarded-For is not believed.
      const untrusted = await request(`${tollgate.proxyUrl}/internal/x`, {
        headers: { host: HOST, 'x-forwarded-for': '10.1.2.3' },
      });
      assert.equal(untrusted.status, 403);
    });

    it('deny_ranges wins, and is checked before authentication', async () => {
      const res = await get('/denied');
      assert.equal(res.status, 403, 'not 401: the client is refused before credentials are asked for');
      assert.equal(res.json().error, 'source_denied');
      assert.equal((await get('/denied', { authorization: basic('alice', 'pw') })).status, 403);
    });
  });

  describe('rewrite', () => {
    it('replaces the matched prefix and keeps the query', async () => {
      assert.equal(upstreamUrl(await get('/api/users?page=2')), '/v2/users?page=2');
      assert.equal(upstreamUrl(await get('/api')), '/v2');
      assert.equal(upstreamUrl(await get('/strip/a/b')), '/a/b');
      assert.equal(upstreamUrl(await get('/strip')), '/');
    });

    it('rewrites with a regex and its captures, on the normalised path', async () => {
      assert.equal(upstreamUrl(await get('/old/one/two/three')), '/new/two/three/one');
      // Normalised first (dot-segments, %7E decoded): what is matched is what was authorised.
      assert.equal(upstreamUrl(await get('/old/x/./y/%7Ez')), '/new/y/~z/x');
      // No match: the path goes up as it is.
      assert.equal(upstreamUrl(await get('/old/single')), '/old/single');
    });

    it('refuses with 400 a rewritten path that is not a valid path', async () => {
      const res = await get('/enc/a');
      assert.equal(res.status, 400);
      assert.equal(res.json().error, 'bad_path');
    });

    it('a pattern that backtracks exponentially elsewhere runs in linear time', {
      timeout: 20_000,
    }, async () => {
      // `(a+)+$` against a long run of a's ending in b takes a backtracking engine 2^n steps.
      const res = await get(`/redos/${'a'.repeat(4_000)}b`);
      assert.equal(upstreamUrl(res), `/redos/${'a'.repeat(4_000)}b`);
      assert.equal(upstreamUrl(await get('/redos/aaaa')), '/matched');
    });
  });

  describe('cors', () => {
    const preflight = (path: string, origin: string) =>
      get(path, { origin, 'access-control-request-method': 'POST' }, 'OPTIONS');

    it('answers a preflight itself with 204, before authentication', async () => {
      const before = app.requests.length;
      const res = await preflight('/cors-auth/data', 'https://app.example.com');
      assert.equal(res.status, 204);
      assert.equal(res.headers['access-control-allow-origin'], 'https://app.example.com');
      assert.equal(res.headers['access-control-allow-credentials'], 'true');
      assert.match(String(res.headers.vary), /Origin/);
      assert.equal(res.headers['content-length'], undefined);
      const full = await preflight('/cors/x', 'https://app.example.com');
      assert.equal(full.headers['access-control-allow-methods'], 'GET, POST');
      assert.equal(full.headers['access-control-allow-headers'], 'Authorization, Content-Type');
      assert.equal(full.headers['access-control-max-age'], '600');
      assert.equal(app.requests.length, before, 'no preflight reached the upstream');
    });

    it('echoes an allowed origin (never *) with Vary: Origin added to the upstream Vary', async () => {
      const res = await get('/cors/x', { origin: 'https://app.example.com' });
      assert.equal(res.status, 200);
      assert.equal(res.headers['access-control-allow-origin'], 'https://app.example.com');
      assert.equal(res.headers['access-control-allow-credentials'], 'true');
      assert.equal(res.headers['access-control-expose-headers'], 'X-Request-Id');
      assert.match(String(res.headers.vary), /Origin/);
      const wildcard = await get('/cors/x', { origin: 'https://a.b.tenant.example.com' });
      assert.equal(wildcard.headers['access-control-allow-origin'], 'https://a.b.tenant.example.com');
    });

    it('gives a disallowed origin no CORS header at all', async () => {
      for (const origin of [
        'https://evil.test',
        'https://tenant.example.com',
        'https://app.example.com.evil.test',
        'http://a.tenant.example.com',
        'https://x.tenant.example.com.evil.test',
      ]) {
        const res = await get('/cors/x', { origin });
        assert.equal(res.status, 200);
        assert.equal(res.headers['access-control-allow-origin'], undefined, origin);
        assert.equal(res.headers['access-control-allow-credentials'], undefined, origin);
        assert.match(String(res.headers.vary), /Origin/, 'the answer still varies by Origin');
        const pre = await preflight('/cors/x', origin);
        assert.equal(pre.status, 204);
        assert.equal(pre.headers['access-control-allow-origin'], undefined, origin);
        assert.equal(pre.headers['access-control-allow-methods'], undefined, origin);
      }
    });

    it('answers * on a route allowing every origin without credentials', async () => {
      const res = await get('/cors-any/x', { origin: 'https://anywhere.test' });
      assert.equal(res.headers['access-control-allow-origin'], '*');
      assert.equal(res.headers['access-control-allow-credentials'], undefined);
    });

    it("Tollgate's own refusals carry the CORS headers, so the page can read them", async () => {
      const res = await get('/cors-auth/data', { origin: 'https://app.example.com' });
      assert.equal(res.status, 401);
      assert.equal(res.headers['access-control-allow-origin'], 'https://app.example.com');
      const ok = await get('/cors-auth/data', {
        origin: 'https://app.example.com',
        authorization: basic('alice', 'pw'),
      });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers['access-control-allow-origin'], 'https://app.example.com');
    });
  });

  describe('max_body_bytes', () => {
    const post = (path: string, body: string, headers: Record<string, string> = {}) =>
      request(`${tollgate.proxyUrl}${path}`, { method: 'POST', headers: { host: HOST, ...headers }, body });

    it('refuses a declared Content-Length above the limit before contacting the upstream', async () => {
      const heads = sinkHeads;
      const res = await post('/upload', 'x'.repeat(101));
      assert.equal(res.status, 413);
      assert.equal(res.json().error, 'body_too_large');
      assert.equal(sinkHeads, heads, 'the upstream saw nothing');
      const fits = await post('/upload', 'x'.repeat(100));
      assert.equal(fits.json().bodyBytes, 100);
    });

    it('applies the global limit, and 0 on a path means unlimited', async () => {
      assert.equal((await post('/upload-global', 'x'.repeat(1025))).status, 413);
      assert.equal((await post('/upload-global', 'x'.repeat(1024))).status, 200);
      assert.equal((await post('/upload-unlimited', 'x'.repeat(4096))).json().bodyBytes, 4096);
    });

    it('asks for credentials before it says how large a body may be', async () => {
      assert.equal((await post('/upload-auth', 'x'.repeat(101))).status, 401);
      const res = await post('/upload-auth', 'x'.repeat(101), { authorization: basic('alice', 'pw') });
      assert.equal(res.status, 413);
    });

    it('answers 413 without 100 Continue when Expect: 100-continue announces too much', async () => {
      const heads = sinkHeads;
      const socket = net.connect({ host: '127.0.0.1', port: tollgate.proxyPort });
      await once(socket, 'connect');
      socket.write(
        `POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n`,
      );
      let received = '';
      socket.setEncoding('latin1');
      socket.on('data', (chunk: string) => {
        received += chunk;
      });
      await once(socket, 'end');
      socket.destroy();
      assert.match(received, /^HTTP\/1\.1 413 /, received);
      assert.doesNotMatch(received, /100 Continue/);
      assert.match(received, /connection: close/i);
      assert.equal(sinkHeads, heads);
    });

    it('cuts a chunked body that grows past the limit with 413, the upstream never seeing it complete', async () => {
      const completeBefore = sink.requests.length;
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: tollgate.proxyPort,
            method: 'POST',
            path: '/upload',
            headers: { host: HOST, 'transfer-encoding': 'chunked' },
            agent: false,
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        // 60 bytes, then 60 more: over 100 in the second chunk. The request is never ended by us.
        req.write('a'.repeat(60));
        setImmediate(() => req.write('b'.repeat(60)));
      });
      assert.equal(status, 413);
      assert.equal(sink.requests.length, completeBefore, 'no complete body reached the upstream');
      // Within the limit, chunked passes whole.
      const fits = await new Promise<SimpleResponse>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: tollgate.proxyPort,
            method: 'POST',
            path: '/upload',
            headers: { host: HOST, 'transfer-encoding': 'chunked' },
            agent: false,
          },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => {
              body += d;
            });
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                headers: res.headers,
                body,
                json: () => JSON.parse(body),
              }),
            );
          },
        );
        req.on('error', reject);
        req.write('a'.repeat(50));
        req.end('b'.repeat(50));
      });
      assert.equal(fits.json().bodyBytes, 100);
    });

    it('cuts the response short when the upstream had already answered', async () => {
      const outcome = await new Promise<string>((resolve) => {
        const req = http.request({
          host: '127.0.0.1',
          port: tollgate.proxyPort,
          method: 'POST',
          path: '/upload-early',
          headers: { host: HOST, 'transfer-encoding': 'chunked' },
          agent: false,
        });
        req.on('error', () => resolve('request error'));
        req.on('response', (res) => {
          assert.equal(res.statusCode, 200);
          res.on('data', () => {
            // The answer has started: now the body grows past the limit.
            req.write('x'.repeat(150));
          });
          res.on('end', () => resolve('clean end'));
          res.on('aborted', () => resolve('aborted'));
          res.on('error', () => resolve('response error'));
        });
        req.write('x'.repeat(10));
      });
      assert.notEqual(outcome, 'clean end', 'a cut response must not look complete');
    });

    it('cuts an HTTP/2 body without content-length that grows past the limit', async () => {
      const client = http2.connect(`http://127.0.0.1:${tollgate.proxyPort}`);
      try {
        const stream = client.request({ ':method': 'POST', ':path': '/upload', ':authority': HOST });
        stream.write('a'.repeat(80));
        stream.write('b'.repeat(80));
        const [headers] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
        assert.equal(headers[':status'], 413);
        stream.resume();
        stream.close();
        const small = client.request({ ':method': 'POST', ':path': '/upload', ':authority': HOST });
        small.end('c'.repeat(90));
        const [smallHeaders] = (await once(small, 'response')) as [http2.IncomingHttpHeaders];
        let body = '';
        small.setEncoding('utf8');
        small.on('data', (d: string) => {
          body += d;
        });
        await once(small, 'end');
        assert.equal(smallHeaders[':status'], 200);
        assert.equal(JSON.parse(body).bodyBytes, 90);
      } finally {
        client.close();
      }
    });
  });
  describe('bad policies', () => {
    it('validate refuses them with file:line, one line each', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'tollgate-policies-'));
      try {
        await writeFile(join(dir, 'main.yaml'), 'proxy_address_http: "127.0.0.1:0"\n');
        await writeFile(
          join(dir, 'upstreams.yaml'),
          [
            'max_body_bytes: 8q',
            'upstreams:',
            '  app.test:',
            '    paths:',
            '      /:',
            '        servers: ["127.0.0.1:3000"]',
            '        rewrite: { regex: "^/(a)\\\\1", replacement: /x }',
            '        cors: { allow_origins: ["*"], allow_credentials: true }',
            '        source_ranges: [10.0.0.0/33]',
            '',
          ].join('\n'),
        );
        const result = spawnSync(
          process.execPath,
          [MAIN_JS, 'validate', '--config', join(dir, 'main.yaml')],
          {
            encoding: 'utf8',
            env: { ...process.env, TOLLGATE_CONFIG: '' },
            timeout: 60_000,
          },
        );
        assert.equal(result.status, 1, result.stdout);
        assert.match(result.stderr, /upstreams\.yaml:1:17: max_body_bytes: '8q' is not a size/);
        assert.match(
          result.stderr,
          /upstreams\.yaml:7:\d+: .*rewrite\.regex: .*not a linear-time \(RE2\) regular expression/,
        );
        assert.match(result.stderr, /upstreams\.yaml:8:\d+: .*cors: '\*' with allow_credentials/);
        assert.match(result.stderr, /upstreams\.yaml:9:\d+: .*source_ranges\[0\]: '10\.0\.0\.0\/33'/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('a reload with a broken policy is refused and the previous config keeps serving', async () => {
      const failures = async () => reloadCount(await tollgate.metrics(), 'upstreams.yaml', 'failure') || 0;
      const before = await failures();
      await tollgate.writeUpstreams({
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers: [app.address], cors: { allow_origins: ['*'], allow_credentials: true } },
            },
          },
        },
      });
      await waitFor(async () => (await failures()) > before, 10_000);
      assert.ok(
        tollgate
          .logs()
          .some((line) =>
            /upstreams\.yaml:\d+:\d+: .*cors: '\*' with allow_credentials/.test(String(line.msg)),
          ),
      );
      const res = await get('/cors/x', { origin: 'https://app.example.com' });
      assert.equal(
        res.headers['access-control-allow-origin'],
        'https://app.example.com',
        'the old policy still serves',
      );
      assert.equal((await get('/internal/x')).status, 403);
    });
  });
});
