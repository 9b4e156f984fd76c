import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { freePort } from './tollgate.ts';

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  readonly child: ChildProcess;
  /** SIGKILL by PID and wait for the exit (an outage as abrupt as a crashed pod). */
  stop(): Promise<void>;
}

/**
 * A real `redis-server` (apt package) on a free loopback port, without persistence. Resolves once
 * it accepts connections. `port` lets a test bring Redis back on the same address after stopping it.
 */
export async function startRedis(port?: number): Promise<RedisServer> {
  const chosen = port ?? (await freePort());
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(chosen),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'no',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${output}`)), 10_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}: ${output}`));
    });
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  child.removeAllListeners('exit');
  const exited = once(child, 'exit');
  return {
    port: chosen,
    url: `redis://127.0.0.1:${chosen}`,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(child.pid as number, 'SIGKILL');
        await exited;
      }
    },
  };
}
