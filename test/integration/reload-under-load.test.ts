import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { waitForLiveConfig } from '../helpers/config-identity.ts';
import { type ConfigMapVolume, createConfigMapVolume } from '../helpers/configmap.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Bounded on purpose: loopback only, a few clients, a few seconds (the machine is shared). */
const LOAD_MS = 4_000;
const CLIENTS = 4;
const SWAP_EVERY_MS = 250;

interface Outcome {
  /** Versions that may have been live when the request arrived: [confirmed before sending, written at the answer]. */
  lo: number;
  hi: number;
  status: number;
  server: string | null;
  error: string | null;
}

describe('config swaps under steady load (real process)', () => {
  const upstreams: Upstream[] = [];
  let volume: ConfigMapVolume;
  let tollgate: Tollgate;

  // Version v routes app.test to exactly one server, so an answer tells which table served it.
  const serverOf = (version: number) => upstreams[version % upstreams.length] as Upstream;
  const configOf = (version: number) =>
    `# version ${version}\nprovider: file\nupstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["${serverOf(version).address}"]\n`;

  before(async () => {
    for (const name of ['u0', 'u1', 'u2']) upstreams.push(await startUpstream({ name }));
    volume = await createConfigMapVolume({ 'upstreams.yaml': configOf(0) });
    tollgate = await startTollgate({
      upstreams: '',
      upstreamsPath: volume.path('upstreams.yaml'),
      main: { access_log: false },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await volume?.remove();
    await Promise.all(upstreams.map((u) => u.close()));
  });

  it('loses no request and answers each from a server configured when it arrived', async () => {
    let written = 0;
    let confirmed = 0;
    let running = true;
    const outcomes: Outcome[] = [];
    const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });

    const once = () =>
      new Promise<Outcome>((resolve) => {
        const lo = confirmed;
        const req = http.request(
          { host: '127.0.0.1', port: tollgate.proxyPort, path: '/', headers: { host: 'app.test' }, agent },
          (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (d: string) => {
              body += d;
            });
            res.on('end', () => {
              let server: string | null = null;
              try {
                server = String(JSON.parse(body).server);
              } catch {}
              resolve({ lo, hi: written, status: res.statusCode ?? 0, server, error: null });
            });
            res.on('error', (e) => resolve({ lo, hi: written, status: 0, server: null, error: e.message }));
          },
        );
        req.on('error', (e) => resolve({ lo, hi: written, status: 0, server: null, error: e.message }));
        req.end();
      });

    const client = async () => {
      while (running) outcomes.push(await once());
    };

    const swapper = async () => {
      const stopAt = Date.now() + LOAD_MS;
      while (Date.now() < stopAt) {
        await sleep(SWAP_EVERY_MS);
        const version = written + 1;
        const text = configOf(version);
        // The proxy may pick the new version up before update() returns (the ..data rename is in
        // the middle of it), so it counts as possibly live from the moment the update starts.
        written = version;
        await volume.update({ 'upstreams.yaml': text });
        // Wait until the proxy says this version is live, so later requests must see it (or newer).
        await waitForLiveConfig(tollgate.adminUrl, text, 2_000);
        confirmed = version;
      }
      running = false;
    };

    await Promise.all([swapper(), ...Array.from({ length: CLIENTS }, client)]);
    agent.destroy();

    const failed = outcomes.filter((o) => o.status !== 200);
    assert.deepEqual(failed.slice(0, 5), [], `${failed.length} of ${outcomes.length} requests failed`);

    const stale = outcomes.filter((o) => {
      const allowed = new Set<string>();
      for (let v = o.lo; v <= o.hi; v++) allowed.add(serverOf(v).name);
      return o.server === null || !allowed.has(o.server);
    });
    assert.deepEqual(stale.slice(0, 5), [], 'answered by a server not configured when the request arrived');

    // The check above only means something when the window excludes a server: most windows must.
    const decisive = outcomes.filter((o) => o.hi - o.lo < upstreams.length - 1).length;
    assert.ok(decisive > outcomes.length * 0.8, `${decisive} of ${outcomes.length} checks were decisive`);
    assert.ok(written >= 5, `only ${written} swaps happened`);
    assert.ok(outcomes.length > 200, `only ${outcomes.length} requests were sent`);

    const byServer = new Map<string, number>();
    for (const o of outcomes) byServer.set(o.server ?? '', (byServer.get(o.server ?? '') ?? 0) + 1);
    assert.equal(byServer.size, upstreams.length, 'every version was actually served');

    // Every swap was reloaded while the clients were running (the checks above would pass vacuously
    // if the table had never changed): one success per swap, no failure.
    const metrics = await tollgate.metrics();
    assert.equal(reloadCount(metrics, 'upstreams.yaml', 'success'), written);
    assert.equal(reloadCount(metrics, 'upstreams.yaml', 'failure'), 0);
    // Figures for the report, not assertions.
    process.stdout.write(
      `# ${outcomes.length} requests, ${written} swaps, by server: ${JSON.stringify([...byServer])}\n`,
    );
  });
});
