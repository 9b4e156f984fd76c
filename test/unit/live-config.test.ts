import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { parseMainConfig, parseUpstreamsConfig } from '../../src/config/load.ts';
import type { UpstreamsConfig } from '../../src/config/types.ts';
import { createLiveConfig } from '../../src/control-plane/live-config.ts';
import { createLogger } from '../../src/log.ts';
import { configInfo, configReloadsTotal } from '../../src/observe/metrics.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import type { ConfigSnapshot } from '../../src/snapshot.ts';

const FILE = '/etc/tollgate/upstreams.yaml';

function upstreams(server: string): UpstreamsConfig {
  const parsed = parseUpstreamsConfig(
    `provider: file\nupstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["${server}"]\n`,
    FILE,
  );
  assert.ok(parsed.ok);
  return parsed.value;
}

function setup() {
  const main = parseMainConfig('upstreams_conf: upstreams.yaml\n', '/etc/tollgate/main.yaml');
  assert.ok(main.ok);
  let masterkey: string | null = 'key-one';
  const config = upstreams('10.0.0.1:80');
  const liveConfig = createLiveConfig({
    main: main.value,
    logger: createLogger('silent'),
    table: compileRoutingTable(config),
    upstreams: config,
    masterkey: () => masterkey,
  });
  const published: Array<[ConfigSnapshot, ConfigSnapshot]> = [];
  liveConfig.onSnapshot((next, previous) => published.push([next, previous]));
  return { liveConfig, published, setMasterkey: (key: string) => (masterkey = key) };
}

async function count(file: string, result: string): Promise<number> {
  const { values } = await configReloadsTotal.get();
  return values.find((v) => v.labels.file === file && v.labels.result === result)?.value ?? 0;
}

const liveHashes = async () => (await configInfo.get()).values.map((v) => String(v.labels.hash));

describe('the control plane publishes every change as one snapshot, counted in one place', () => {
  beforeEach(() => {
    configReloadsTotal.reset();
    configInfo.reset();
  });

  it('a reload: one snapshot with the new config, a success and the live hash', async () => {
    const { liveConfig, published } = setup();
    const before = liveConfig.snapshot();
    const next = upstreams('10.0.0.2:80');
    const table = compileRoutingTable(next);
    liveConfig.publish(table, { config: next, via: { source: 'upstreams.yaml', origin: FILE } });
    assert.equal(published.length, 1);
    assert.equal(published[0]?.[0].table, table);
    assert.equal(published[0]?.[0].upstreams, next);
    assert.equal(published[0]?.[1], before);
    assert.equal(liveConfig.table(), table);
    assert.equal(await count('upstreams.yaml', 'success'), 1);
    assert.deepEqual(await liveHashes(), [table.hash]);
  });

  it('a rebuild (endpoints) or a new masterkey: a snapshot, no reload counted, the config kept', async () => {
    const { liveConfig, published, setMasterkey } = setup();
    const config = liveConfig.snapshot().upstreams;
    const rebuilt = compileRoutingTable(config);
    liveConfig.publish(rebuilt);
    setMasterkey('key-two');
    liveConfig.publish(liveConfig.table());
    assert.equal(published.length, 2);
    assert.equal(published[0]?.[0].table, rebuilt);
    assert.equal(published[1]?.[0].table, rebuilt, 'the same table: a data plane swaps nothing');
    assert.equal(published[1]?.[0].masterkey, 'key-two');
    assert.ok(published.every(([next]) => next.upstreams === config));
    assert.equal(await count('upstreams.yaml', 'success'), 0);
    assert.deepEqual(await liveHashes(), []);
  });

  it('a refused reload: no snapshot, a failure counted', async () => {
    const { liveConfig, published } = setup();
    const before = liveConfig.snapshot();
    liveConfig.refused({ source: 'upstreams.yaml', origin: FILE }, [`${FILE}:1:1: broken`]);
    assert.equal(published.length, 0);
    assert.equal(liveConfig.snapshot(), before);
    assert.equal(await count('upstreams.yaml', 'failure'), 1);
  });

  it('the start: loaded, live hash published, both results at zero', async () => {
    const { liveConfig } = setup();
    liveConfig.recordStart();
    assert.deepEqual(await liveHashes(), [liveConfig.table().hash]);
    assert.equal(await count('upstreams.yaml', 'success'), 0);
    assert.equal(await count('upstreams.yaml', 'failure'), 0);
  });
});
