/**
 * Config files are bounded input (docs/security.md, "Config files"): a few KB of YAML anchors must
 * not stand for a routing table of millions of routes, on the command line or on hot reload, and a
 * refused reload keeps the old config serving while the admin port answers.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAX_COMPILED_SIZE } from '../../src/config/validate-upstreams.ts';
import { MAX_CONFIG_BYTES } from '../../src/config/yaml-reader.ts';
import { configMap, type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { MAIN_JS, request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/** The review's file: one 120-path block anchored once and reused by alias for 119 more hosts. */
function anchoredHosts(hosts = 120, paths = 120): string {
  const lines = ['upstreams:', '  h0.example.com:', '    paths: &block'];
  for (let i = 0; i < paths; i++) lines.push(`      /p${i}: {servers: ["127.0.0.1:1"]}`);
  for (let h = 1; h < hosts; h++) lines.push(`  h${h}.example.com: {paths: *block}`);
  return `${lines.join('\n')}\n`;
}

/** Nested anchors, each level nine uses of the one before: 9^10 servers from 700 bytes. */
function laughs(): string {
  const nine = (name: string) => `[${Array(9).fill(`*${name}`).join(', ')}]`;
  const lines = ['upstreams:', '  x.test:', '    paths:'];
  lines.push(`      /a: {servers: &a [${Array(9).fill('"127.0.0.1:1"').join(', ')}]}`);
  for (let i = 1; i < 10; i++) {
    const name = String.fromCharCode(97 + i);
    lines.push(`      /${name}: {servers: &${name} ${nine(String.fromCharCode(96 + i))}}`);
  }
  return `${lines.join('\n')}\n`;
}

function validate(dir: string) {
  const result = spawnSync(process.execPath, [MAIN_JS, 'validate', '--config', join(dir, 'main.yaml')], {
    encoding: 'utf8',
    env: { ...process.env, TOLLGATE_CONFIG: '' },
    timeout: 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('tollgate validate: bounded config files', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-bounds-'));
    await writeFile(
      join(dir, 'main.yaml'),
      'proxy_address_http: "127.0.0.1:0"\nmasterkey: bounds-test-key\n',
    );
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const refused = async (upstreams: string, message: RegExp) => {
    await writeFile(join(dir, 'upstreams.yaml'), upstreams);
    const result = validate(dir);
    assert.equal(result.code, 1, `not refused: ${result.stdout}${result.stderr}`);
    assert.match(result.stderr, message);
    assert.equal(result.stdout, '');
  };

  it('refuses the anchored block reused by 119 hosts, naming the file', () =>
    refused(
      anchoredHosts(),
      /\/upstreams\.yaml:\d+:\d+: .*aliases \(\*name\) are used more than 100 times/m,
    ));

  it('refuses nested anchors whose expansion explodes', () =>
    refused(laughs(), /\/upstreams\.yaml:\d+:\d+: .*more than 300000 YAML nodes once its aliases/m));

  it(`refuses a config compiling to more than ${MAX_COMPILED_SIZE} route servers`, async () => {
    const servers = Array.from({ length: 1000 }, (_, i) => `"10.0.${i >> 8}.${i & 255}:80"`).join(', ');
    const lines = ['upstreams:', '  x.test:', '    paths:', `      /p0: {servers: &s [${servers}]}`];
    const paths = Math.floor(MAX_COMPILED_SIZE / 1000) + 1;
    for (let i = 1; i < paths; i++) lines.push(`      /p${i}: {servers: *s}`);
    await refused(
      `${lines.join('\n')}\n`,
      new RegExp(
        `/upstreams\\.yaml:1:1: upstreams: the routing table would hold ${paths * 1000} route servers`,
        'm',
      ),
    );
  });

  it('refuses a file over the size limit before parsing it', () =>
    refused(
      `# ${'x'.repeat(MAX_CONFIG_BYTES)}\nupstreams: {}\n`,
      /\/upstreams\.yaml: the file is larger than/m,
    ));

  it('the same limits apply to main.yaml', async () => {
    await writeFile(
      join(dir, 'upstreams.yaml'),
      'upstreams:\n  x.test:\n    paths:\n      /: {servers: ["127.0.0.1:1"]}\n',
    );
    const main = [
      'proxy_address_http: "127.0.0.1:0"',
      'masterkey: bounds-test-key',
      'x: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]',
    ];
    for (let i = 0; i < 101; i++) main.push(`y${i}: *a`);
    await writeFile(join(dir, 'main.yaml'), `${main.join('\n')}\n`);
    const result = validate(dir);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /\/main\.yaml:\d+:\d+: .*aliases \(\*name\) are used more than 100 times/m);
    await writeFile(
      join(dir, 'main.yaml'),
      'proxy_address_http: "127.0.0.1:0"\nmasterkey: bounds-test-key\n',
    );
  });
});

describe('hot reload of a refused anchors file', () => {
  let tollgate: Tollgate;
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream({ name: 'old' });
    tollgate = await startTollgate({
      main: { access_log: false },
      upstreams: {
        upstreams: { 'app.test': { paths: { '/': { servers: [`127.0.0.1:${upstream.port}`] } } } },
      },
    });
  });
  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
  });

  it('is refused with the file named; the old config serves and the admin port answers throughout', async () => {
    let probing = true;
    const probes: number[] = [];
    const probe = (async () => {
      while (probing) probes.push((await request(`${tollgate.adminUrl}/healthz`)).status);
    })();
    await tollgate.writeUpstreams(anchoredHosts());
    await waitFor(
      async () => reloadCount(await tollgate.metrics(), 'upstreams.yaml', 'failure') >= 1,
      20_000,
    );
    probing = false;
    await probe;
    assert.ok(probes.length > 0 && probes.every((status) => status === 200), `probes: ${probes}`);
    const failure = tollgate.logs().find((l) => JSON.stringify(l).includes('are used more than 100 times'));
    assert.ok(failure, 'the refusal is logged');
    assert.match(JSON.stringify(failure), /upstreams\.yaml:\d+:\d+/);
    const res = await request(`${tollgate.proxyUrl}/`, { headers: { host: 'app.test' } });
    assert.equal(res.status, 200);
    assert.equal(res.json().server, 'old');
    assert.equal(tollgate.child.exitCode, null);
  });
});

describe('the same bounds on upstreams.yaml from a ConfigMap', () => {
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let upstream: Upstream;
  const put = (text: string) =>
    api.apply(configMap({ name: 'routes', namespace: 'apps', data: { 'upstreams.yaml': text } }));
  const routes = () =>
    `upstreams:\n  app.test:\n    paths:\n      /: {servers: ["127.0.0.1:${upstream.port}"]}\n`;

  before(async () => {
    upstream = await startUpstream({ name: 'old' });
    api = await startFakeKubeApi();
    put(routes());
    dir = await mkdtemp(join(tmpdir(), 'tollgate-bounds-cm-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps'), upstreams_configmap: 'routes' },
      },
      upstreams: routes(),
      env: { KUBECONFIG: '' },
    });
  });
  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await upstream?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the anchors file is refused, named after the ConfigMap; the old config serves', async () => {
    put(anchoredHosts());
    await waitFor(
      async () => reloadCount(await tollgate.metrics(), 'upstreams.yaml', 'failure') >= 1,
      20_000,
    );
    assert.ok(
      tollgate
        .logs()
        .some((l) => /^configmap\/apps\/routes\/upstreams\.yaml:\d+:\d+: YAML aliases/.test(String(l.msg))),
      'the refusal names the ConfigMap',
    );
    assert.equal((await request(`${tollgate.adminUrl}/healthz`)).status, 200);
    const res = await request(`${tollgate.proxyUrl}/`, { headers: { host: 'app.test' } });
    assert.equal(res.json().server, 'old');
  });
});
