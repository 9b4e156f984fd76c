/**
 * Docker plumbing for the container tests: is an engine there, build the Tollgate image from the
 * repository's Dockerfile, run one-shot containers. testcontainers runs the long-lived ones.
 *
 * No registry is reachable on the development machines, so by default the Node base images are made
 * locally (scripts/make-base-image.sh) and passed as NODE_IMAGE (build stage) and RUNTIME_IMAGE
 * (distroless-style runtime). Set TOLLGATE_TEST_NODE_IMAGE and TOLLGATE_TEST_RUNTIME_IMAGE (CI on
 * GitHub sets node:24-bookworm-slim and gcr.io/distroless/nodejs24-debian12) to build on pulled bases.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '../helpers/tollgate.ts';

const run = promisify(execFile);

export const IMAGE = 'tollgate:container-test';
export const LOCAL_BASE_IMAGE = 'tollgate-node-base:24';
export const LOCAL_RUNTIME_IMAGE = 'tollgate-node-runtime:24';
/** Where the runtime image keeps node (the distroless image's path; not on PATH there). */
export const NODE_IN_IMAGE = '/nodejs/bin/node';

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
  let runtime = process.env.TOLLGATE_TEST_RUNTIME_IMAGE;
  if (!base || !runtime) {
    base ??= LOCAL_BASE_IMAGE;
    runtime ??= LOCAL_RUNTIME_IMAGE;
    try {
      await run(
        'bash',
        [join(ROOT, 'scripts', 'make-base-image.sh'), LOCAL_BASE_IMAGE, LOCAL_RUNTIME_IMAGE],
        {
          timeout: 300_000,
          cwd: ROOT,
        },
      );
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string; message: string };
      throw new Error(
        `making the local base image failed:\n${tail(`${e.stdout ?? ''}${e.stderr ?? e.message}`)}`,
      );
    }
  }
  const build = await docker(
    [
      'build',
      '--network',
      'host',
      '--build-arg',
      `NODE_IMAGE=${base}`,
      '--build-arg',
      `RUNTIME_IMAGE=${runtime}`,
      '--tag',
      IMAGE,
      ROOT,
    ],
    540_000,
  );
  if (build.code !== 0) {
    throw new Error(
      `docker build failed (bases ${base}, ${runtime}):\n${tail(`${build.stdout}\n${build.stderr}`)}`,
    );
  }
  return { image: IMAGE, base };
}
