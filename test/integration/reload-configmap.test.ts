import assert from 'node:assert/strict';
import { lstat, readlink } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { configIdentityOf } from '../helpers/config-identity.ts';
import { type ConfigMapVolume, createConfigMapVolume } from '../helpers/configmap.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

function config(routes: Record<string, Upstream>): string {
  const hosts = Object.entries(routes).map(
    ([host, server]) => `  ${host}:\n    paths:\n      "/":\n        servers: ["${server.address}"]\n`,
  );
  return `provider: file\nupstreams:\n${hosts.join('')}`;
}

async function reloadState(tollgate: Tollgate) {
  const text = await tollgate.metrics();
  const count = (result: string) => reloadCount(text, 'upstreams.yaml', result);
  const hashes = [...text.matchAll(/^tollgate_config_info\{hash="([0-9a-f]+)"\} 1$/gm)].map((m) => m[1]);
  return { success: count('success'), failure: count('failure'), hashes };
}

describe('hot reload from a ConfigMap volume updated by the kubelet (real process)', () => {
  let a: Upstream;
  let b: Upstream;
  let volume: ConfigMapVolume;
  let tollgate: Tollgate;

  const servedBy = async (host: string): Promise<string> => {
    const res = await request(tollgate.proxyUrl, { path: '/', headers: { host } });
    return res.status === 200 ? String(res.json().server) : `status ${res.status}`;
  };

  before(async () => {
    [a, b] = await Promise.all([startUpstream({ name: 'a' }), startUpstream({ name: 'b' })]);
    volume = await createConfigMapVolume({ 'upstreams.yaml': config({ 'app.test': a, 'v1.test': a }) });
    tollgate = await startTollgate({
      upstreams: '',
      upstreamsPath: volume.path('upstreams.yaml'),
      main: { access_log: false },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await volume?.remove();
    await Promise.all([a, b].map((u) => u?.close()));
  });

  it('the helper reproduces the kubelet layout: key -> ..data/key, ..data -> ..<timestamp>', async () => {
    assert.equal(await readlink(volume.path('upstreams.yaml')), '..data/upstreams.yaml');
    assert.match(await volume.current(), /^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$/);
    assert.ok((await lstat(volume.path('..data'))).isSymbolicLink());
    assert.equal(await servedBy('v1.test'), 'a');
  });

  it('makes each ..data swap live within 1 s, and the previous routes disappear', async () => {
    for (let version = 2; version <= 6; version++) {
      const server = version % 2 === 0 ? b : a;
      const text = config({ 'app.test': server, [`v${version}.test`]: server });
      const previousDir = await volume.current();
      await volume.update({ 'upstreams.yaml': text });
      assert.notEqual(await volume.current(), previousDir);
      const swappedAt = Date.now();
      await waitFor(async () => (await servedBy(`v${version}.test`)) === server.name, 1_000).catch(() => {
        assert.fail(`version ${version} was not live within 1 s of the swap`);
      });
      assert.ok(Date.now() - swappedAt <= 1_100);
      assert.equal(await servedBy('app.test'), server.name);
      assert.equal(await servedBy(`v${version - 1}.test`), 'status 404');
      const state = await reloadState(tollgate);
      assert.deepEqual(state.hashes, [configIdentityOf(text)]);
      assert.deepEqual([state.success, state.failure], [version - 1, 0]);
    }
  });

  it('rejects an invalid ConfigMap update and keeps serving the last good one', async () => {
    const good = await reloadState(tollgate);
    await volume.update({ 'upstreams.yaml': `${config({ 'app.test': a })}        servers_typo: []\n` });
    await waitFor(async () => (await reloadState(tollgate)).failure === good.failure + 1, 3_000);
    const state = await reloadState(tollgate);
    assert.deepEqual(state.hashes, good.hashes);
    assert.equal(state.success, good.success);
    assert.equal(await servedBy('v6.test'), 'b');
    assert.ok(tollgate.logs().some((l) => l.path === 'upstreams.app.test.paths./.servers_typo'));

    // Fixing the ConfigMap goes live again.
    const fixed = config({ 'app.test': a, 'fixed.test': b });
    await volume.update({ 'upstreams.yaml': fixed });
    await waitFor(async () => (await servedBy('fixed.test')) === 'b', 1_000);
    assert.deepEqual((await reloadState(tollgate)).hashes, [configIdentityOf(fixed)]);
  });
});
