/**
 * Child processes and temp dirs of one bench run, tracked so that every one of them is ended by PID
 * and removed at the end — also when a step throws or the user presses Ctrl-C. Nothing here is
 * specific to a target.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Started {
  readonly name: string;
  readonly child: ChildProcess;
  /** stdout + stderr so far, capped, for error messages when a process dies early. */
  output(): string;
  /** Resolves with the exit code (or signal) once the process has ended. */
  readonly exited: Promise<string>;
}

const OUTPUT_CAP = 64 * 1024;
const running = new Set<Started>();
const tempDirs = new Set<string>();

/** Starts a long-lived helper process (upstream, proxy). It is killed by `stopAll`. */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  env?: NodeJS.ProcessEnv,
): Started {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
  let captured = '';
  const capture = (chunk: Buffer): void => {
    if (captured.length < OUTPUT_CAP) captured += chunk.toString('utf8');
  };
  child.stdout?.on('data', capture);
  child.stderr?.on('data', capture);
  const exited = new Promise<string>((resolve) => {
    child.on('error', (error) => resolve(`spawn error: ${error.message}`));
    child.on('exit', (code, signal) => resolve(signal ?? `exit code ${code}`));
  });
  const started: Started = { name, child, output: () => captured, exited };
  running.add(started);
  void exited.then(() => running.delete(started));
  return started;
}

/**
 * Runs a short command to completion and returns its stdout; rejects on a non-zero exit. With
 * `timeoutMs`, a command still running then is killed (and the promise rejects), so a load generator
 * that hangs cannot keep the bench from ending by itself.
 */
export function runToCompletion(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<string> {
  const started = startProcess(command, command, args, options.env);
  let stdout = '';
  started.child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  const watchdog =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => void stopProcess(started, 1000), options.timeoutMs);
  return started.exited.then((how) => {
    clearTimeout(watchdog);
    if (how !== 'exit code 0') throw new Error(`${command} ended with ${how}:\n${started.output()}`);
    return stdout;
  });
}

/** Ends one process: SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
export async function stopProcess(started: Started, graceMs = 3000): Promise<void> {
  const { pid } = started.child;
  if (pid === undefined || started.child.exitCode !== null || started.child.signalCode !== null) return;
  process.kill(pid, 'SIGTERM');
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(resolve, graceMs, 'timeout').unref());
  if ((await Promise.race([started.exited, timeout])) === 'timeout') {
    process.kill(pid, 'SIGKILL');
    await started.exited;
  }
}

export function makeTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

/** Stops every process still running and removes every temp dir. Safe to call twice. */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((started) => stopProcess(started)));
  removeTempDirs();
}

function removeTempDirs(): void {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

/**
 * Last resort when the process is leaving without having awaited `stopAll` (an uncaught error, a
 * second Ctrl-C): 'exit' handlers must be synchronous, so SIGKILL is all that is left.
 */
process.on('exit', () => {
  for (const started of running) {
    const { pid } = started.child;
    if (pid !== undefined && started.child.exitCode === null && started.child.signalCode === null) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone between the check and the kill.
      }
    }
  }
  removeTempDirs();
});

/** A loopback port nothing listens on right now (asked from the kernel, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port assigned'));
      });
    });
  });
}
