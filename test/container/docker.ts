/**
 * Docker plumbing for the container tests: is an engine there, build the Tollgate image from the
 * repository's Dockerfile, run one-shot containers. testcontainers runs the long-lived ones.
 *
 * No registry is reachable on the development machines, so by default the Node base image is made
 * locally (scripts/make-base-image.sh) and passed as NODE_IMAGE. Set TOLLGATE_TEST_NODE_IMAGE (CI on
 * GitHub sets node:24-bookworm-slim) to build on a pulled base instead.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '../helpers/tollgate.ts';

const run = promisify(execFile);

export const IMAGE = 'tollgate:container-test';
export const LOCAL_BASE_IMAGE = 'tollgate-node-base:24';

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the docker CLI; never throws on a non-zero exit. */
export async function docker(args: string[], timeoutMs = 60_000): Promise<CommandResult> {
  try {
    const { stdout, stderr } = await run('docker', args, { timeout: timeoutMs, maxBuffer: 64 << 20 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number | string; stdout?: string; stderr?: string; message: string };
    return {
      code: typeof e.code === 'number' ? e.code : -1,
      stdout: e.stdout ?? '',
      stderr: e.stderr ?? e.message,
    };
  }
}

/** null when the engine answers, else why not. */
export async function dockerUnavailableReason(): Promise<string | null> {
  const info = await docker(['info', '--format', '{{.ServerVersion}}'], 20_000);
  if (info.code === 0 && info.stdout.trim() !== '') return null;
  return `docker engine not reachable (${(info.stderr || info.stdout).trim().split('\n').slice(-2).join(' ')}); run .ci/docker-setup.sh`;
}

const tail = (text: string, lines = 40) => text.trim().split('\n').slice(-lines).join('\n');

/**
 * Builds the image from the Dockerfile. Docker's layer cache keeps repeated runs fast (the npm ci
 * layer only reruns when package.json or the lock file change). `--network host` because the engine
 * here runs without a bridge; the build stage reaches the npm registry through the host.
 */
export async function buildImage(): Promise<{ image: string; base: string }> {
  let base = process.env.TOLLGATE_TEST_NODE_IMAGE;
  if (!base) {
    base = LOCAL_BASE_IMAGE;
    try {
      await run('bash', [join(ROOT, 'scripts', 'make-base-image.sh'), base], { timeout: 300_000, cwd: ROOT });
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string; message: string };
      throw new Error(
        `making the local base image failed:\n${tail(`${e.stdout ?? ''}${e.stderr ?? e.message}`)}`,
      );
    }
  }
  const build = await docker(
    ['build', '--network', 'host', '--build-arg', `NODE_IMAGE=${base}`, '--tag', IMAGE, ROOT],
    540_000,
  );
  if (build.code !== 0) {
    throw new Error(`docker build failed (base ${base}):\n${tail(`${build.stdout}\n${build.stderr}`)}`);
  }
  return { image: IMAGE, base };
}
