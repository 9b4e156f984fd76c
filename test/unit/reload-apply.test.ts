import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, beforeEach, describe, it } from 'node:test';
import { parseMainConfig, parseUpstreamsConfig, sha256Hex } from '../../src/config/load.ts';
import type { MainConfig } from '../../src/config/types.ts';
import { createLiveConfig } from '../../src/control-plane/live-config.ts';
import { createLogger } from '../../src/log.ts';
import { configInfo, configLastReloadSuccess, configReloadsTotal } from '../../src/observe/metrics.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import type { RoutingTable } from '../../src/routing/types.ts';
import { createRuntime, type Runtime } from '../../src/runtime.ts';
import { createUpstreamsApplier } from '../../src/sources/apply-upstreams.ts';
import type { FileSnapshot } from '../../src/sources/files.ts';
import { createMasterkeySource } from '../../src/sources/masterkey.ts';
import { watchRuntimeFiles } from '../../src/sources/runtime-files.ts';

const UPSTREAMS_FILE = '/etc/tollgate/upstreams.yaml';

const routesTo = (server: string, host = 'app.test') =>
  `provider: file\nupstreams:\n  ${host}:\n    paths:\n      "/":\n        servers: ["${server}"]\n`;

const content = (text: string): FileSnapshot => ({ kind: 'content', text, hash: sha256Hex(text) });

function mainConfig(extra = '', dir = '/etc/tollgate'): MainConfig {
  const parsed = parseMainConfig(`upstreams_conf: upstreams.yaml\n${extra}`, join(dir, 'main.yaml'));
  assert.ok(parsed.ok, JSON.stringify(!parsed.ok && parsed.issues));
  return parsed.value;
}

function tableOf(text: string): RoutingTable {
  const parsed = parseUpstreamsConfig(text, UPSTREAMS_FILE);
  assert.ok(parsed.ok);
  return compileRoutingTable(parsed.value);
}

/**
 * A control plane's live config, the runtime of a data plane applying its snapshots, and the JSON
 * log lines written through their logger.
 */
function setup(main = mainConfig()) {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('debug', { write: (line: string) => void lines.push(JSON.parse(line)) });
  const initial = parseUpstreamsConfig(routesTo('10.0.0.1:80'), UPSTREAMS_FILE);
  assert.ok(initial.ok);
  const table = compileRoutingTable(initial.value);
  const liveConfig = createLiveConfig({
    main,
    logger,
    table,
    upstreams: initial.value,
    masterkey: () => null,
  });
  const runtime = createRuntime(main, logger, table);
  liveConfig.onSnapshot((next) => runtime.swapTable(next.table));
  const swaps: Array<[string, string]> = [];
  runtime.onTableSwap((next, previous) => swaps.push([next.hash, previous.hash]));
  return { runtime, liveConfig, lines, swaps };
}

async function reloads(file = 'upstreams.yaml'): Promise<{ success: number; failure: number }> {
  const { values } = await configReloadsTotal.get();
  const of = (result: string) =>
    values.find((v) => v.labels.file === file && v.labels.result === result)?.value ?? 0;
  return { success: of('success'), failure: of('failure') };
}

async function liveHashes(): Promise<string[]> {
  return (await configInfo.get()).values.map((v) => String(v.labels.hash));
}

const serverOf = (runtime: Runtime) => runtime.table().match('app.test', '/')?.servers[0]?.address;

describe('createUpstreamsApplier', () => {
  beforeEach(() => {
    configReloadsTotal.reset();
    configInfo.reset();
    configLastReloadSuccess.reset();
  });

  it('swaps in a valid config and records it as live', async () => {
    const { runtime, liveConfig, lines, swaps } = setup();
    const before = runtime.table();
    const text = routesTo('10.0.0.2:80');
    let reloaded: RoutingTable | null = null;
    const reloader = createUpstreamsApplier({ liveConfig, onReloaded: (table) => (reloaded = table) });

    const outcome = reloader.apply(content(text), 'test');
    // The published identity is the compiled table's, never the sha256 of the file's bytes.
    const identity = tableOf(text).hash;
    assert.notEqual(identity, sha256Hex(text));
    assert.deepEqual(outcome, { ok: true, hash: identity });
    assert.equal(serverOf(runtime), '10.0.0.2:80');
    assert.equal(runtime.table().hash, identity);
    assert.equal(reloaded, runtime.table());
    assert.deepEqual(swaps, [[identity, before.hash]]);
    // The previous table is untouched: a request holding it keeps its route.
    assert.equal(before.match('app.test', '/')?.servers[0]?.address, '10.0.0.1:80');

    assert.deepEqual(await reloads(), { success: 1, failure: 0 });
    assert.deepEqual(await liveHashes(), [identity]);
    const [stamp] = (await configLastReloadSuccess.get()).values;
    assert.ok(stamp && Math.abs(stamp.value - Date.now() / 1000) < 5);
    const line = lines.find((l) => l.msg === 'upstreams.yaml reloaded');
    assert.equal(line?.hash, identity);
    assert.equal(line?.previous_hash, before.hash);
    assert.equal(line?.trigger, 'test');
  });

  it('rejects invalid YAML with file:line, counts a failure and keeps the old table', async () => {
    const { runtime, liveConfig, lines, swaps } = setup();
    const before = runtime.table();
    const outcome = createUpstreamsApplier({ liveConfig }).apply(
      content('upstreams:\n  app.test: [unclosed\n'),
    );
    assert.equal(outcome.ok, false);
    assert.equal(runtime.table(), before);
    assert.equal(swaps.length, 0);
    assert.deepEqual(await reloads(), { success: 0, failure: 1 });
    assert.ok(!outcome.ok && outcome.messages.every((m) => m.startsWith(`${UPSTREAMS_FILE}:`)));
    assert.match(
      outcome.ok ? '' : (outcome.messages[0] ?? ''),
      /^\/etc\/tollgate\/upstreams\.yaml:\d+:\d+: /,
    );
    const summary = lines.find(
      (l) => l.msg === 'upstreams.yaml not reloaded; the previous config keeps serving',
    );
    assert.equal(summary?.live_hash, before.hash);
  });

  it('logs one line per validation problem naming file, line and YAML path', async () => {
    const { runtime, liveConfig, lines } = setup();
    const text = [
      'provider: file',
      'upstreams:',
      '  app.test:',
      '    paths:',
      '      "/":',
      '        servers: ["10.0.0.2:80", "not an address"]',
      '        authorisation: {type: basic, creds: "a:b"}',
      '',
    ].join('\n');
    const outcome = createUpstreamsApplier({ liveConfig }).apply(content(text));
    assert.equal(outcome.ok, false);
    assert.equal(serverOf(runtime), '10.0.0.1:80');
    const problems = lines.filter((l) => l.level === 'error' && typeof l.line === 'number');
    assert.equal(problems.length, 2, JSON.stringify(problems));
    assert.deepEqual(
      problems.map((p) => [p.line, p.path]),
      [
        [6, 'upstreams.app.test.paths./.servers[1]'],
        [7, 'upstreams.app.test.paths./.authorisation'],
      ],
    );
    for (const p of problems)
      assert.match(String(p.msg), /^\/etc\/tollgate\/upstreams\.yaml:\d+:\d+: upstreams\./);
    assert.deepEqual(await reloads(), { success: 0, failure: 1 });
  });

  it('applies the cross-file rule: a masterkey differing from main.yaml is rejected', async () => {
    const { runtime, liveConfig } = setup(mainConfig('masterkey: one-secret\n'));
    const outcome = createUpstreamsApplier({ liveConfig }).apply(
      content(`masterkey: another-secret\n${routesTo('10.0.0.2:80')}`),
    );
    assert.equal(outcome.ok, false);
    assert.ok(!outcome.ok && /masterkey differs/.test(outcome.messages.join()));
    assert.ok(!outcome.ok && !outcome.messages.join().includes('secret'), 'secrets never reach messages');
    assert.equal(serverOf(runtime), '10.0.0.1:80');
  });

  it('rejects a config that validates but does not compile (two keys for one host)', async () => {
    const { runtime, liveConfig } = setup();
    const text = `${routesTo('10.0.0.2:80', 'app.test')}  APP.test:\n    paths:\n      "/":\n        servers: ["10.0.0.3:80"]\n`;
    const outcome = createUpstreamsApplier({ liveConfig }).apply(content(text));
    assert.equal(outcome.ok, false, JSON.stringify(outcome));
    assert.equal(serverOf(runtime), '10.0.0.1:80');
    assert.deepEqual(await reloads(), { success: 0, failure: 1 });
  });

  it('runs beforeSwap on a valid config only; a throw rejects the reload', async () => {
    const { runtime, liveConfig, lines } = setup();
    const seen: Array<string | null> = [];
    const reloader = createUpstreamsApplier({
      liveConfig,
      beforeSwap: (config) => {
        seen.push(config.masterkey);
        if (config.masterkey === 'refused-value') throw new Error('the masterkey sources disagree');
      },
    });
    assert.equal(reloader.apply(content('upstreams: [broken')).ok, false);
    assert.deepEqual(seen, [], 'not called for an invalid file');

    const outcome = reloader.apply(content(`masterkey: refused-value\n${routesTo('10.0.0.2:80')}`));
    assert.equal(outcome.ok, false);
    assert.equal(serverOf(runtime), '10.0.0.1:80');
    assert.ok(lines.some((l) => l.msg === `${UPSTREAMS_FILE}: the masterkey sources disagree`));
    assert.ok(!JSON.stringify(lines).includes('refused-value'));

    assert.equal(reloader.apply(content(`masterkey: accepted\n${routesTo('10.0.0.3:80')}`)).ok, true);
    assert.deepEqual(seen, ['refused-value', 'accepted']);
    assert.equal(serverOf(runtime), '10.0.0.3:80');
    assert.deepEqual(await reloads(), { success: 1, failure: 2 });
  });

  it('keeps the old table when the file is missing or empty, and says why', async () => {
    const { runtime, liveConfig, lines } = setup();
    const reloader = createUpstreamsApplier({ liveConfig });
    const outcome = reloader.apply({ kind: 'unavailable', reason: 'the file does not exist' }, 'fs.watch');
    assert.deepEqual(outcome, {
      ok: false,
      reason: 'unavailable',
      messages: ['/etc/tollgate/upstreams.yaml: the file does not exist'],
    });
    assert.equal(serverOf(runtime), '10.0.0.1:80');
    assert.deepEqual(await reloads(), { success: 0, failure: 1 });
    assert.equal(lines.at(-1)?.reason, 'the file does not exist');
  });
});

describe('createUpstreamsApplier: reapply', () => {
  beforeEach(() => configReloadsTotal.reset());

  it('applies the live content again, counted under the file that changed; null when it is unknown', async () => {
    const { runtime, liveConfig, lines } = setup();
    assert.equal(createUpstreamsApplier({ liveConfig }).reapply('jwks_file changed', 'jwks_file'), null);

    const text = routesTo('10.0.0.1:80');
    const before = runtime.table();
    const applier = createUpstreamsApplier({ liveConfig, live: content(text) });
    assert.deepEqual(applier.reapply('jwks_file changed', 'jwks_file'), { ok: true, hash: before.hash });
    assert.notEqual(runtime.table(), before, 'a fresh table, so policies are rebuilt');
    assert.equal(runtime.table().sourceHash, sha256Hex(text));
    assert.deepEqual(await reloads('jwks_file'), { success: 1, failure: 0 });
    assert.deepEqual(await reloads(), { success: 0, failure: 0 });
    assert.equal(lines.find((l) => l.msg === 'upstreams.yaml reloaded')?.trigger, 'jwks_file changed');

    // After a reload, the reloaded content is what reapply applies.
    const next = routesTo('10.0.0.7:80');
    assert.equal(applier.apply(content(next), 'fs.watch').ok, true);
    const reloaded = runtime.table();
    assert.deepEqual(applier.reapply('again', 'jwks_file'), { ok: true, hash: reloaded.hash });
    assert.notEqual(runtime.table(), reloaded);
    assert.equal(runtime.table().sourceHash, sha256Hex(next));
    assert.equal(serverOf(runtime), '10.0.0.7:80');
  });
});

describe('watchRuntimeFiles', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('publishes the startup config, reloads upstreams.yaml and only warns about main.yaml', async () => {
    configReloadsTotal.reset();
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-hot-'));
    dirs.push(dir);
    await writeFile(join(dir, 'main.yaml'), 'upstreams_conf: upstreams.yaml\n');
    await writeFile(join(dir, 'upstreams.yaml'), routesTo('10.0.0.1:80'));
    const { runtime, liveConfig, lines } = setup(mainConfig('', dir));
    const hot = await watchRuntimeFiles({
      liveConfig,
      masterkeys: createMasterkeySource(runtime.main, null, {}),
      quietMs: 30,
      pollIntervalMs: 60_000,
    });
    try {
      assert.deepEqual(await liveHashes(), [runtime.table().hash]);
      assert.deepEqual(await reloads(), { success: 0, failure: 0 });

      await writeFile(join(dir, 'upstreams.yaml'), routesTo('10.0.0.9:80'));
      hot.trigger('SIGHUP');
      await new Promise((r) => setTimeout(r, 100));
      await hot.settled();
      assert.equal(serverOf(runtime), '10.0.0.9:80');
      assert.deepEqual(await reloads(), { success: 1, failure: 0 });

      await writeFile(join(dir, 'main.yaml'), 'upstreams_conf: upstreams.yaml\nlog_level: debug\n');
      hot.trigger('SIGHUP');
      await new Promise((r) => setTimeout(r, 100));
      await hot.settled();
      assert.ok(lines.some((l) => l.level === 'warn' && /restart tollgate to apply it/.test(String(l.msg))));
      assert.deepEqual(await reloads(), { success: 1, failure: 0 });
      const { values } = await configReloadsTotal.get();
      const restart = values.find(
        (v) => v.labels.file === 'main.yaml' && v.labels.result === 'restart_required',
      );
      assert.equal(restart?.value, 1);
    } finally {
      await hot.close();
    }
  });
});
