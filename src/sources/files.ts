import { type FSWatcher, watch } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { sha256Hex } from '../config/load.ts';
import type { Logger } from '../log.ts';
import { configLastReloadSuccess, configReloadsTotal } from '../observe/metrics.ts';
import { noteReload, type ReloadDetail } from '../observe/reload-journal.ts';
import { type CheckScheduler, createCheckScheduler } from './check-scheduler.ts';

/**
 * What a watched file holds right now. `unavailable` covers a missing, unreadable or empty file: a
 * state that must never replace a good one (an editor that truncates before writing, a delete
 * followed by a re-create, a volume being remounted all pass through it).
 */
export type FileSnapshot =
  | { readonly kind: 'content'; readonly text: string; readonly hash: string }
  | { readonly kind: 'unavailable'; readonly reason: string };

/** Files read and applied together (a certificate and its key), under one name. */
export interface WatchedEntry {
  /** Names the entry in logs and in the `file` label of the reload metrics, e.g. `upstreams.yaml`. */
  readonly name: string;
  readonly paths: readonly string[];
  /**
   * sha256 of each file's content already live (what was loaded at start), so a change made between
   * that load and the watch starting is still noticed. When absent, the files are read once now and
   * what they hold becomes the baseline.
   */
  readonly liveHashes?: readonly string[] | undefined;
  /** Called only when the files' state differs from the last one reported (or the baseline). */
  onChange(snapshots: readonly FileSnapshot[], trigger: string): void | Promise<void>;
}

/** A file applied with the last-good rule: see FileWatcher.watchFile. */
export interface WatchFileOptions<T> {
  /** Names the file in logs and metrics: the config key (`revoked_tokens_file`) reads best. */
  readonly name: string;
  /** Turns the text into the value to apply; throw (with a message free of secrets) to reject it. */
  parse(text: string): T;
  /** Makes the value live; throw to reject it, leaving what was live in place. */
  apply(value: T, trigger: string): void;
}

/** Like WatchFileOptions, for files that only make sense together. */
export interface WatchFilesOptions<T> {
  readonly name: string;
  readonly paths: readonly string[];
  parse(texts: readonly string[]): T;
  apply(value: T, trigger: string): void;
  /** Hashes of the content already live (loaded by the caller); absent: read, parse and apply now. */
  readonly liveHashes?: readonly string[] | undefined;
  /** Extra fields for the success log line (never secrets). */
  describe?(value: T): Record<string, unknown>;
  /** Log messages; the defaults say `<name> reloaded` / `<name> not reloaded; …`. */
  readonly messages?: { readonly applied?: string; readonly rejected?: string };
  /** The `event` field of those two lines, for files whose events docs/observability.md names. */
  readonly events?: { readonly applied: string; readonly rejected: string };
}

export interface FileWatcher {
  /** Watches files with a handler of its own (which then reports its own results). */
  watch(entry: WatchedEntry): Promise<void>;
  /**
   * Reads, parses and applies the file now (throwing a one-line error when that fails: at start a
   * broken file is a configuration error), then again whenever its content changes. A change that is
   * missing, empty, fails to parse or to apply is logged and counted, and the last good value stays.
   */
  watchFile<T>(path: string, options: WatchFileOptions<T>): Promise<void>;
  watchFiles<T>(options: WatchFilesOptions<T>): Promise<void>;
  /** Stops reporting changes for the entry of that name (the files a config names can change). */
  unwatch(name: string): void;
  /** Checks every file now, e.g. on SIGHUP. */
  trigger(reason: string): void;
  /** Resolves once no check is pending or running. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export interface FileWatcherOptions {
  readonly logger: Logger;
  /** Quiet time after the last relevant event before the files are read. */
  readonly quietMs?: number;
  /** The longest a relevant event waits for its check, however many events follow it. */
  readonly maxWaitMs?: number | undefined;
  /** Safety net for filesystems where fs.watch misses events (NFS, some FUSE/overlay setups). */
  readonly pollIntervalMs?: number;
}

export const DEFAULT_QUIET_MS = 100;
export const DEFAULT_MAX_WAIT_MS = 500;
export const DEFAULT_POLL_INTERVAL_MS = 2_000;

/**
 * The kubelet updates a ConfigMap, Secret or projected volume by renaming the `..data` symlink; the
 * files themselves are symlinks through it and never change.
 */
const KUBELET_DATA_LINK = '..data';

/** Reads a file through any symlinks (the kubelet's `upstreams.yaml → ..data/upstreams.yaml`). */
export async function readSnapshot(path: string): Promise<FileSnapshot> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === 'ENOENT' ? 'the file does not exist' : `the file cannot be read (${code ?? error})`;
    return { kind: 'unavailable', reason };
  }
  let text: string;
  try {
    // ignoreBOM keeps a BOM in the text, as config/load does, so both hash the same bytes.
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return { kind: 'unavailable', reason: 'the file is not UTF-8 text' };
  }
  // An empty file is what a truncate-then-write editor leaves for a moment; it is never content.
  if (text.trim() === '') return { kind: 'unavailable', reason: 'the file is empty' };
  return { kind: 'content', text, hash: sha256Hex(bytes) };
}

/** Two states with the same key are the same: nothing to report. */
function stateKey(snapshots: readonly FileSnapshot[]): string {
  return snapshots
    .map((snapshot) => (snapshot.kind === 'content' ? snapshot.hash : `unavailable: ${snapshot.reason}`))
    .join('\n');
}

/**
 * Creates the series of a watched file at 0 and marks what was loaded at start as live, so rate()
 * and alerts see a value from the first scrape.
 */
export function recordLoadedAtStart(name: string, detail?: ReloadDetail): void {
  configReloadsTotal.inc({ file: name, result: 'success' }, 0);
  configReloadsTotal.inc({ file: name, result: 'failure' }, 0);
  configLastReloadSuccess.setToCurrentTime({ file: name });
  noteReload(name, 'loaded', detail);
}

/** `detail` is what /status shows of it (observe/reload-journal): the live identity, or why not. */
export function recordReload(name: string, result: 'success' | 'failure', detail?: ReloadDetail): void {
  configReloadsTotal.inc({ file: name, result });
  if (result === 'success') configLastReloadSuccess.setToCurrentTime({ file: name });
  noteReload(name, result, detail);
}

/**
 * The one watcher for every file the process reads at runtime (docs/reload.md).
 *
 * It watches the DIRECTORIES holding the files, never the files themselves: the kubelet updates a
 * mounted volume by renaming a `..data` symlink inside the directory, and an editor that writes a
 * temp file and renames it over the original replaces the inode a file watch would follow. Only
 * events naming a watched file or `..data` count; a log file or an editor's swap file beside the
 * config causes no check. Each check reads and hashes every file and calls a handler only when its
 * files' content changed, so each file is applied on its own.
 */
export async function createFileWatcher(options: FileWatcherOptions): Promise<FileWatcher> {
  const { logger } = options;
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;

  interface Watched {
    entry: WatchedEntry;
    lastState: string;
    /** A missing or empty state seen once and not yet reported: see checkAll. */
    unconfirmed: string | null;
  }
  const entries: Watched[] = [];
  let closed = false;

  const checkAll = async (why: string) => {
    for (const watched of [...entries]) {
      if (closed) return;
      if (!entries.includes(watched)) continue; // unwatched during this check
      const snapshots = await Promise.all(watched.entry.paths.map(readSnapshot));
      const key = stateKey(snapshots);
      if (key === watched.lastState) {
        watched.unconfirmed = null;
        if (why !== 'poll')
          logger.debug({ file: watched.entry.name, trigger: why }, 'watched file unchanged');
        continue;
      }
      // A file caught missing or empty is usually a writer in the middle of its work (truncate then
      // write, delete then re-create): it is only reported when a second look finds it the same.
      if (snapshots.some((snapshot) => snapshot.kind === 'unavailable') && watched.unconfirmed !== key) {
        watched.unconfirmed = key;
        scheduler.notify('second look');
        continue;
      }
      watched.unconfirmed = null;
      watched.lastState = key;
      try {
        await watched.entry.onChange(snapshots, why);
      } catch (error) {
        logger.error({ err: error, file: watched.entry.name }, 'watched file change handler failed');
      }
    }
  };

  const scheduler: CheckScheduler = createCheckScheduler({
    quietMs: options.quietMs ?? DEFAULT_QUIET_MS,
    maxWaitMs: options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
    check: checkAll,
  });

  // One watcher per directory, remembered with the directory's identity: when a directory is deleted
  // (and perhaps created again) inotify silently stops reporting, without an 'error' event, so each
  // poll re-stats the directories and re-watches any that vanished or were replaced. The identity
  // includes the birth time because a re-created directory often gets the freed inode number back.
  interface WatchedDirectory {
    /** Base names of the watched files in this directory; events naming anything else are ignored. */
    names: Set<string>;
    watch: { watcher: FSWatcher; identity: string } | null;
  }
  const directories = new Map<string, WatchedDirectory>();

  const onEvent = (dir: WatchedDirectory, filename: string | null) => {
    // No name (some platforms, or an overflowed queue): the change may be ours.
    if (filename === null || filename === KUBELET_DATA_LINK || dir.names.has(filename)) {
      scheduler.notify('fs.watch');
    }
  };

  const unwatch = (dir: WatchedDirectory) => {
    dir.watch?.watcher.close();
    dir.watch = null;
  };

  const watchDirectory = (path: string, dir: WatchedDirectory, identity: string, quiet: boolean) => {
    try {
      const watcher = watch(path, { persistent: false }, (_event, filename) => onEvent(dir, filename));
      const current = { watcher, identity };
      watcher.on('error', (error) => {
        logger.warn(
          { err: error, dir: path },
          'watching a directory failed; relying on polling until it is back',
        );
        if (dir.watch === current) unwatch(dir);
      });
      dir.watch = current;
      return true;
    } catch (error) {
      if (!quiet) logger.warn({ err: error, dir: path }, 'cannot watch a directory; relying on polling');
      return false;
    }
  };

  const identityOf = async (path: string): Promise<string | null> => {
    try {
      const info = await stat(path);
      return `${info.dev}:${info.ino}:${info.birthtimeMs}`;
    } catch {
      return null;
    }
  };

  const addDirectoryOf = async (file: string) => {
    const path = dirname(file);
    const known = directories.get(path);
    if (known) {
      known.names.add(basename(file));
      return;
    }
    const dir: WatchedDirectory = { names: new Set([basename(file)]), watch: null };
    directories.set(path, dir);
    const identity = await identityOf(path);
    if (identity === null)
      logger.warn({ dir: path }, 'a watched directory does not exist; polling until it does');
    else watchDirectory(path, dir, identity, false);
  };

  const refreshWatches = async () => {
    for (const [path, dir] of directories) {
      const identity = await identityOf(path);
      if (closed) return;
      if (dir.watch !== null && dir.watch.identity === identity) continue;
      unwatch(dir);
      // Whatever happened while the directory was not watched is only seen by reading the files.
      if (identity !== null && watchDirectory(path, dir, identity, true))
        scheduler.notify('directory watch restored');
    }
  };

  // The poll reads the files itself: a change fs.watch never reported is found here, whatever the
  // events are doing meanwhile.
  let polling = false;
  const poll = setInterval(() => {
    if (polling || closed) return;
    polling = true;
    refreshWatches()
      .catch((error: unknown) => logger.warn({ err: error }, 'refreshing directory watches failed'))
      .finally(() => {
        polling = false;
        scheduler.checkNow('poll');
      });
  }, pollIntervalMs);
  poll.unref();

  const watchEntry = async (entry: WatchedEntry) => {
    const paths = entry.paths.map((path) => resolve(path));
    const lastState = entry.liveHashes
      ? stateKey(entry.liveHashes.map((hash) => ({ kind: 'content', text: '', hash })))
      : stateKey(await Promise.all(paths.map(readSnapshot)));
    entries.push({ entry: { ...entry, paths, onChange: entry.onChange }, lastState, unconfirmed: null });
    for (const path of paths) await addDirectoryOf(path);
    logger.debug({ file: entry.name, paths }, 'watching for changes');
  };

  const watchFiles = async <T>(spec: WatchFilesOptions<T>) => {
    const { name, paths, parse, apply } = spec;
    const appliedMessage = spec.messages?.applied ?? `${name} reloaded`;
    const rejectedMessage = spec.messages?.rejected ?? `${name} not reloaded; the previous one stays live`;
    let liveHashes = spec.liveHashes;
    if (!liveHashes) {
      const snapshots = await Promise.all(paths.map(readSnapshot));
      const unavailable = snapshots.findIndex((snapshot) => snapshot.kind === 'unavailable');
      if (unavailable !== -1) {
        const snapshot = snapshots[unavailable] as { reason: string };
        throw new Error(`${name} ${paths[unavailable]}: ${snapshot.reason}`);
      }
      const texts = snapshots.map((snapshot) => (snapshot as { text: string }).text);
      try {
        apply(parse(texts), 'start');
      } catch (error) {
        throw new Error(`${name} ${paths.join(', ')}: ${(error as Error).message}`);
      }
      liveHashes = snapshots.map((snapshot) => (snapshot as { hash: string }).hash);
    }
    recordLoadedAtStart(name);

    const reject = (reason: string, trigger: string) => {
      recordReload(name, 'failure', { problems: [reason] });
      logger.error({ event: spec.events?.rejected, file: name, paths, trigger, reason }, rejectedMessage);
    };
    await watchEntry({
      name,
      paths,
      liveHashes,
      onChange(snapshots, trigger) {
        const unavailable = snapshots.find((snapshot) => snapshot.kind === 'unavailable');
        if (unavailable) return reject(unavailable.reason, trigger);
        let value: T;
        try {
          value = parse(snapshots.map((snapshot) => (snapshot as { text: string }).text));
          apply(value, trigger);
        } catch (error) {
          return reject((error as Error).message, trigger);
        }
        recordReload(name, 'success');
        logger.info(
          { event: spec.events?.applied, file: name, paths, trigger, ...spec.describe?.(value) },
          appliedMessage,
        );
      },
    });
  };

  return {
    watch: watchEntry,
    watchFiles,
    unwatch(name) {
      // The directories stay watched: an event naming a file no longer watched costs one check.
      for (let i = entries.length - 1; i >= 0; i--) if (entries[i]?.entry.name === name) entries.splice(i, 1);
    },
    watchFile: (path, { name, parse, apply }) =>
      watchFiles({ name, paths: [path], parse: ([text]) => parse(text as string), apply }),
    trigger: (reason) => scheduler.checkNow(reason),
    settled: () => scheduler.idle(),
    async close() {
      closed = true;
      clearInterval(poll);
      for (const dir of directories.values()) unwatch(dir);
      directories.clear();
      await scheduler.close();
    },
  };
}
