import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { parseMainConfig, parseUpstreamsConfig } from '../../src/config/load.ts';
import { createLifecycle } from '../../src/lifecycle.ts';
import { createLogger } from '../../src/log.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { createRuntime } from '../../src/runtime.ts';
import { signalExitCode } from '../../src/signals.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const logger = createLogger('silent');

function runtime() {
  const main = parseMainConfig('upstreams_conf: upstreams.yaml\n', '/etc/tollgate/main.yaml');
  const upstreams = parseUpstreamsConfig(
    'provider: file\nupstreams:\n  DEFAULT:\n    paths:\n      "/":\n        servers: ["127.0.0.1:1"]\n',
    '/etc/tollgate/upstreams.yaml',
  );
  assert.ok(main.ok && upstreams.ok);
  const rt = createRuntime(main.value, logger, compileRoutingTable(upstreams.value));
  rt.phase = 'ready';
  return rt;
}

/** A server whose `/slow?ms=N` answers after N ms, everything else at once. */
async function startServer(): Promise<{ server: http.Server; url: string; port: number }> {
  const server = http.createServer(async (req, res) => {
    const ms = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('ms') ?? 0);
    // unref: a request the test abandons must not keep the test process alive.
    if (ms > 0) await new Promise((r) => setTimeout(r, ms).unref());
    res.end('done');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}`, port };
}

function get(url: string, agent: http.Agent | false = false) {
  return new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => {
          body += d;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }),
        );
      })
      .on('error', reject);
  });
}

describe('createLifecycle', () => {
  it('drains: readiness off at once, serves through the delay, then refuses, finishes in-flight, exits 0', async () => {
    const rt = runtime();
    const { server, url } = await startServer();
    let cleanedUp = false;
    const lifecycle = createLifecycle({
      runtime: rt,
      servers: [server],
      main: { shutdownDelaySeconds: 0.3, shutdownGraceSeconds: 5 },
      logger,
      cleanup: [() => (cleanedUp = true)],
    });
    const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
    assert.equal((await get(`${url}/`, keepAlive)).connection, 'keep-alive');
    // Keep-alive agents: a client without one asks for `Connection: close` itself.
    const slow = get(`${url}/slow?ms=700`, new http.Agent({ keepAlive: true }));
    const endsWithinDelay = get(`${url}/slow?ms=200`, new http.Agent({ keepAlive: true }));
    await sleep(50);

    const finished = lifecycle.shutdown('SIGTERM');
    let done = false;
    finished.then(() => {
      done = true;
    });
    assert.equal(rt.phase, 'draining');
    // During the delay new connections are still served, and told not to come back.
    const during = await get(`${url}/`, new http.Agent({ keepAlive: true }));
    assert.equal(during.status, 200);
    assert.equal(during.connection, 'close');

    const early = await endsWithinDelay;
    assert.equal(early.status, 200);
    assert.equal(early.connection, 'close', 'a response started before the drain closes its connection too');

    await sleep(400);
    await assert.rejects(get(`${url}/`), { code: 'ECONNREFUSED' });
    assert.equal(done, false, 'still draining the slow request');

    const last = await slow;
    assert.equal(last.status, 200);
    assert.equal(last.body, 'done');
    assert.equal(last.connection, 'close');
    await finished;
    assert.ok(cleanedUp);
    keepAlive.destroy();
  });

  it('cuts connections still open when shutdown_grace_seconds runs out, then exits 0', async () => {
    const rt = runtime();
    const { server, url } = await startServer();
    const lifecycle = createLifecycle({
      runtime: rt,
      servers: [server],
      main: { shutdownDelaySeconds: 0, shutdownGraceSeconds: 0.3 },
      logger,
    });
    const stuck = get(`${url}/slow?ms=5000`).then(
      () => 'answered',
      () => 'cut',
    );
    await sleep(50);
    const started = Date.now();
    const finished = lifecycle.shutdown('SIGTERM');
    assert.equal(await stuck, 'cut');
    await finished;
    assert.ok(Date.now() - started < 3_000);
  });

  it('keeps the admin listener up until the end', async () => {
    const rt = runtime();
    const proxy = await startServer();
    const admin = await startServer();
    const lifecycle = createLifecycle({
      runtime: rt,
      servers: [proxy.server],
      keepUntilExit: [admin.server],
      main: { shutdownDelaySeconds: 0, shutdownGraceSeconds: 5 },
      logger,
    });
    const slow = get(`${proxy.url}/slow?ms=400`);
    await sleep(50);
    const finished = lifecycle.shutdown('SIGTERM');
    await sleep(100);
    await assert.rejects(get(`${proxy.url}/`), { code: 'ECONNREFUSED' });
    assert.equal((await get(`${admin.url}/`)).status, 200, 'admin still answers during the drain');
    await slow;
    await finished;
    await assert.rejects(get(`${admin.url}/`), { code: 'ECONNREFUSED' });
  });

  it('a second shutdown call returns the same drain', async () => {
    const rt = runtime();
    const { server } = await startServer();
    const lifecycle = createLifecycle({
      runtime: rt,
      servers: [server],
      main: { shutdownDelaySeconds: 0, shutdownGraceSeconds: 0.5 },
      logger,
    });
    const first = lifecycle.shutdown('SIGTERM');
    assert.equal(lifecycle.shutdown('SIGINT'), first);
    await first;
    assert.equal(server.listening, false);
  });

  it('a second signal exits with 128 + signal number', () => {
    assert.equal(signalExitCode('SIGTERM'), 143);
    assert.equal(signalExitCode('SIGINT'), 130);
  });
});
