import assert from 'node:assert/strict';
import { appendFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { configIdentityOf } from '../helpers/config-identity.ts';
import { type ConfigMapVolume, createConfigMapVolume } from '../helpers/configmap.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Reloads are never starved (docs/reload.md#how-fast): a swap goes live within a second however
 * busy the directory is. Delays are measured between the moment the test starts a swap and the
 * `time` of the process's own "upstreams.yaml reloaded" line (one clock, the machine's), so a slow
 * test client does not count; waiting for the new config uses generous timeouts.
 */
const LIVE_WITHIN_MS = 1_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every "upstreams.yaml reloaded" line: when (ms since the epoch) and which hash went live. */
function reloadsLogged(tollgate: Tollgate): Array<{ at: number; hash: string }> {
  return tollgate
    .logs()
    .filter((line) => line.msg === 'upstreams.yaml reloaded')
    .map((line) => ({ at: Date.parse(String(line.time)), hash: String(line.hash) }));
}

async function liveHash(tollgate: Tollgate): Promise<string | undefined> {
  const ready = (await (await fetch(`${tollgate.adminUrl}/readyz`)).json()) as { config_hash?: string };
  return ready.config_hash;
}

describe('reloads under a busy config directory and bursts of swaps (real process)', () => {
  let upstream: Upstream;
  let root: string;
  let volume: ConfigMapVolume;
  let tollgate: Tollgate;
  let version = 0;

  const configOf = (v: number) =>
    `# version ${v}\nprovider: file\nupstreams:\n  app.test:\n    paths:\n      "/v${v}":\n        servers: ["${upstream.address}"]\n`;

  /** One kubelet-style swap; resolves with the hash and the time the swap started. */
  const swap = async () => {
    const text = configOf(++version);
    const startedAt = Date.now();
    await volume.update({ 'upstreams.yaml': text });
    return { hash: configIdentityOf(text), startedAt };
  };

  before(async () => {
    upstream = await startUpstream();
    // The layout a new user builds: main.yaml and its log beside a kubelet-style `conf/` volume.
    root = await mkdtemp(join(tmpdir(), 'tollgate-busy-'));
    await mkdir(join(root, 'conf'));
    volume = await createConfigMapVolume({ 'upstreams.yaml': configOf(0) }, join(root, 'conf'));
    tollgate = await startTollgate({
      dir: root,
      upstreams: '',
      upstreamsPath: volume.path('upstreams.yaml'),
      main: { access_log: false },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
    await rm(root, { recursive: true, force: true });
  });

  it('each swap is live within 1 s while files beside the config are appended every 20 ms', async () => {
    let appending = true;
    let appended = 0;
    const appender = (async () => {
      while (appending) {
        // A log file beside main.yaml and another app's file inside the config volume's directory.
        await appendFile(join(root, 'tollgate.log'), `{"msg":"line ${appended}"}\n`);
        await appendFile(join(root, 'conf', 'other-app.log'), `line ${appended}\n`);
        await writeFile(join(root, '.main.yaml.swp'), `swap ${appended++}`);
        await sleep(20);
      }
    })();
    try {
      for (let i = 0; i < 3; i++) {
        const { hash, startedAt } = await swap();
        await waitFor(async () => (await liveHash(tollgate)) === hash, 10_000);
        // The log line travels through a pipe: it can reach the test after the admin port says live.
        await waitFor(() => reloadsLogged(tollgate).some((r) => r.hash === hash), 10_000);
        const reload = reloadsLogged(tollgate).find((r) => r.hash === hash);
        assert.ok(reload, 'the process logged the reload');
        const delay = reload.at - startedAt;
        assert.ok(delay <= LIVE_WITHIN_MS, `swap ${i + 1} went live after ${delay} ms`);
        // Let the appender run on its own for a while: no check may be starved meanwhile either.
        await sleep(300);
      }
    } finally {
      appending = false;
      await appender;
    }
    assert.ok(appended > 20, `only ${appended} appends happened`);
    const metrics = await tollgate.metrics();
    assert.equal(reloadCount(metrics, 'upstreams.yaml', 'failure'), 0);
  });

  it('swaps every 100 ms for 2 s: a reload at least every second, the last content live within 1 s', async () => {
    const before = reloadsLogged(tollgate).length;
    const burstStart = Date.now();
    let last = { hash: '', startedAt: 0 };
    while (Date.now() - burstStart < 2_000) {
      last = await swap();
      await sleep(100);
    }
    const burstEnd = Date.now();
    await waitFor(async () => (await liveHash(tollgate)) === last.hash, 10_000);
    // The admin port can show the new table before the reload's log line has come through the
    // stdout pipe (a loaded machine): wait for the line, whose own `time` is what is measured.
    await waitFor(() => reloadsLogged(tollgate).some((reload) => reload.hash === last.hash), 10_000);

    const reloads = reloadsLogged(tollgate).slice(before);
    const lastReload = reloads.find((r) => r.hash === last.hash);
    assert.ok(lastReload, 'the last content was reloaded');
    assert.ok(
      lastReload.at - last.startedAt <= LIVE_WITHIN_MS,
      `the last swap went live after ${lastReload.at - last.startedAt} ms`,
    );
    // No second of the burst without a reload: the gaps from its start, between reloads, and up to
    // its end are all at most a second.
    const during = reloads.filter((r) => r.at <= burstEnd).map((r) => r.at);
    const moments = [burstStart, ...during, burstEnd];
    const gaps = moments.slice(1).map((at, i) => at - (moments[i] as number));
    assert.ok(
      gaps.every((gap) => gap <= LIVE_WITHIN_MS),
      `${during.length} reloads during the ${burstEnd - burstStart} ms burst; gaps ${gaps.join(', ')} ms`,
    );
    assert.ok(during.length >= 2, `only ${during.length} reloads during the burst`);
    process.stdout.write(
      `# burst: ${version} swaps so far, ${reloads.length} reloads, gaps ${gaps.join(', ')} ms\n`,
    );
  });
});
