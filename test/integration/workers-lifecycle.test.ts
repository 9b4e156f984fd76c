import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { Client } from 'undici';
import { testScope } from '../helpers/scope.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';
import { liveWorkers, PROCESS_START_MS, sample, sumOf } from '../helpers/workers.ts';

const upstreamsFor = (upstream: Upstream) =>
  `upstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["${upstream.address}"]\n`;

const readyz = async (tollgate: Tollgate) => {
  const answer = await request(`${tollgate.adminUrl}/readyz`);
  return { code: answer.status, body: answer.json() as Record<string, unknown> };
};

/** Kills one worker with SIGKILL and waits until its replacement serves; returns the new pid. */
async function killAndAwaitReplacement(tollgate: Tollgate, victim: number): Promise<number> {
  const before = new Set(liveWorkers(tollgate));
  process.kill(victim, 'SIGKILL');
  let replacement = 0;
  await waitFor(() => {
    const fresh = liveWorkers(tollgate).filter((pid) => !before.has(pid));
    replacement = fresh[0] ?? 0;
    return replacement !== 0 && !liveWorkers(tollgate).includes(victim);
  }, PROCESS_START_MS);
  return replacement;
}

describe('workers: lifecycle of the set (the real process)', () => {
  const scope = testScope();

  it('a worker killed with SIGKILL loses no request on the other connections and is replaced', async () => {
    const upstream = await scope.upstream();
    const tollgate = await scope.tollgate({
      upstreams: upstreamsFor(upstream),
      main: { workers: 2 },
      readyTimeoutMs: PROCESS_START_MS,
    });
    const workers = liveWorkers(tollgate);
    assert.equal(workers.length, 2);

    // Sixteen keep-alive connections, each one request at a time, as long as the test runs.
    const clients = Array.from({ length: 16 }, () => {
      const client = new Client(tollgate.proxyUrl, { pipelining: 1 });
      const state = { client, ok: 0, failed: 0, disconnected: false };
      client.on('disconnect', () => {
        state.disconnected = true;
      });
      return state;
    });
    let running = true;
    const loops = clients.map(async (state) => {
      while (running) {
        try {
          const { statusCode, body } = await state.client.request({
            path: '/',
            method: 'GET',
            headers: { host: 'app.test' },
          });
          await body.text();
          if (statusCode === 200) state.ok += 1;
          else state.failed += 1;
        } catch {
          state.failed += 1;
        }
      }
    });
    try {
      await waitFor(() => clients.every((state) => state.ok > 0), PROCESS_START_MS);
      const countedBefore = sumOf(await tollgate.metrics(), 'tollgate_requests_total', 'status="200"');

      const victim = workers[0] as number;
      const replacement = await killAndAwaitReplacement(tollgate, victim);
      await waitFor(async () => (await readyz(tollgate)).code === 200, PROCESS_START_MS);
      assert.notEqual(replacement, victim);

      // Requests keep flowing a moment longer, on the surviving connections and the reconnected ones.
      const okNow = clients.map((state) => state.ok);
      await waitFor(() => clients.every((state, i) => state.ok > (okNow[i] ?? 0)), PROCESS_START_MS);
      running = false;
      await Promise.all(loops);

      const onVictim = clients.filter((state) => state.disconnected);
      const onSurvivor = clients.filter((state) => !state.disconnected);
      assert.ok(onVictim.length > 0 && onSurvivor.length > 0, 'connections were on both workers');
      for (const state of onSurvivor)
        assert.equal(state.failed, 0, 'no request lost on the surviving worker');

      const metrics = await tollgate.metrics();
      assert.equal(sample(metrics, 'tollgate_worker_restarts_total{reason="crash"}'), 1);
      const countedAfter = sumOf(metrics, 'tollgate_requests_total', 'status="200"');
      assert.ok(countedAfter >= countedBefore, `counter went down: ${countedBefore} → ${countedAfter}`);
      const crash = tollgate.logs().find((line) => line.msg === 'worker exited; replacing it');
      assert.equal(crash?.signal, 'SIGKILL');
      assert.equal(crash?.worker, victim);
    } finally {
      running = false;
      await Promise.all(loops);
      await Promise.all(clients.map((state) => state.client.close()));
    }
  });

  it('a crash loop turns readiness off until a replacement has kept serving', async () => {
    const upstream = await scope.upstream();
    const tollgate = await scope.tollgate({
      upstreams: upstreamsFor(upstream),
      main: { workers: 2 },
      readyTimeoutMs: PROCESS_START_MS,
    });
    let victim = liveWorkers(tollgate)[0] as number;
    for (let crash = 1; crash <= 3; crash += 1) victim = await killAndAwaitReplacement(tollgate, victim);

    // Both workers serve again, yet the set is not ready: it has just crashed three times in a row.
    // The replacement is seen (its log line) a moment before it reports serving to the primary; the
    // crash-loop state lasts until it has served for the stable period, so waiting for it is safe.
    let state = await readyz(tollgate);
    await waitFor(async () => {
      state = await readyz(tollgate);
      return state.body.workers_serving === 2;
    }, PROCESS_START_MS);
    assert.equal(state.code, 503);
    assert.deepEqual(state.body, { status: 'crash_loop', workers: 2, workers_serving: 2 });
    assert.equal(sample(await tollgate.metrics(), 'tollgate_worker_restarts_total{reason="crash"}'), 3);
    const looping = tollgate.logs().find((line) => String(line.msg).startsWith('workers are crash-looping'));
    assert.ok(looping, 'the crash loop is logged');
    // Ready again once the last replacement has served for the stable period (10 s).
    await waitFor(async () => (await readyz(tollgate)).code === 200, PROCESS_START_MS);
  });

  it('a worker that cannot bind the proxy port fails the start with its one-line reason and exit 1', async () => {
    const upstream = await scope.upstream();
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    scope.keep({ close: () => new Promise<void>((resolve) => holder.close(() => resolve())) });
    const port = (holder.address() as net.AddressInfo).port;
    const tollgate = await scope.tollgate({
      upstreams: upstreamsFor(upstream),
      main: { workers: 2, proxy_address_http: `127.0.0.1:${port}` },
      waitReady: false,
    });
    assert.equal(await tollgate.exited, 1);
    assert.equal(
      tollgate.stderr(),
      `tollgate: cannot listen on 127.0.0.1:${port} (proxy_address_http): address already in use\n`,
    );
    // Logged as the failure it is, never as the drain of a proxy that served.
    assert.ok(
      tollgate.logs().some((line) => line.event === 'start_failed'),
      tollgate.stdout(),
    );
    for (const claim of ['still serving', 'draining', 'shutdown complete']) {
      assert.ok(!tollgate.stdout().includes(claim), `'${claim}' logged: ${tollgate.stdout()}`);
    }
  });

  it('SIGTERM drains every in-flight request on every worker and exits 0', async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const upstream = await scope.upstream({
      handler: async (_req, res) => {
        await released;
        res.writeHead(200, { 'content-type': 'text/plain' }).end('done');
      },
    });
    const tollgate = await scope.tollgate({
      upstreams: upstreamsFor(upstream),
      main: { workers: 2, shutdown_delay_seconds: 0, shutdown_grace_seconds: 20 },
      readyTimeoutMs: PROCESS_START_MS,
    });
    const inFlight = Array.from({ length: 12 }, () =>
      request(`${tollgate.proxyUrl}/`, { headers: { host: 'app.test' } }).then(
        (answer) => answer.status,
        (error: Error) => error.message,
      ),
    );
    await waitFor(() => upstream.requests.length === 12, PROCESS_START_MS);

    tollgate.child.kill('SIGTERM');
    await waitFor(async () => (await readyz(tollgate)).code === 503, PROCESS_START_MS);
    // Both workers stopped accepting and wait for their requests.
    await waitFor(
      () =>
        new Set(
          tollgate
            .logs()
            .filter((line) => line.msg === 'stopped accepting connections; draining' && line.worker)
            .map((line) => line.worker),
        ).size === 2,
      PROCESS_START_MS,
    );
    const draining = tollgate
      .logs()
      .filter((line) => line.msg === 'stopped accepting connections; draining' && line.worker);
    assert.equal(
      draining.reduce((total, line) => total + Number(line.in_flight), 0),
      12,
      'the in-flight requests were spread over the workers and all were still running',
    );
    release();
    assert.deepEqual(await Promise.all(inFlight), Array(12).fill(200));
    assert.equal(await tollgate.exited, 0);
  });
});
