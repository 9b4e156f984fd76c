import { readFileSync } from 'node:fs';
import type { MainConfig, UpstreamsConfig } from '../config/types.ts';
import type { FileWatcher } from './files.ts';

/** Thrown when the masterkey sources disagree or the file cannot be read; a config error. */
export class MasterkeyError extends Error {
  override name = 'MasterkeyError';
}

/** The `file` label of the reload metrics and the name in logs. */
export const MASTERKEY_FILE_METRIC_NAME = 'masterkey_file';

/** An empty value is treated as unset: an empty masterkey would let anyone mint tokens. */
const present = (value: string | null | undefined): value is string =>
  typeof value === 'string' && value !== '';

/**
 * The key a masterkey_file holds: one trailing newline (as `echo` and most editors add) is not part
 * of it. An empty key is refused: it would let anyone mint tokens.
 */
export function masterkeyFromFileText(text: string): string {
  const key = text.replace(/\r?\n$/, '');
  if (key === '') throw new MasterkeyError('the masterkey file is empty');
  return key;
}

/** Reads a mounted Secret file at start. */
function readMasterkeyFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new MasterkeyError(
      `masterkey_file ${path}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`,
    );
  }
  try {
    return masterkeyFromFileText(text);
  } catch (error) {
    throw new MasterkeyError(`masterkey_file ${path}: ${(error as Error).message}`);
  }
}

type MainKeys = Pick<MainConfig, 'masterkey' | 'masterkeyFile'>;

/** Whether main.yaml's masterkey comes from masterkey_file (inline `masterkey` wins over it). */
const usesFile = (main: MainKeys): main is MainKeys & { masterkeyFile: string } =>
  !present(main.masterkey) && present(main.masterkeyFile);

/**
 * The precedence itself, given the masterkey_file's key (already read): env `TOLLGATE_MASTERKEY`
 * wins outright (an operator override); otherwise main.yaml (`masterkey`, else `masterkey_file`) and
 * upstreams.yaml `masterkey`, which must be equal when both are set.
 */
function resolveWith(
  main: MainKeys,
  fileKey: string | null,
  upstreams: Pick<UpstreamsConfig, 'masterkey'> | null,
  env: NodeJS.ProcessEnv,
): string | null {
  const fromEnv = env.TOLLGATE_MASTERKEY;
  if (present(fromEnv)) return fromEnv;
  const fromMain = present(main.masterkey) ? main.masterkey : present(fileKey) ? fileKey : null;
  const fromUpstreams = present(upstreams?.masterkey) ? upstreams.masterkey : null;
  if (fromMain !== null && fromUpstreams !== null && fromMain !== fromUpstreams) {
    // Never print either value: say only which sources disagree.
    throw new MasterkeyError('the masterkey in upstreams.yaml differs from the one in main.yaml');
  }
  return fromMain ?? fromUpstreams;
}

/**
 * The masterkey token issuance and JWT verification use, or null when none is configured (token API
 * answers 503, jwt routes refuse every token). Reads masterkey_file when main.yaml uses it.
 */
export function resolveMasterkey(
  main: MainKeys,
  upstreams: Pick<UpstreamsConfig, 'masterkey'> | null,
  env: NodeJS.ProcessEnv = process.env,
): string | null {
  if (present(env.TOLLGATE_MASTERKEY)) return env.TOLLGATE_MASTERKEY;
  return resolveWith(main, usesFile(main) ? readMasterkeyFile(main.masterkeyFile) : null, upstreams, env);
}

/** The live masterkey. Its inputs change on their own: upstreams.yaml reloads and masterkey_file. */
export interface MasterkeySource {
  current(): string | null;
  /**
   * Re-resolves with a freshly loaded upstreams.yaml and the live masterkey_file key. Throws
   * MasterkeyError, keeping the previous key, when the sources now disagree: reject that reload.
   */
  reload(upstreams: Pick<UpstreamsConfig, 'masterkey'>): void;
  /**
   * Re-resolves with a new masterkey_file key. Throws MasterkeyError, keeping the previous key, when
   * it disagrees with upstreams.yaml's masterkey.
   */
  replaceFileKey(key: string): void;
  /** masterkey_file when it is the masterkey's source (no env override, no inline key), else null. */
  readonly file: string | null;
}

export function createMasterkeySource(
  main: MainKeys,
  upstreams: Pick<UpstreamsConfig, 'masterkey'> | null,
  env: NodeJS.ProcessEnv = process.env,
): MasterkeySource {
  const file = !present(env.TOLLGATE_MASTERKEY) && usesFile(main) ? main.masterkeyFile : null;
  let fileKey = file === null ? null : readMasterkeyFile(file);
  let lastUpstreams = upstreams;
  let key = resolveWith(main, fileKey, lastUpstreams, env);
  return {
    current: () => key,
    reload(next) {
      key = resolveWith(main, fileKey, next, env);
      lastUpstreams = next;
    },
    replaceFileKey(nextFileKey) {
      key = resolveWith(main, nextFileKey, lastUpstreams, env);
      fileKey = nextFileKey;
    },
    file,
  };
}

/**
 * Applies a rotated masterkey_file on its own: tokens signed with the new key are accepted and the
 * old ones refused as soon as it is read (verifiers re-derive their key when the masterkey changes).
 * A file that is empty, unreadable or disagrees with upstreams.yaml keeps the previous key.
 */
export async function watchMasterkeyFile(files: FileWatcher, source: MasterkeySource): Promise<void> {
  if (source.file === null) return;
  await files.watchFile(source.file, {
    name: MASTERKEY_FILE_METRIC_NAME,
    parse: masterkeyFromFileText,
    apply: (key) => source.replaceFileKey(key),
  });
}
