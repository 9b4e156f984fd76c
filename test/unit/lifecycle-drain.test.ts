import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { parseMainConfig, parseUpstreamsConfig } from '../../src/config/load.ts';
import { createLifecycle } from '../../src/lifecycle.ts';
import { createLogger } from '../../src/log.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { createRuntime } from '../../src/runtime.ts';
import { signalExitCode } from '../../src/signals.ts';

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

/**
 * A server whose `/hold` requests wait until the test releases them ('held' is emitted with the
 * release function once such a request arrived), everything else answered at once. No request
 * depends on how long anything takes.
 */
async function startServer() {
  const holds = new EventEmitter<{ held: [() => void] }>();
  const server = http.createServer(async (req, res) => {
    if (req.url === '/hold') await new Promise<void>((release) => holds.emit('held', release));
    res.end('done');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  /** Sends a /hold request and resolves once the server holds it, with its release and its answer. */
  const hold = async (agent: http.Agent | false = false) => {
    const held = once(holds, 'held') as Promise<[() => void]>;
    const answer = get(`http://127.0.0.1:${port}/hold`, agent);
    const [release] = await held;
    return { release, answer };
  };
  return { server, url: `http://127.0.0.1:${port}`, hold };
}

/** Turns the event loop until `condition` holds (the drain runs on after a timer fired). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await nextTurn();
}

/** Real sockets, fake timers: the shutdown delay and grace end when the test says so. */
function fakeTimers(t: TestContext) {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  return t.mock.timers;
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

describe('createLifecycle', { timeout: 30_000 }, () => {
  it('drains: readiness off at once, serves through the delay, then refuses, finishes in-flight', async (t) => {
    const timers = fakeTimers(t);
    const rt = runtime();
    const { server, url, hold } = await startServer();
    let cleanedUp = false;
    const lifecycle = createLifecycle({
      runtime: rt,
      servers: [server],
      main: { shutdownDelaySeconds: 5, shutdownGraceSeconds: 25 },
      logger,
      cleanup: [() => (cleanedUp = true)],
    });
    const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
    assert.equal((await get(`${url}/`, keepAlive)).connection, 'keep-alive');
    // Keep-alive agents: a client without one asks for `Connection: close` itself.
    const slow = await hold(new http.Agent({ keepAlive: true }));
    const endsWithinDelay = await hold(new http.Agent({ keepAlive: true }));

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
    endsWithinDelay.release();
    const early = await endsWithinDelay.answer;
    assert.equal(early.status, 200);
    assert.equal(early.connection, 'close', 'a response started before the drain closes its connection too');

    timers.tick(5_000);
    await until(() => !server.listening);
    await assert.rejects(get(`${url}/`), { code: 'ECONNREFUSED' });
    assert.equal(done, false, 'still draining the held request');

    slow.release();
    const last = await slow.answer;
    assert.equal(last.status, 200);
    assert.equal(last.body, 'done');
    assert.equal(last.connection, 'close');
    await finished;
    assert.ok(cleanedUp);
    keepAlive.destroy();
  });

  it('cuts connections still open when shutdown_grace_seconds runs out', async (t) => {
    const timers = fakeTimers(t);
    const rt = runtime();
    const { server, hold } = await startServer();
    const lifecycle = createLifecycle({
      runtime: rt,
      servers: [server],
      main: { shutdownDelaySeconds: 0, shutdownGraceSeconds: 25 },
      logger,
    });
    const stuck = await hold();
    const outcome = stuck.answer.then(
      () => 'answered',
      () => 'cut',
    );
    const finished = lifecycle.shutdown('SIGTERM');
    timers.tick(0);
    await until(() => !server.listening);
    timers.tick(25_000);
    assert.equal(await outcome, 'cut');
    await finished;
    stuck.release();
  });

  it('keeps the admin listener up until the end', async (t) => {
    fakeTimers(t);
    const rt = runtime();
    const proxy = await startServer();
    const admin = await startServer();
    const lifecycle = createLifecycle({
      runtime: rt,
      servers: [proxy.server],
      keepUntilExit: [admin.server],
      main: { shutdownDelaySeconds: 0, shutdownGraceSeconds: 25 },
      logger,
    });
    const inFlight = await proxy.hold();
    const finished = lifecycle.shutdown('SIGTERM');
    t.mock.timers.tick(0);
    await until(() => !proxy.server.listening);
    await assert.rejects(get(`${proxy.url}/`), { code: 'ECONNREFUSED' });
    assert.equal((await get(`${admin.url}/`)).status, 200, 'admin still answers during the drain');
    inFlight.release();
    await inFlight.answer;
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

  it('before readiness, claims no delay; after a failed start, logs the failure and no drain', async () => {
    const run = async (failed: boolean) => {
      const lines: Array<Record<string, unknown>> = [];
      const rt = runtime();
      rt.phase = 'starting';
      const { server } = await startServer();
      const lifecycle = createLifecycle({
        runtime: rt,
        servers: [server],
        main: { shutdownDelaySeconds: 5, shutdownGraceSeconds: 0.5 },
        logger: createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }),
      });
      if (failed)
        lifecycle.startFailed(new Error('tollgate: cannot listen on 127.0.0.1:1 (proxy_address_http)'));
      await lifecycle.shutdown(failed ? 'start-up failed' : 'SIGTERM');
      assert.equal(server.listening, false);
      return lines;
    };
    const interrupted = (await run(false)).map((line) => line.msg);
    assert.ok(interrupted.includes('shutting down before it was ready: no delay'), String(interrupted));
    assert.ok(!interrupted.some((msg) => String(msg).includes('still serving')));
    const failed = await run(true);
    assert.deepEqual(
      failed.map((line) => [line.level, line.event, line.error]),
      [['error', 'start_failed', 'cannot listen on 127.0.0.1:1 (proxy_address_http)']],
    );
  });

  it('a second signal exits with 128 + signal number', () => {
    assert.equal(signalExitCode('SIGTERM'), 143);
    assert.equal(signalExitCode('SIGINT'), 130);
  });
});
