import { readFileSync } from 'node:fs';
import type { MainConfig, UpstreamsConfig } from '../config/types.ts';

/** Thrown when the masterkey sources disagree or the file cannot be read; a config error. */
export class MasterkeyError extends Error {
  override name = 'MasterkeyError';
}

/** An empty value is treated as unset: an empty masterkey would let anyone mint tokens. */
const present = (value: string | null | undefined): value is string =>
  typeof value === 'string' && value !== '';

/** Reads a mounted Secret file; one trailing newline (as `echo` and most editors add) is not part of the key. */
function readMasterkeyFile(path: string): string | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new MasterkeyError(
      `masterkey_file ${path}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`,
    );
  }
  return text.replace(/\r?\n$/, '');
}

/**
 * The masterkey token issuance and JWT verification use, or null when none is configured (token API
 * answers 503, jwt routes refuse every token).
 *
 * Precedence: env `TOLLGATE_MASTERKEY` wins outright (an operator override); otherwise main.yaml
 * (`masterkey`, else `masterkey_file`) and upstreams.yaml `masterkey`, which must be equal when both
 * are set. Called at start and on every reload, so a changed file or upstreams key takes effect.
 */
export function resolveMasterkey(
  main: Pick<MainConfig, 'masterkey' | 'masterkeyFile'>,
  upstreams: Pick<UpstreamsConfig, 'masterkey'> | null,
  env: NodeJS.ProcessEnv = process.env,
): string | null {
  const fromEnv = env.TOLLGATE_MASTERKEY;
  if (present(fromEnv)) return fromEnv;

  let fromMain: string | null = null;
  if (present(main.masterkey)) fromMain = main.masterkey;
  else if (main.masterkeyFile) fromMain = readMasterkeyFile(main.masterkeyFile);
  if (!present(fromMain)) fromMain = null;

  const fromUpstreams = present(upstreams?.masterkey) ? upstreams.masterkey : null;
  if (fromMain !== null && fromUpstreams !== null && fromMain !== fromUpstreams) {
    // Never print either value: say only which sources disagree.
    throw new MasterkeyError('the masterkey in upstreams.yaml differs from the one in main.yaml');
  }
  return fromMain ?? fromUpstreams;
}

/** The live masterkey, re-resolved when upstreams.yaml is reloaded. */
export interface MasterkeySource {
  current(): string | null;
  /**
   * Re-resolves with a freshly loaded upstreams.yaml (and re-reads masterkey_file). Throws
   * MasterkeyError, keeping the previous key, when the sources now disagree: reject that reload.
   */
  reload(upstreams: Pick<UpstreamsConfig, 'masterkey'>): void;
}

export function createMasterkeySource(
  main: Pick<MainConfig, 'masterkey' | 'masterkeyFile'>,
  upstreams: Pick<UpstreamsConfig, 'masterkey'> | null,
  env: NodeJS.ProcessEnv = process.env,
): MasterkeySource {
  let key = resolveMasterkey(main, upstreams, env);
  return {
    current: () => key,
    reload(next) {
      key = resolveMasterkey(main, next, env);
    },
  };
}
