import { readRevokedTokensFile } from '../config/file-checks.ts';
import { sha256Hex } from '../config/load.ts';
import type { Logger } from '../log.ts';
import { revokedTokens } from '../observe/metrics.ts';
import type { FileWatcher } from '../sources/files.ts';

/**
 * Revoked token ids (docs/tokens.md#revocation): `revoked_tokens_file` lists one `jti` per line, `#`
 * starts a comment, blank lines are ignored. The file is usually a mounted ConfigMap or Secret, so
 * every replica that mounts it refuses the same tokens within a second of the kubelet's swap.
 */

/** A jti is what we issue (a UUID) or what another issuer put there; anything longer is not one. */
const MAX_JTI_LENGTH = 256;

export interface ParsedRevocations {
  readonly revoked: ReadonlySet<string>;
  /** 1-based numbers of lines that are not a plausible jti (ignored, reported as warnings). */
  readonly badLines: readonly number[];
}

export function parseRevokedTokens(text: string): ParsedRevocations {
  const revoked = new Set<string>();
  const badLines: number[] = [];
  const lines = text.split(/\r?\n/);
  for (const [index, line] of lines.entries()) {
    const hash = line.indexOf('#');
    const value = (hash === -1 ? line : line.slice(0, hash)).trim();
    if (value === '') continue;
    if (value.length > MAX_JTI_LENGTH || /\s/.test(value)) {
      badLines.push(index + 1);
      continue;
    }
    revoked.add(value);
  }
  return { revoked, badLines };
}

/** The live set of revoked jti values, swapped whole when the file changes. */
export interface RevocationList {
  isRevoked(jti: string | null): boolean;
  /** Number of revoked ids now in force. */
  size(): number;
  replace(revoked: ReadonlySet<string>): void;
}

export function createRevocationList(initial: ReadonlySet<string> = new Set()): RevocationList {
  let current = initial;
  return {
    isRevoked: (jti) => jti !== null && current.has(jti),
    size: () => current.size,
    replace(next) {
      current = next;
    },
  };
}

/** Puts a parsed file in force and says so (gauge; a warning for lines that were skipped). */
function applyRevocations(
  list: RevocationList,
  parsed: ParsedRevocations,
  path: string,
  logger: Logger,
): void {
  list.replace(parsed.revoked);
  revokedTokens.set(parsed.revoked.size);
  if (parsed.badLines.length > 0) {
    logger.warn(
      { event: 'revoked_tokens_bad_lines', file: path, lines: parsed.badLines },
      'ignored lines of revoked_tokens_file that are not token ids',
    );
  }
}

/**
 * The revocation list of `revoked_tokens_file` (path null: none configured, an empty list), read
 * now: throws FileCheckError when the file cannot be read, so a start fails closed instead of
 * serving tokens someone meant to revoke.
 */
export function loadRevocationList(path: string | null, logger: Logger): LoadedRevocations {
  const list = createRevocationList();
  if (path === null) return { list, hash: null };
  // The reader validation uses (config/file-checks): a file that validated loads here.
  const bytes = readRevokedTokensFile(path);
  const parsed = parseRevokedTokens(bytes.toString('utf8'));
  applyRevocations(list, parsed, path, logger);
  logger.info(
    { event: 'revoked_tokens_loaded', file: path, trigger: 'start', revoked: parsed.revoked.size },
    'revoked tokens loaded',
  );
  return { list, hash: sha256Hex(bytes) };
}

export interface LoadedRevocations {
  readonly list: RevocationList;
  /** sha256 of the file as loaded (what the watcher compares against), null without a file. */
  readonly hash: string | null;
}

/**
 * Keeps `list` in step with the file through the process's one file watcher (kubelet symlink swaps
 * included). A file that becomes missing, unreadable or empty keeps the list in force: un-revoking
 * every token because a volume was being remounted would be the wrong way to fail.
 */
export function watchRevokedTokens(
  files: FileWatcher,
  path: string,
  loaded: LoadedRevocations,
  logger: Logger,
): Promise<void> {
  return files.watchFiles({
    name: 'revoked_tokens_file',
    paths: [path],
    // The content loaded at start is live: an empty file then is a valid, empty list.
    ...(loaded.hash === null ? {} : { liveHashes: [loaded.hash] }),
    parse: ([text]) => parseRevokedTokens(text as string),
    apply: (parsed) => applyRevocations(loaded.list, parsed, path, logger),
    describe: (parsed) => ({ revoked: parsed.revoked.size }),
    events: { applied: 'revoked_tokens_loaded', rejected: 'revoked_tokens_unavailable' },
    messages: {
      applied: 'revoked tokens reloaded',
      rejected: 'revoked_tokens_file not reloaded; the revocations already loaded stay in force',
    },
  });
}
