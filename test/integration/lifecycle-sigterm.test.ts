import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import http from 'node:http';
import { after, describe, it } from 'node:test';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/** An upstream holding `/slow` requests until the test releases them, so requests are in flight on demand. */
async function holdingUpstream(): Promise<{ upstream: Upstream; release(): void }> {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const upstream = await startUpstream({
    name: 'slow',
    handler: async (req, res) => {
      if (req.url?.startsWith('/slow')) await released;
      const body = JSON.stringify({ server: 'slow', url: req.url });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    },
  });
  return { upstream, release };
}

const upstreamsFor = (upstream: Upstream) =>
  `provider: file\nupstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["${upstream.address}"]\n`;

/** Resolves with the moment of the answer, or the connection error's code. */
function timedGet(url: string, path: string, agent: http.Agent | false = false) {
  return new Promise<
    | { status: number; body: string; at: number; connection?: string | undefined }
    | { error: string; at: number }
  >((resolve) => {
    const target = new URL(url);
    http
      .get(
        { host: target.hostname, port: target.port, path, headers: { host: 'app.test' }, agent },
        (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d: string) => {
            body += d;
          });
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              body,
              at: Date.now(),
              connection: res.headers.connection,
            }),
          );
        },
      )
      .on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message, at: Date.now() }));
  });
}

describe('graceful shutdown of the real process', () => {
  const started: Array<Tollgate | Upstream> = [];
  after(async () => {
    for (const thing of started.reverse()) {
      if ('child' in thing) {
        await thing.stop('SIGKILL');
        await rm(thing.dir, { recursive: true, force: true });
      } else await thing.close();
    }
  });

  it('SIGTERM: readiness 503 first, keeps serving for the delay, refuses new connections, finishes in-flight, exits 0', async () => {
    const { upstream, release } = await holdingUpstream();
    started.push(upstream);
    const tollgate = await startTollgate({
      upstreams: upstreamsFor(upstream),
      main: { shutdown_delay_seconds: 3, shutdown_grace_seconds: 30 },
    });
    started.push(tollgate);

    // Keep-alive clients, as an ingress controller would be.
    const agent = new http.Agent({ keepAlive: true });
    const inFlight = [1, 2, 3].map((i) => timedGet(tollgate.proxyUrl, `/slow/${i}`, agent));
    await waitFor(() => upstream.requests.length === 3, 10_000);

    const signalledAt = Date.now();
    tollgate.child.kill('SIGTERM');

    // Readiness goes 503 at once, while the admin listener stays up.
    let readyOffAt = 0;
    await waitFor(async () => {
      const res = await request(`${tollgate.adminUrl}/readyz`);
      if (res.status !== 503) return false;
      readyOffAt = Date.now();
      assert.equal(res.json().status, 'draining');
      return true;
    }, 5_000);

    // During shutdown_delay_seconds new connections are still served (endpoints are being removed).
    const duringDelay = await timedGet(tollgate.proxyUrl, '/quick', new http.Agent({ keepAlive: true }));
    assert.ok('status' in duringDelay && duringDelay.status === 200, JSON.stringify(duringDelay));
    assert.equal(duringDelay.connection, 'close', 'keep-alive clients are told to reconnect elsewhere');

    // Then the listener closes: new connections are refused while the slow requests are still running.
    let refusedAt = 0;
    await waitFor(async () => {
      const attempt = await timedGet(tollgate.proxyUrl, '/quick');
      if (!('error' in attempt)) return false;
      assert.equal(attempt.error, 'ECONNREFUSED');
      refusedAt = attempt.at;
      return true;
    }, 15_000);
    assert.ok(refusedAt - signalledAt >= 2_900, 'not refused before shutdown_delay_seconds ended');
    assert.ok(readyOffAt <= refusedAt, 'readiness went 503 before connections were refused');
    assert.equal(
      (await request(`${tollgate.adminUrl}/readyz`)).status,
      503,
      'admin still up during the drain',
    );

    // Only now do the in-flight requests get their answers: they were in flight when accepting stopped.
    release();
    const answers = await Promise.all(inFlight);
    for (const [i, answer] of answers.entries()) {
      assert.ok('status' in answer, `in-flight request ${i + 1} failed: ${JSON.stringify(answer)}`);
      assert.equal(answer.status, 200);
      assert.equal(JSON.parse(answer.body).url, `/slow/${i + 1}`);
      assert.ok(answer.at > refusedAt, 'it was still in flight when accepting stopped');
    }
    assert.equal(await tollgate.exited, 0);
    agent.destroy();

    const messages = tollgate.logs().map((l) => l.msg);
    assert.ok(messages.includes('shutdown complete'), JSON.stringify(messages.slice(-5)));
    const complete = tollgate.logs().find((l) => l.msg === 'shutdown complete');
    assert.equal(complete?.connections_cut, 0);
  });

  it('a second signal during the drain exits at once with 128 + signal number', async () => {
    const { upstream, release } = await holdingUpstream();
    started.push(upstream);
    const tollgate = await startTollgate({
      upstreams: upstreamsFor(upstream),
      main: { shutdown_delay_seconds: 30, shutdown_grace_seconds: 30 },
    });
    started.push(tollgate);
    const pending = timedGet(tollgate.proxyUrl, '/slow');
    await waitFor(() => upstream.requests.length === 1, 10_000);
    tollgate.child.kill('SIGTERM');
    await waitFor(async () => (await request(`${tollgate.adminUrl}/readyz`)).status === 503, 10_000);
    const secondAt = Date.now();
    tollgate.child.kill('SIGTERM');
    assert.equal(await tollgate.exited, 143);
    // The drain would take at least the 30 s delay; the second signal ends it at once.
    assert.ok(Date.now() - secondAt < 15_000, 'exited at once, without waiting for the drain');
    release();
    assert.ok('error' in (await pending), 'the in-flight request was cut');
  });
});
