/**
 * The container image, end to end: built from the Dockerfile, started by testcontainers with host
 * networking, a read-only root filesystem and /etc/tollgate mounted from a directory laid out like a
 * ConfigMap volume (main.yaml rendered by the Helm chart, upstreams.yaml, the masterkey file).
 *
 * Needs a Docker engine (.ci/docker-setup.sh starts one). Without one the suite fails when CI is
 * set, and is skipped with the reason otherwise.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { V8_LAUNCH_FLAGS } from '../../src/v8-launch-flags.ts';
import { find, helmTemplate } from '../deploy/manifests.ts';
import { type ConfigMapVolume, createConfigMapVolume } from '../helpers/configmap.ts';
import { freePort, request, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';
import { buildImage, docker, dockerUnavailableReason, NODE_IN_IMAGE } from './docker.ts';

// No reaper: its image cannot be pulled here. Every container is removed in `after`.
process.env.TESTCONTAINERS_RYUK_DISABLED ??= 'true';
// Containers share the host's network, so the "docker host" is this machine; without the override
// testcontainers looks for the bridge network's gateway, and this engine runs without a bridge.
process.env.TESTCONTAINERS_HOST_OVERRIDE ??= '127.0.0.1';
const { GenericContainer } = await import('testcontainers');
type Started = Awaited<ReturnType<InstanceType<typeof GenericContainer>['start']>>;

/** testcontainers has no switch for a read-only root filesystem; HostConfig has. */
class TollgateContainer extends GenericContainer {
  withReadOnlyRootFilesystem(): this {
    this.hostConfig.ReadonlyRootfs = true;
    return this;
  }
}

const SHUTDOWN_DELAY_SECONDS = 1;
const SHUTDOWN_GRACE_SECONDS = 5;
const inCI = process.env.CI === 'true' || process.env.CI === '1';
const unavailable = await dockerUnavailableReason();

/** main.yaml exactly as the Helm chart renders it, with listeners moved to free loopback ports. */
async function chartMainYaml(ports: { proxy: number; token: number; admin: number }): Promise<string> {
  const manifests = await helmTemplate({
    set: [
      `ports.proxy=${ports.proxy}`,
      `ports.token=${ports.token}`,
      `ports.admin=${ports.admin}`,
      `config.shutdownDelaySeconds=${SHUTDOWN_DELAY_SECONDS}`,
      `config.shutdownGraceSeconds=${SHUTDOWN_GRACE_SECONDS}`,
    ],
  });
  const main = find(manifests, 'ConfigMap', 'tollgate').data['main.yaml'] as string;
  assert.match(main, /masterkey_file: masterkey/);
  // The container shares the host's network here: listen on loopback, not on every interface.
  assert.equal(main.match(/0\.0\.0\.0:/g)?.length, 3);
  return main.replaceAll('0.0.0.0:', '127.0.0.1:');
}

const routes = (root: Upstream, jwt: Upstream, slow: Upstream) =>
  stringify({
    provider: 'file',
    upstreams: {
      DEFAULT: {
        paths: {
          '/': { servers: [root.address] },
          '/private': { servers: [jwt.address], authorization: { type: 'jwt' } },
          '/slow': { servers: [slow.address] },
        },
      },
    },
  });

if (unavailable) {
  test('container tests need a Docker engine', { skip: inCI ? false : unavailable }, () => {
    assert.fail(`${unavailable}. CI is set, so this fails instead of skipping the container tests.`);
  });
} else {
  describe('tollgate container image', { timeout: 900_000 }, () => {
    let image: string;
    let upstreamA: Upstream;
    let upstreamB: Upstream;
    let slow: Upstream;
    let volume: ConfigMapVolume;
    let container: Started | undefined;
    let mainYaml: string;
    let masterkey: string;
    let logs = '';
    const urls = { proxy: '', token: '', admin: '' };

    const diagnostics = () => `\n--- container output ---\n${logs.trim().split('\n').slice(-30).join('\n')}`;
    const payload = (upstreamsYaml: string) => ({
      'main.yaml': mainYaml,
      'upstreams.yaml': upstreamsYaml,
      masterkey,
    });

    before(
      async () => {
        ({ image } = await buildImage());
        upstreamA = await startUpstream({ name: 'a' });
        upstreamB = await startUpstream({ name: 'b' });
        slow = await startUpstream({
          name: 'slow',
          handler: async (_req, res) => {
            await new Promise((r) => setTimeout(r, 1_500));
            res.end('slow done');
          },
        });
        const ports = { proxy: await freePort(), token: await freePort(), admin: await freePort() };
        urls.proxy = `http://127.0.0.1:${ports.proxy}`;
        urls.token = `http://127.0.0.1:${ports.token}`;
        urls.admin = `http://127.0.0.1:${ports.admin}`;
        mainYaml = await chartMainYaml(ports);
        masterkey = `${randomBytes(24).toString('hex')}\n`;

        volume = await createConfigMapVolume(payload(routes(upstreamA, upstreamA, slow)));
        // The container user (10001) must be able to enter the directory; mkdtemp makes it 0700.
        await chmod(volume.dir, 0o755);

        container = await new TollgateContainer(image)
          .withNetworkMode('host')
          .withReadOnlyRootFilesystem()
          .withDroppedCapabilities('ALL')
          .withSecurityOpt('no-new-privileges')
          .withTmpFs({ '/tmp': 'rw,noexec,nosuid,size=16m' })
          .withBindMounts([{ source: volume.dir, target: '/etc/tollgate', mode: 'ro' }])
          .withLogConsumer((stream: Readable) => {
            stream.on('data', (chunk: Buffer) => {
              logs += chunk.toString('utf8');
            });
          })
          .withStartupTimeout(30_000)
          .start();

        try {
          await waitFor(async () => (await fetch(`${urls.admin}/readyz`)).status === 200, 30_000);
        } catch {
          throw new Error(`the container did not become ready${diagnostics()}`);
        }
      },
      { timeout: 600_000 },
    );

    after(async () => {
      if (container) {
        await container.stop({ timeout: 10_000, remove: false }).catch(() => undefined);
        await docker(['rm', '-f', container.getId()]);
      }
      await Promise.all([upstreamA?.close(), upstreamB?.close(), slow?.close()]);
      if (volume) await volume.remove();
    });

    test('runs as the non-root numeric user, with a read-only root and a writable /tmp only', async () => {
      assert.ok(container);
      const inspect = await docker([
        'inspect',
        '--format',
        '{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}',
        container.getId(),
      ]);
      assert.equal(inspect.stdout.trim(), '10001:10001 true');

      // PID 1 is node itself (no npm, no shell in between), running as 10001 with no capabilities and
      // no way to gain privileges: the Helm chart's securityContext, applied here with docker flags.
      const status = await container.exec([
        NODE_IN_IMAGE,
        '-e',
        "process.stdout.write(require('fs').readFileSync('/proc/1/status','utf8'))",
      ]);
      assert.match(status.output, /^Uid:\s+10001\s+10001\s+10001\s+10001$/m);
      assert.match(status.output, /^Gid:\s+10001\s+10001\s+10001\s+10001$/m);
      assert.match(status.output, /^CapEff:\s+0+$/m);
      assert.match(status.output, /^CapBnd:\s+0+$/m);
      assert.match(status.output, /^NoNewPrivs:\s+1$/m);
      const cmdline = await container.exec([
        NODE_IN_IMAGE,
        '-e',
        "process.stdout.write(require('fs').readFileSync('/proc/1/cmdline','utf8').split('\\0').join(' '))",
      ]);
      // PID 1 is node itself, with the young-generation cap (src/v8-launch-flags.ts).
      assert.ok(
        cmdline.output.startsWith(
          `${NODE_IN_IMAGE} ${V8_LAUNCH_FLAGS.join(' ')} /app/dist/main.js start --config /etc/tollgate/main.yaml`,
        ),
        cmdline.output,
      );

      const probe = `for (const p of ['/app/probe', '/etc/tollgate/probe', '/home/probe', '/tmp/probe']) {
        try { require('fs').writeFileSync(p, 'x'); console.log(p, 'written'); } catch (e) { console.log(p, e.code); } }`;
      const writes = await container.exec([NODE_IN_IMAGE, '-e', probe]);
      assert.match(writes.output, /\/app\/probe EROFS/);
      assert.match(writes.output, /\/etc\/tollgate\/probe EROFS/);
      assert.match(writes.output, /\/home\/probe EROFS/);
      assert.match(writes.output, /\/tmp\/probe written/);
    });

    test('the runtime image is distroless: no shell, no npm, no corepack; every listener port exposed', async () => {
      assert.ok(container);
      const probe = `const fs = require('fs');
        for (const p of ['/bin/sh', '/bin/bash', '/usr/bin/sh', '/bin/busybox', '/usr/local/bin/npm',
          '/usr/local/bin/npx', '/usr/local/bin/corepack', '/usr/local/lib/node_modules', '/usr/bin/env'])
          console.log(p, fs.existsSync(p) ? 'present' : 'absent');
        const bins = ['/bin', '/usr/bin', '/usr/local/bin'].flatMap((d) => { try { return fs.readdirSync(d); } catch { return []; } });
        console.log('executables:', bins.join(' '));`;
      const listing = await container.exec([NODE_IN_IMAGE, '-e', probe]);
      assert.doesNotMatch(listing.output, / present$/m, listing.output);
      assert.match(listing.output, /^executables: (node)?$/m, listing.output);

      const config = await docker(['image', 'inspect', '--format', '{{json .Config}}', image]);
      const { ExposedPorts, Entrypoint, Env } = JSON.parse(config.stdout) as {
        ExposedPorts: Record<string, unknown>;
        Entrypoint: string[];
        Env: string[];
      };
      assert.deepEqual(Object.keys(ExposedPorts).sort(), ['8080/tcp', '8081/tcp', '8443/tcp', '9090/tcp']);
      assert.deepEqual(Entrypoint, [NODE_IN_IMAGE, ...V8_LAUNCH_FLAGS, '/app/dist/main.js']);
      assert.ok(Env.includes('MALLOC_ARENA_MAX=2'), Env.join(' '));
    });

    test('proxies a request to an upstream on the host loopback', async () => {
      const res = await request(`${urls.proxy}/hello?x=1`, { headers: { host: 'anything.example' } });
      assert.equal(res.status, 200, res.body + diagnostics());
      const echoed = res.json<{ server: string; url: string; headers: Record<string, string> }>();
      assert.equal(echoed.server, 'a');
      assert.equal(echoed.url, '/hello?x=1');
      assert.equal(echoed.headers.host, 'anything.example');
    });

    test('issues a token from the mounted masterkey and accepts it on a JWT route', async () => {
      const refused = await request(`${urls.token}/jwt`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ master_key: 'wrong', owner: 'container-test', valid: 5 }),
      });
      assert.equal(refused.status, 403);

      const issued = await request(`${urls.token}/jwt`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ master_key: masterkey.trim(), owner: 'container-test', valid: 5 }),
      });
      assert.equal(issued.status, 200, issued.body + diagnostics());
      const { token } = issued.json<{ token: string }>();
      assert.equal(token.split('.').length, 3);

      const without = await request(`${urls.proxy}/private/data`);
      assert.equal(without.status, 401);
      assert.match(String(without.headers['www-authenticate']), /^Bearer realm="tollgate"/);

      const before = upstreamA.requests.length;
      const withToken = await request(`${urls.proxy}/private/data`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(withToken.status, 200, withToken.body);
      const seen = upstreamA.requests.slice(before).at(-1);
      assert.equal(seen?.headers['x-tollgate-subject'], 'container-test');
      assert.equal(seen?.headers.authorization, undefined, 'the consumed credential is not forwarded');

      const viaQuery = await request(`${urls.proxy}/private/data?tollgatetoken=${token}`);
      assert.equal(viaQuery.status, 200);
      // The access log (container stdout) never carries the token.
      await waitFor(() => logs.includes('/private/data'), 5_000).catch(() => undefined);
      assert.ok(logs.includes('/private/data'), `no access log line for the request${diagnostics()}`);
      assert.equal(logs.includes(token), false, 'the token appears in the container output');
    });

    test('a ConfigMap-style ..data swap of upstreams.yaml takes effect without a restart', async () => {
      assert.ok(container);
      const startedAt = (await docker(['inspect', '--format', '{{.State.StartedAt}}', container.getId()]))
        .stdout;
      await volume.update(payload(routes(upstreamB, upstreamA, slow)));
      await waitFor(
        async () => (await request(`${urls.proxy}/`)).json<{ server: string }>().server === 'b',
        15_000,
      ).catch(() => assert.fail(`routing did not switch to upstream b${diagnostics()}`));
      const after = (
        await docker(['inspect', '--format', '{{.State.StartedAt}} {{.RestartCount}}', container.getId()])
      ).stdout;
      assert.equal(after.trim(), `${startedAt.trim()} 0`, 'the container was not restarted');
      const metrics = await (await fetch(`${urls.admin}/metrics`)).text();
      assert.match(metrics, /^tollgate_config_reloads_total\{[^}]*result="success"[^}]*\} [1-9]/m);
    });

    test('an invalid swap is refused and the previous routing keeps serving', async () => {
      await volume.update(
        payload('provider: file\nupstreams:\n  DEFAULT:\n    paths:\n      "/":\n        servers: []\n'),
      );
      await waitFor(
        async () =>
          /^tollgate_config_reloads_total\{[^}]*result="failure"[^}]*\} [1-9]/m.test(
            await (await fetch(`${urls.admin}/metrics`)).text(),
          ),
        15_000,
      ).catch(() => assert.fail(`no failed reload counted${diagnostics()}`));
      const res = await request(`${urls.proxy}/`);
      assert.equal(res.status, 200);
      assert.equal(res.json<{ server: string }>().server, 'b');
      // Back to a valid routing for the shutdown test.
      await volume.update(payload(routes(upstreamB, upstreamA, slow)));
    });

    test('`validate` in the image reports a broken config with file and line, exit 1', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'tollgate-validate-'));
      try {
        await chmod(dir, 0o755);
        await writeFile(join(dir, 'main.yaml'), mainYaml, { mode: 0o644 });
        await writeFile(join(dir, 'masterkey'), masterkey, { mode: 0o644 });
        const oneShot = (files: string) =>
          docker([
            'run',
            '--rm',
            '--network',
            'none',
            '--read-only',
            '-v',
            `${files}:/etc/tollgate:ro`,
            image,
            'validate',
            '--config',
            '/etc/tollgate/main.yaml',
          ]);

        await writeFile(join(dir, 'upstreams.yaml'), routes(upstreamA, upstreamA, slow), { mode: 0o644 });
        const valid = await oneShot(dir);
        assert.equal(valid.code, 0, valid.stdout + valid.stderr);

        await writeFile(
          join(dir, 'upstreams.yaml'),
          'provider: file\nupstreams:\n  DEFAULT:\n    paths:\n      "/":\n        servers: ["not an address"]\n        authorisation: {type: basic}\n',
          { mode: 0o644 },
        );
        const invalid = await oneShot(dir);
        assert.equal(invalid.code, 1, invalid.stdout + invalid.stderr);
        const output = invalid.stdout + invalid.stderr;
        assert.match(output, /upstreams\.yaml/);
        assert.match(output, /authorisation/);
        assert.match(output, /:\d+/, 'a line number');
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    test('docker stop: readiness goes 503, the in-flight request finishes, exit 0 within the grace period', async () => {
      assert.ok(container);
      const running = container;
      const inFlight = request(`${urls.proxy}/slow`);
      await waitFor(() => slow.requests.length === 1, 5_000);

      const readiness: number[] = [];
      let stopping = true;
      const watchReadiness = (async () => {
        while (stopping) {
          try {
            readiness.push((await fetch(`${urls.admin}/readyz`)).status);
          } catch {
            readiness.push(0); // listener closed
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      })();

      // docker stop's timeout sits just above delay + grace: exiting by itself before it is the test.
      const stopTimeoutMs = (SHUTDOWN_DELAY_SECONDS + SHUTDOWN_GRACE_SECONDS + 2) * 1_000;
      await running.stop({ timeout: stopTimeoutMs, remove: false });
      stopping = false;
      await watchReadiness;

      const answer = await inFlight;
      assert.equal(answer.status, 200, `in-flight request cut: ${answer.body}${diagnostics()}`);
      assert.equal(answer.body, 'slow done');
      assert.ok(
        readiness.includes(503),
        `readiness never answered 503 while stopping: ${readiness.join(',')}`,
      );

      const state = await docker([
        'inspect',
        '--format',
        '{{.State.ExitCode}} {{.State.OOMKilled}}',
        running.getId(),
      ]);
      assert.equal(
        state.stdout.trim(),
        '0 false',
        `exit code 0 expected (137 = killed after the timeout)${diagnostics()}`,
      );
    });
  });
}
