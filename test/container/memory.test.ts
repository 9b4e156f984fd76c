/**
 * The image under the Helm chart's memory limit (`docker run --memory`, the same cgroup limit the
 * kubelet sets) with the benchmark's load (wrk, 64 keep-alive connections, loopback, bounded time),
 * as one process and with `workers: 2` (a primary and two workers, under the limit the chart raises
 * for the extra worker): no OOM kill, still ready afterwards, and the container's resident memory
 * (every process: the cgroup's rss) well under the limit. The figures are printed as test
 * diagnostics; docs/workers.md#memory records them.
 *
 * Needs a Docker engine and wrk (.ci/run installs both). Without them the suite fails when CI is set,
 * and is skipped with the reason otherwise.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmod, readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { find, helmTemplate, tollgateContainer } from '../deploy/manifests.ts';
import { type ConfigMapVolume, createConfigMapVolume } from '../helpers/configmap.ts';
import { freePort, waitFor } from '../helpers/tollgate.ts';
import { buildImage, docker, dockerUnavailableReason } from './docker.ts';

const run = promisify(execFile);
const inCI = process.env.CI === 'true' || process.env.CI === '1';
const LOAD_SECONDS = 15;
const CONNECTIONS = 64;

const hasWrk = spawnSync('wrk', ['--version']).error === undefined;
const unavailable =
  (await dockerUnavailableReason()) ?? (hasWrk ? null : 'wrk is not installed (apt-get install wrk)');

/** "256Mi" → bytes. */
function quantityBytes(quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)$/.exec(quantity);
  assert.ok(match, `unexpected memory quantity ${quantity}`);
  return Number(match[1]) * 1024 ** { Ki: 1, Mi: 2, Gi: 3 }[match[2] as 'Ki' | 'Mi' | 'Gi'];
}

const gauge = (metrics: string, name: string) =>
  Number(new RegExp(`^${name} (\\S+)`, 'm').exec(metrics)?.[1]);

/**
 * Resident memory of every process in the container, from its cgroup (v1 `total_rss`, v2 `anon`);
 * null when the cgroup cannot be read from here.
 */
async function containerResidentBytes(id: string): Promise<number | null> {
  const candidates = [
    [`/sys/fs/cgroup/memory/docker/${id}/memory.stat`, /^total_rss (\d+)$/m],
    [`/sys/fs/cgroup/system.slice/docker-${id}.scope/memory.stat`, /^anon (\d+)$/m],
  ] as const;
  for (const [path, pattern] of candidates) {
    const text = await readFile(path, 'utf8').catch(() => null);
    const match = text === null ? null : pattern.exec(text);
    if (match) return Number(match[1]);
  }
  return null;
}

if (unavailable) {
  test('memory container test needs Docker and wrk', { skip: inCI ? false : unavailable }, () => {
    assert.fail(`${unavailable}. CI is set, so this fails instead of skipping.`);
  });
} else {
  for (const workers of [1, 2]) memoryUnderLoad(workers);
}

function memoryUnderLoad(workers: number): void {
  describe(`the image under the chart’s memory limit with workers: ${workers}, with benchmark load`, {
    timeout: 900_000,
  }, () => {
    let image: string;
    let upstream: http.Server | undefined;
    let volume: ConfigMapVolume;
    let containerId = '';
    let limitBytes = 0;
    const urls = { proxy: '', admin: '' };

    before(
      async () => {
        ({ image } = await buildImage());
        // The chart's defaults: its memory limit, its main.yaml (access log on), moved to loopback ports.
        const ports = { proxy: await freePort(), token: await freePort(), admin: await freePort() };
        const manifests = await helmTemplate({
          set: [
            `ports.proxy=${ports.proxy}`,
            `ports.token=${ports.token}`,
            `ports.admin=${ports.admin}`,
            `config.workers=${workers}`,
          ],
        });
        const deployment = find(manifests, 'Deployment');
        limitBytes = quantityBytes(tollgateContainer(deployment.spec.template.spec).resources.limits.memory);
        const main = (find(manifests, 'ConfigMap', 'tollgate').data['main.yaml'] as string).replaceAll(
          '0.0.0.0:',
          '127.0.0.1:',
        );
        // The benchmark's upstream: a fixed 100-byte body, nothing recorded (the load is large).
        upstream = http.createServer((_req, res) => {
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 100 });
          res.end('x'.repeat(100));
        });
        upstream.listen(0, '127.0.0.1');
        await once(upstream, 'listening');
        const upstreamAddress = `127.0.0.1:${(upstream.address() as AddressInfo).port}`;
        volume = await createConfigMapVolume({
          'main.yaml': main,
          'upstreams.yaml': stringify({
            upstreams: { DEFAULT: { paths: { '/': { servers: [upstreamAddress] } } } },
          }),
          masterkey: 'memory-test-masterkey-0123456789\n',
        });
        await chmod(volume.dir, 0o755);
        urls.proxy = `http://127.0.0.1:${ports.proxy}`;
        urls.admin = `http://127.0.0.1:${ports.admin}`;
        const started = await docker([
          'run',
          '--detach',
          '--network',
          'host',
          '--memory',
          String(limitBytes),
          '--memory-swap',
          String(limitBytes),
          '--read-only',
          '--tmpfs',
          '/tmp:rw,noexec,nosuid,size=16m',
          '--cap-drop',
          'ALL',
          '--volume',
          `${volume.dir}:/etc/tollgate:ro`,
          image,
        ]);
        assert.equal(started.code, 0, started.stderr);
        containerId = started.stdout.trim();
        await waitFor(
          async () => (await fetch(`${urls.admin}/readyz`).catch(() => null))?.status === 200,
          30_000,
        );
      },
      { timeout: 600_000 },
    );

    after(async () => {
      if (containerId) await docker(['rm', '--force', containerId]);
      upstream?.closeAllConnections();
      upstream?.close();
      await volume?.remove();
    });

    test('no OOM kill, still ready, resident size under the limit; RSS reported', async (t) => {
      const applied = await docker(['inspect', '--format', '{{.HostConfig.Memory}}', containerId]);
      assert.equal(Number(applied.stdout.trim()), limitBytes, 'the container runs under the chart limit');

      const samples: Array<{ rss: number; heapUsed: number; heapTotal: number }> = [];
      let loading = true;
      const sampler = (async () => {
        while (loading) {
          const text = await (await fetch(`${urls.admin}/metrics`)).text().catch(() => '');
          // The whole container (primary and workers); the served process's own figure otherwise.
          const container = await containerResidentBytes(containerId);
          if (text) {
            samples.push({
              rss: container ?? gauge(text, 'process_resident_memory_bytes'),
              heapUsed: gauge(text, 'nodejs_heap_size_used_bytes'),
              heapTotal: gauge(text, 'nodejs_heap_size_total_bytes'),
            });
          }
          await new Promise((r) => setTimeout(r, 500));
        }
      })();
      const { stdout } = await run(
        'wrk',
        ['-t1', `-c${CONNECTIONS}`, `-d${LOAD_SECONDS}s`, '--latency', `${urls.proxy}/`],
        { timeout: (LOAD_SECONDS + 60) * 1000 },
      );
      loading = false;
      await sampler;

      const requests = Number(/(\d+) requests in/.exec(stdout)?.[1]);
      const state = await docker([
        'inspect',
        '--format',
        '{{.State.OOMKilled}} {{.State.Running}}',
        containerId,
      ]);
      assert.equal(state.stdout.trim(), 'false true', 'the container was OOM-killed or stopped');
      assert.equal((await fetch(`${urls.admin}/readyz`)).status, 200);
      assert.ok(requests > 0, stdout);
      assert.ok(samples.length > 0, 'no metrics sample');

      const mb = (bytes: number) => (bytes / 1048576).toFixed(0);
      const peak = Math.max(...samples.map((s) => s.rss));
      const last = samples.at(-1) as (typeof samples)[number];
      const peakHeap = Math.max(...samples.map((s) => s.heapTotal));
      t.diagnostic(
        `workers: ${workers}: ${requests} requests in ${LOAD_SECONDS} s over ${CONNECTIONS} connections under a ` +
          `${mb(limitBytes)} MiB limit: container RSS peak ${mb(peak)} MiB, last ${mb(last.rss)} MiB; ` +
          `JS heap used ${mb(last.heapUsed)} MiB, total peak ${mb(peakHeap)} MiB (summed over processes)`,
      );
      // Headroom for a burst beyond this load: the process stays under three quarters of the limit.
      assert.ok(
        peak < limitBytes * 0.75,
        `RSS peak ${mb(peak)} MiB is too close to the ${mb(limitBytes)} MiB limit`,
      );
    });
  });
}
