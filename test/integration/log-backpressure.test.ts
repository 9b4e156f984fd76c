import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAIN_JS, waitFor } from '../helpers/tollgate.ts';

/**
 * A stdout nobody reads (a node's log collector fallen behind): Tollgate keeps serving, holds at most
 * LOG_BUFFER_BYTES of log lines, drops and counts the rest, and a SIGTERM still ends the process
 * within the shutdown grace period (docs/observability.md#when-stdout-stalls).
 */

const GRACE_SECONDS = 2;
/** Each 404 access line carries the (normalised) path: long paths fill the buffer in few requests. */
const LONG_PATH = `/${'p'.repeat(8_000)}`;
const REQUESTS = 1_200;

function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: '127.0.0.1', port, path, headers: { host: 'nowhere.test' }, agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
  });
}

describe('logging when stdout stalls', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-stalled-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('drops and counts lines beyond the buffer, keeps serving, and exits on SIGTERM within the grace', async () => {
    await writeFile(
      join(dir, 'main.yaml'),
      [
        'proxy_address_http: "127.0.0.1:0"',
        'config_address: "127.0.0.1:0"',
        'admin_address: "127.0.0.1:0"',
        'shutdown_delay_seconds: 0',
        `shutdown_grace_seconds: ${GRACE_SECONDS}`,
        '',
      ].join('\n'),
    );
    await writeFile(
      join(dir, 'upstreams.yaml'),
      'upstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["127.0.0.1:9"]\n',
    );
    const child = spawn(process.execPath, [MAIN_JS, 'start', '--config', join(dir, 'main.yaml')], {
      env: { ...process.env, TOLLGATE_CONFIG: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    try {
      // Read stdout only until the ready line names the ports; then nobody reads it any more.
      let out = '';
      const onData = (chunk: Buffer) => {
        out += chunk.toString('utf8');
      };
      child.stdout.on('data', onData);
      await waitFor(
        () => out.includes('"tollgate ready"'),
        30_000,
        () => (child.exitCode !== null ? `tollgate exited: ${out}` : null),
      );
      child.stdout.off('data', onData);
      child.stdout.pause();
      const ready = JSON.parse(out.split('\n').find((line) => line.includes('"tollgate ready"')) ?? '{}') as {
        addresses: Record<string, string>;
      };
      const portOf = (address: string | undefined) => Number(String(address).split(':').pop());
      const proxyPort = portOf(ready.addresses.proxy);
      const adminPort = portOf(ready.addresses.admin);

      // Serving goes on while stdout is full: every request is answered.
      for (let sent = 0; sent < REQUESTS; sent += 8) {
        const statuses = await Promise.all(Array.from({ length: 8 }, () => get(proxyPort, LONG_PATH)));
        assert.deepEqual(new Set(statuses), new Set([404]));
      }
      const dropped = async () => {
        const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
        const line = metrics.split('\n').find((l) => l.startsWith('tollgate_log_lines_dropped_total '));
        return Number(line?.split(' ')[1] ?? 0);
      };
      // ~9.6 MB of access lines against a 4 MiB buffer and a pipe of a few hundred KiB.
      await waitFor(async () => (await dropped()) > 0, 10_000);
      assert.ok((await dropped()) < REQUESTS, 'only what did not fit is dropped');

      child.kill('SIGTERM');
      // Without the bound it waits for stdout for ever; the margin is for a loaded machine, the
      // process itself gives the log flush only what is left of the 2 s grace.
      const killer = setTimeout(() => child.kill('SIGKILL'), (GRACE_SECONDS + 20) * 1000);
      const [code, signal] = await exited;
      clearTimeout(killer);
      assert.equal(signal, null, 'the process ended on its own, not by SIGKILL');
      assert.equal(code, 0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
