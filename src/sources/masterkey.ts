import { formatIssue } from '../config/issues.ts';
import {
  agreeOnMasterkey,
  keyFromMasterkeyFileText,
  type MasterkeyResolution,
  resolveMasterkey as resolveConfiguredMasterkey,
  usesMasterkeyFile,
} from '../config/masterkey.ts';
import type { MainConfig, UpstreamsConfig } from '../config/types.ts';
import type { FileWatcher } from './files.ts';

/** Thrown when the masterkey sources disagree or the file cannot be read; a config error. */
export class MasterkeyError extends Error {
  override name = 'MasterkeyError';
}

/** The `file` label of the reload metrics and the name in logs. */
export const MASTERKEY_FILE_METRIC_NAME = 'masterkey_file';

/**
 * The key a masterkey_file holds: one trailing newline (as `echo` and most editors add) is not part
 * of it. An empty key is refused: it would let anyone mint tokens.
 */
export function masterkeyFromFileText(text: string): string {
  const key = keyFromMasterkeyFileText(text);
  if (key === null) throw new MasterkeyError('the masterkey file is empty');
  return key;
}

type MainKeys = Pick<MainConfig, 'masterkey' | 'masterkeyFile'>;

/** The rules live in config/masterkey, shared with validation; here a problem becomes an exception. */
function keyOrThrow(resolved: MasterkeyResolution): string | null {
  if (!resolved.ok) throw new MasterkeyError(resolved.issues.map(formatIssue).join('; '));
  return resolved.masterkey;
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
  return keyOrThrow(resolveConfiguredMasterkey(main, upstreams, env));
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
  const file = usesMasterkeyFile(main, env) ? main.masterkeyFile : null;
  let key = resolveMasterkey(main, upstreams, env);
  // What masterkey_file held at start; when the file is the source, the resolved key is exactly it.
  let fileKey = file === null ? null : key;
  let lastUpstreams = upstreams;
  return {
    current: () => key,
    reload(next) {
      key = keyOrThrow(agreeOnMasterkey(main, fileKey, next, env));
      lastUpstreams = next;
    },
    replaceFileKey(nextFileKey) {
      key = keyOrThrow(agreeOnMasterkey(main, nextFileKey, lastUpstreams, env));
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
