/**
 * SIGTERM during start-up, in the image: node is PID 1 there, and PID 1 ignores a signal it has no
 * handler for, so a handler installed only after start-up would let a pod stopped while loading its
 * config go on to serve until the kubelet's SIGKILL. The config load is held open deterministically:
 * upstreams.yaml is a named pipe that the test writes only after sending SIGTERM.
 *
 * Needs a Docker engine (.ci/docker-setup.sh starts one).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { constants } from 'node:fs';
import { chmod, type FileHandle, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { freePort, waitFor } from '../helpers/tollgate.ts';
import { buildImage, docker, dockerUnavailableReason } from './docker.ts';

const inCI = process.env.CI === 'true' || process.env.CI === '1';
const unavailable = await dockerUnavailableReason();

if (unavailable) {
  test('start-up signal test needs a Docker engine', { skip: inCI ? false : unavailable }, () => {
    assert.fail(`${unavailable}. CI is set, so this fails instead of skipping.`);
  });
} else {
  describe('SIGTERM while the image is still loading its config', { timeout: 900_000 }, () => {
    let image: string;
    let dir: string;
    let containerId = '';

    before(
      async () => {
        ({ image } = await buildImage());
        dir = await mkdtemp(join(tmpdir(), 'tollgate-startup-signal-'));
      },
      { timeout: 600_000 },
    );
    after(async () => {
      if (containerId) await docker(['rm', '--force', containerId]);
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    test('stops the start: exit 0, never ready, never serving', async () => {
      const admin = await freePort();
      await writeFile(
        join(dir, 'main.yaml'),
        stringify({
          proxy_address_http: `127.0.0.1:${await freePort()}`,
          config_address: `127.0.0.1:${await freePort()}`,
          admin_address: `127.0.0.1:${admin}`,
          shutdown_delay_seconds: 1,
        }),
      );
      execFileSync('mkfifo', ['-m', '0666', join(dir, 'upstreams.yaml')]);
      await chmod(dir, 0o755);

      const started = await docker([
        'run',
        '--detach',
        '--network',
        'host',
        '--read-only',
        '--volume',
        `${dir}:/etc/tollgate:ro`,
        image,
      ]);
      assert.equal(started.code, 0, started.stderr);
      containerId = started.stdout.trim();
      // A non-blocking open for writing fails (ENXIO) until a reader has the pipe open: success means
      // the start-up is reading upstreams.yaml. Holding this end open keeps that read waiting.
      const fifo = join(dir, 'upstreams.yaml');
      let writer: FileHandle | undefined;
      await waitFor(async () => {
        try {
          writer = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
          return true;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENXIO') return false;
          throw error;
        }
      }, 30_000);
      assert.ok(writer);
      assert.equal(
        await fetch(`http://127.0.0.1:${admin}/readyz`).catch(() => null),
        null,
        'no listener yet',
      );

      const killed = await docker(['kill', '--signal', 'SIGTERM', containerId]);
      assert.equal(killed.code, 0, killed.stderr);
      // Let the load finish: a process that missed the signal would now start serving.
      await writer.write(
        stringify({ upstreams: { DEFAULT: { paths: { '/': { servers: ['127.0.0.1:9'] } } } } }),
      );
      await writer.close();
      await waitFor(
        async () =>
          (await docker(['inspect', '--format', '{{.State.Running}}', containerId])).stdout.trim() ===
          'false',
        30_000,
      ).catch(() => assert.fail('the container kept running after SIGTERM during start-up'));
      const state = await docker(['inspect', '--format', '{{.State.ExitCode}}', containerId]);
      assert.equal(state.stdout.trim(), '0');
      const logs = await docker(['logs', containerId]);
      assert.doesNotMatch(`${logs.stdout}${logs.stderr}`, /tollgate ready|listening/i);
    });
  });
}
