import assert from 'node:assert/strict';
import { appendFile, open, rename, truncate, unlink, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { configIdentityOf } from '../helpers/config-identity.ts';
import { lastReloadSuccess, reloadCount } from '../helpers/reload-metrics.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** upstreams.yaml routing each host (all paths) to one server. */
function config(routes: Record<string, Upstream>): string {
  const hosts = Object.entries(routes).map(
    ([host, server]) => `  ${host}:\n    paths:\n      "/":\n        servers: ["${server.address}"]\n`,
  );
  return `provider: file\nupstreams:\n${hosts.join('')}`;
}

/** Reads the reload counters and the live hash from /metrics. */
async function reloadState(tollgate: Tollgate) {
  const text = await tollgate.metrics();
  const hashes = [...text.matchAll(/^tollgate_config_info\{hash="([0-9a-f]+)"\} 1$/gm)].map((m) => m[1]);
  return {
    success: reloadCount(text, 'upstreams.yaml', 'success'),
    failure: reloadCount(text, 'upstreams.yaml', 'failure'),
    hashes,
    lastSuccess: lastReloadSuccess(text, 'upstreams.yaml'),
  };
}

describe('hot reload of an edited upstreams.yaml (real process)', () => {
  let a: Upstream;
  let b: Upstream;
  let c: Upstream;
  let tollgate: Tollgate;
  let file: string;
  let live: string;

  /** Which upstream answered for the host, or the status when no upstream did. */
  const servedBy = async (host = 'app.test'): Promise<string> => {
    const res = await request(tollgate.proxyUrl, { path: '/', headers: { host } });
    return res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  };

  /** Waits for the counters to move by the expected amounts (never less, and not more afterwards). */
  const expectReloads = async (
    before: { success: number; failure: number },
    success: number,
    failure: number,
  ) => {
    await waitFor(async () => {
      const now = await reloadState(tollgate);
      return now.success >= before.success + success && now.failure >= before.failure + failure;
    }, 3_000).catch(() => {});
    await sleep(300); // a late extra reload would show up here
    const now = await reloadState(tollgate);
    assert.deepEqual(
      { success: now.success - before.success, failure: now.failure - before.failure },
      { success, failure },
    );
    return now;
  };

  before(async () => {
    [a, b, c] = await Promise.all([
      startUpstream({ name: 'a' }),
      startUpstream({ name: 'b' }),
      startUpstream({ name: 'c' }),
    ]);
    live = config({ 'app.test': a });
    tollgate = await startTollgate({ upstreams: live, main: { access_log: false } });
    file = join(tollgate.dir, 'upstreams.yaml');
  });

  after(async () => {
    await tollgate?.stop();
    await Promise.all([a, b, c].map((u) => u?.close()));
  });

  it('publishes the config loaded at start', async () => {
    assert.equal(await servedBy(), 'a');
    const state = await reloadState(tollgate);
    assert.deepEqual(state.hashes, [configIdentityOf(live)]);
    assert.deepEqual([state.success, state.failure], [0, 0]);
    assert.ok(Math.abs(state.lastSuccess - Date.now() / 1000) < 60);
  });

  it('applies an editor-style truncate-then-write', async () => {
    const before = await reloadState(tollgate);
    live = config({ 'app.test': b });
    const handle = await open(file, 'r+');
    await handle.truncate(0);
    await sleep(20);
    await handle.write(live, 0);
    await handle.close();
    await waitFor(async () => (await servedBy()) === 'b', 1_000);
    const after = await expectReloads(before, 1, 0);
    assert.deepEqual(after.hashes, [configIdentityOf(live)]);
    assert.ok(after.lastSuccess >= before.lastSuccess);
  });

  it('applies a temp file renamed over the original', async () => {
    const before = await reloadState(tollgate);
    live = config({ 'app.test': c, 'new.test': a });
    await writeFile(join(tollgate.dir, '.upstreams.yaml.swp'), live);
    await rename(join(tollgate.dir, '.upstreams.yaml.swp'), file);
    await waitFor(async () => (await servedBy('new.test')) === 'a', 1_000);
    assert.equal(await servedBy(), 'c');
    const after = await expectReloads(before, 1, 0);
    assert.deepEqual(after.hashes, [configIdentityOf(live)]);
  });

  it('ends a rapid burst of writes with the last content live', async () => {
    const servers = [a, b, c];
    for (let i = 0; i < 15; i++) {
      await writeFile(file, config({ 'app.test': servers[i % 3] as Upstream, [`burst${i}.test`]: a }));
      await sleep(i % 4 === 0 ? 30 : 2);
    }
    live = config({ 'app.test': b, 'final.test': c });
    await writeFile(file, live);
    await waitFor(async () => (await reloadState(tollgate)).hashes[0] === configIdentityOf(live), 3_000);
    await sleep(300);
    const state = await reloadState(tollgate);
    assert.deepEqual(state.hashes, [configIdentityOf(live)], 'the last write stays live');
    assert.equal(await servedBy(), 'b');
    assert.equal(await servedBy('final.test'), 'c');
    assert.equal(await servedBy('burst14.test'), 'status 404');
  });

  it('rejects invalid YAML: logs file:line, counts a failure, keeps serving the previous config', async () => {
    const before = await reloadState(tollgate);
    await writeFile(file, `${live}  broken.test: [unclosed\n`);
    const after = await expectReloads(before, 0, 1);
    assert.deepEqual(after.hashes, [configIdentityOf(live)]);
    assert.equal(await servedBy(), 'b');
    assert.equal(await servedBy('final.test'), 'c');
    const problem = tollgate.logs().find((l) => l.level === 'error' && typeof l.line === 'number');
    assert.match(String(problem?.msg), new RegExp(`^${file.replace(/[.]/g, '\\.')}:\\d+:\\d+: invalid YAML`));
  });

  it('rejects a config with a validation error, naming file, line and YAML path', async () => {
    const before = await reloadState(tollgate);
    const invalid = `${config({ 'app.test': a })}        authorisation: {type: basic, creds: "u:p"}\n`;
    await writeFile(file, invalid);
    const after = await expectReloads(before, 0, 1);
    assert.deepEqual(after.hashes, [configIdentityOf(live)]);
    assert.equal(await servedBy(), 'b', 'the misspelt authorization did not go live without auth');
    const problem = tollgate.logs().find((l) => l.path === 'upstreams.app.test.paths./.authorisation');
    assert.ok(problem, JSON.stringify(tollgate.logs().filter((l) => l.level === 'error')));
    assert.equal(problem.line, 7);
    assert.ok(String(problem.msg).startsWith(`${file}:7:`));
    assert.ok(!tollgate.stdout().includes('u:p'), 'credentials never reach the log');
  });

  it('keeps serving when the file is deleted, and applies it when it comes back', async () => {
    let before = await reloadState(tollgate);
    await unlink(file);
    let after = await expectReloads(before, 0, 1);
    assert.deepEqual(after.hashes, [configIdentityOf(live)]);
    assert.equal(await servedBy(), 'b');
    assert.ok(tollgate.logs().some((l) => l.reason === 'the file does not exist'));

    before = after;
    live = config({ 'app.test': a });
    await writeFile(file, live);
    await waitFor(async () => (await servedBy()) === 'a', 1_000);
    after = await expectReloads(before, 1, 0);
    assert.deepEqual(after.hashes, [configIdentityOf(live)]);
  });

  it('keeps serving through a truncation that is not followed by a write', async () => {
    const before = await reloadState(tollgate);
    await truncate(file, 0);
    await expectReloads(before, 0, 1);
    assert.equal(await servedBy(), 'a');
    await writeFile(file, live); // the same content as live: back to normal
    await sleep(400);
    assert.equal(await servedBy(), 'a');
  });

  it('on SIGHUP re-checks without dying and without reloading unchanged content', async () => {
    const before = await reloadState(tollgate);
    tollgate.child.kill('SIGHUP');
    await sleep(400);
    assert.equal(tollgate.child.exitCode, null);
    await expectReloads(before, 0, 0);
    assert.equal(await servedBy(), 'a');
  });

  it('keeps upstream connections of servers still configured; closes those of removed servers', async () => {
    // An upstream that says which of its connections served the request.
    const sockets = new Set<Socket>();
    const keeper = await startUpstream({
      name: 'keeper',
      handler: (req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ server: 'keeper', connection: req.socket.remotePort }));
      },
    });
    keeper.server.on('connection', (socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    const connectionUsed = async (host: string) =>
      (await request(tollgate.proxyUrl, { path: '/', headers: { host } })).json().connection;
    try {
      live = config({ 'app.test': a, 'keep.test': keeper });
      await writeFile(file, live);
      await waitFor(async () => (await servedBy('keep.test')) === 'keeper', 1_000);
      const first = await connectionUsed('keep.test');

      live = config({ 'app.test': b, 'keep.test': keeper, 'other.test': c });
      await writeFile(file, live);
      await waitFor(async () => (await servedBy('other.test')) === 'c', 1_000);
      assert.equal(await connectionUsed('keep.test'), first, 'the pool survived the reload');

      live = config({ 'app.test': a });
      await writeFile(file, live);
      await waitFor(async () => (await servedBy('keep.test')) === 'status 404', 1_000);
      await waitFor(() => sockets.size === 0, 2_000).catch(() =>
        assert.fail(`${sockets.size} connection(s) to the removed server still open`),
      );
    } finally {
      await keeper.close();
    }
  });

  it('does not apply main.yaml changes live, and says a restart is needed', async () => {
    const before = await reloadState(tollgate);
    await appendFile(join(tollgate.dir, 'main.yaml'), 'log_level: debug\n');
    await waitFor(
      () => tollgate.logs().some((l) => /restart tollgate to apply it/.test(String(l.msg))),
      3_000,
    );
    await expectReloads(before, 0, 0);
    assert.equal(await servedBy(), 'a');
  });
});
