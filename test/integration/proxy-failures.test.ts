import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';

const scope = testScope();
const { upstream, deadServer } = scope;

function proxyFor(paths: Record<string, unknown>, main: Record<string, unknown> = {}): Promise<Tollgate> {
  return scope.tollgate({ upstreams: { upstreams: { 'app.test': { paths } } }, main });
}

const get = (tollgate: Tollgate, path = '/') =>
  request(tollgate.proxyUrl, { path, headers: { host: 'app.test' } });

describe('upstream failures', () => {
  it('fails over to the next server when a connection is refused', async () => {
    const alive = await upstream({ name: 'alive' });
    const deadAddress = await deadServer();
    const tollgate = await proxyFor({ '/': { servers: [deadAddress, alive.address] } });
    for (let i = 0; i < 6; i++) {
      const res = await get(tollgate);
      assert.equal(res.status, 200);
      assert.equal(res.json<{ server: string }>().server, 'alive');
    }
    const metrics = await tollgate.metrics();
    assert.match(
      metrics,
      new RegExp(
        `tollgate_upstream_errors_total\\{route="app\\.test/",server="${deadAddress}",kind="connect"\\} [1-9]`,
      ),
    );
  });

  it('answers 502 with a small JSON body when no server answers', async () => {
    const tollgate = await proxyFor({
      '/': { servers: [await deadServer(), await deadServer()] },
    });
    const res = await get(tollgate);
    assert.equal(res.status, 502);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.deepEqual(Object.keys(res.json()), ['error', 'message']);
    assert.equal(res.json<{ error: string }>().error, 'bad_gateway');
    assert.ok(res.body.length < 200);
  });

  it('answers 504 when response headers do not come in time', async () => {
    const slow = await upstream({
      handler: (_req, res) => {
        setTimeout(() => res.end('late'), 3000).unref();
      },
    });
    const tollgate = await proxyFor(
      { '/': { servers: [slow.address] } },
      { upstream_response_timeout_seconds: 0.3 },
    );
    const started = Date.now();
    const res = await get(tollgate);
    assert.equal(res.status, 504);
    assert.equal(res.json<{ error: string }>().error, 'gateway_timeout');
    assert.ok(Date.now() - started < 2500);
  });

  it('releases the upstream request when the client aborts', async () => {
    let upstreamSawClose = false;
    const hanging = await upstream({
      handler: (_req, res) => {
        res.writeHead(200);
        res.write('start');
        res.on('close', () => {
          upstreamSawClose = true;
        });
      },
    });
    const tollgate = await proxyFor({ '/': { servers: [hanging.address] } });
    const req = http.get({
      port: tollgate.proxyPort,
      host: '127.0.0.1',
      path: '/',
      headers: { host: 'app.test' },
    });
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    await once(res, 'data');
    req.destroy();
    await waitFor(() => upstreamSawClose, 3000);
  });

  it('a client that hangs up mid-download is not counted as an upstream error', async () => {
    let upstreamSawClose: () => void = () => {};
    const sawClose = new Promise<void>((resolve) => {
      upstreamSawClose = resolve;
    });
    const streaming = await upstream({
      handler: (_req, res) => {
        res.writeHead(200, { 'content-length': String(1024 * 1024) });
        res.write('first chunk');
        res.on('close', () => upstreamSawClose());
      },
    });
    const tollgate = await proxyFor({ '/': { servers: [streaming.address] } });
    const req = http.get({
      port: tollgate.proxyPort,
      host: '127.0.0.1',
      path: '/',
      headers: { host: 'app.test' },
    });
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    await once(res, 'data');
    req.destroy();
    await sawClose;
    // The upstream did nothing wrong: no error of any kind, and its server stays in rotation.
    await waitFor(() => tollgate.logs().some((line) => line.msg === 'access' && line.completed === false));
    const metrics = await tollgate.metrics();
    assert.doesNotMatch(
      metrics,
      new RegExp(`tollgate_upstream_errors_total\\{[^}]*server="${streaming.address}"`),
    );
  });

  it('takes 103 Early Hints as informational: passed on, then the final response', async () => {
    const hinting = await upstream({
      handler: (_req, res) => {
        res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
        res.writeHead(200, { 'content-type': 'text/plain' }).end('final');
      },
    });
    const tollgate = await proxyFor({ '/': { servers: [hinting.address] } });
    const req = http.get({
      port: tollgate.proxyPort,
      host: '127.0.0.1',
      path: '/',
      headers: { host: 'app.test' },
    });
    const hints: Array<{ statusCode: number; headers: http.IncomingHttpHeaders }> = [];
    req.on('information', (info) => hints.push({ statusCode: info.statusCode, headers: info.headers }));
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    let body = '';
    for await (const chunk of res) body += chunk;
    assert.equal(res.statusCode, 200);
    assert.equal(body, 'final');
    assert.deepEqual(
      hints.map((hint) => [hint.statusCode, hint.headers.link]),
      [[103, '</style.css>; rel=preload; as=style']],
    );
  });

  it('ends the client response when the upstream aborts mid-body', async () => {
    const breaking = await upstream({
      handler: (_req, res) => {
        res.writeHead(200, { 'content-length': '1000' });
        res.write('partial');
        setTimeout(() => res.socket?.destroy(), 50);
      },
    });
    const tollgate = await proxyFor({ '/': { servers: [breaking.address] } });
    const outcome = await new Promise<string>((resolve) => {
      const req = http.get(
        { port: tollgate.proxyPort, host: '127.0.0.1', path: '/', headers: { host: 'app.test' } },
        (res) => {
          res.on('data', () => {});
          res.on('end', () => resolve('clean end'));
          res.on('aborted', () => resolve('aborted'));
          res.on('error', () => resolve('aborted'));
        },
      );
      req.on('error', () => resolve('aborted'));
    });
    assert.equal(outcome, 'aborted');
  });

  it('streams 1 GiB through the proxy with flat memory', async () => {
    const total = 1024 * 1024 * 1024;
    const chunk = Buffer.alloc(1024 * 1024, 1);
    const big = await upstream({
      handler: async (_req, res) => {
        res.writeHead(200, { 'content-length': String(total) });
        for (let sent = 0; sent < total; sent += chunk.length) {
          if (!res.write(chunk)) await once(res, 'drain');
        }
        res.end();
      },
    });
    const tollgate = await proxyFor({ '/': { servers: [big.address] } });
    const rss = async () => Number(/process_resident_memory_bytes (\d+)/.exec(await tollgate.metrics())?.[1]);
    const before = await rss();
    let received = 0;
    let peak = before;
    const sampler = setInterval(async () => {
      peak = Math.max(peak, await rss().catch(() => 0));
    }, 200);
    await new Promise<void>((resolve, reject) => {
      http.get(
        { port: tollgate.proxyPort, host: '127.0.0.1', path: '/', headers: { host: 'app.test' } },
        (res) => {
          res.on('data', (d: Buffer) => {
            received += d.length;
          });
          res.on('end', resolve);
          res.on('error', reject);
        },
      );
    });
    clearInterval(sampler);
    assert.equal(received, total);
    // Buffering the body would cost a GiB; streaming keeps the proxy within a few tens of MiB.
    assert.ok(peak - before < 150 * 1024 * 1024, `rss grew by ${Math.round((peak - before) / 1048576)} MiB`);
  });
});
