import { type FSWatcher, watch } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../log.ts';
import { sha256Hex } from './load.ts';

/**
 * What a config file holds right now. `unavailable` covers a missing, unreadable or empty file: a
 * state that must never replace a good config (an editor that truncates before writing, a delete
 * followed by a re-create, a volume being remounted all pass through it).
 */
export type FileSnapshot =
  | { readonly kind: 'content'; readonly text: string; readonly hash: string }
  | { readonly kind: 'unavailable'; readonly reason: string };

export interface WatchedFile {
  readonly path: string;
  /**
   * sha256 of the content already live (e.g. the hash of the table compiled at start), so a change
   * made between the first load and the watcher starting is still noticed. When absent, the file is
   * read once now and what it holds becomes the baseline.
   */
  readonly liveHash?: string;
  /** Called only when the file's state differs from the last one reported (or the baseline). */
  onChange(snapshot: FileSnapshot, trigger: string): void | Promise<void>;
}

export interface WatchOptions {
  readonly files: readonly WatchedFile[];
  readonly logger: Logger;
  /** Quiet time after the last event before the files are read (trailing edge). */
  readonly debounceMs?: number;
  /** Safety net for filesystems where fs.watch misses events (NFS, some FUSE/overlay setups). */
  readonly pollIntervalMs?: number;
}

export interface ConfigWatcher {
  /** Schedules a (debounced) check of every file, e.g. on SIGHUP. */
  trigger(reason: string): void;
  /** Resolves once no check is scheduled or running. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export const DEFAULT_DEBOUNCE_MS = 150;
export const DEFAULT_POLL_INTERVAL_MS = 2_000;

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
  // An empty file is what a truncate-then-write editor leaves for a moment; it is never a config.
  if (text.trim() === '') return { kind: 'unavailable', reason: 'the file is empty' };
  return { kind: 'content', text, hash: sha256Hex(bytes) };
}

/** Two snapshots with the same key are the same state: nothing to report. */
function stateKey(snapshot: FileSnapshot): string {
  return snapshot.kind === 'content' ? snapshot.hash : `unavailable: ${snapshot.reason}`;
}

/**
 * Watches the DIRECTORIES holding the given files, never the files themselves: a ConfigMap volume
 * is updated by the kubelet renaming a `..data` symlink inside the directory, and an editor that
 * writes a temp file and renames it over the original replaces the inode a file watch would follow.
 *
 * Every event (and every poll tick, and trigger()) restarts a short timer; when it fires, each file
 * is read and hashed and its handler runs only if the content differs from the last state seen.
 * Checks never overlap: an event arriving during one schedules another, so a burst of writes always
 * ends with the last content checked.
 */
export async function watchConfigFiles(options: WatchOptions): Promise<ConfigWatcher> {
  const { files, logger } = options;
  const debounceMs = options.debounceMs ?? DEFAULT_DEBOUNCE_MS;
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;

  const lastState = new Map<WatchedFile, string>();
  for (const file of files) {
    lastState.set(file, file.liveHash ?? stateKey(await readSnapshot(file.path)));
  }

  let closed = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let rerun = false;
  const reasons = new Set<string>();
  let idleWaiters: Array<() => void> = [];

  const notifyIdle = () => {
    if (timer !== null || running !== null) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const wake of waiters) wake();
  };

  const checkAll = async (why: string) => {
    for (const file of files) {
      const snapshot = await readSnapshot(file.path);
      const key = stateKey(snapshot);
      if (key === lastState.get(file)) {
        if (why !== 'poll') logger.debug({ file: file.path, trigger: why }, 'config file unchanged');
        continue;
      }
      lastState.set(file, key);
      try {
        await file.onChange(snapshot, why);
      } catch (error) {
        logger.error({ err: error, file: file.path }, 'config change handler failed');
      }
    }
  };

  const fire = () => {
    timer = null;
    if (closed) return notifyIdle();
    if (running !== null) {
      rerun = true;
      return;
    }
    const why = [...reasons].join(', ');
    reasons.clear();
    running = checkAll(why).finally(() => {
      running = null;
      if (rerun && !closed) {
        rerun = false;
        schedule();
      }
      notifyIdle();
    });
  };

  const schedule = () => {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(fire, debounceMs);
    timer.unref();
  };

  const trigger = (reason: string) => {
    if (closed) return;
    reasons.add(reason);
    schedule();
  };

  // One watcher per directory, remembered with the directory's identity: when a directory is deleted
  // (and perhaps created again) inotify silently stops reporting, without an 'error' event, so each
  // poll re-stats the directories and re-watches any that vanished or were replaced. The identity
  // includes the birth time because a re-created directory often gets the freed inode number back.
  interface DirectoryWatch {
    watcher: FSWatcher;
    identity: string;
  }
  const directories = new Map<string, DirectoryWatch | null>();
  for (const file of files) directories.set(dirname(file.path), null);

  const unwatch = (dir: string) => {
    directories.get(dir)?.watcher.close();
    if (directories.has(dir)) directories.set(dir, null);
  };

  const watchDirectory = (dir: string, identity: string, quiet: boolean): boolean => {
    try {
      const watcher = watch(dir, { persistent: false }, () => trigger('fs.watch'));
      const entry = { watcher, identity };
      watcher.on('error', (error) => {
        logger.warn(
          { err: error, dir },
          'watching the config directory failed; relying on polling until it is back',
        );
        if (directories.get(dir) === entry) unwatch(dir);
      });
      directories.set(dir, entry);
      return true;
    } catch (error) {
      if (!quiet) logger.warn({ err: error, dir }, 'cannot watch the config directory; relying on polling');
      return false;
    }
  };

  const identityOf = async (dir: string): Promise<string | null> => {
    try {
      const info = await stat(dir);
      return `${info.dev}:${info.ino}:${info.birthtimeMs}`;
    } catch {
      return null;
    }
  };

  for (const dir of directories.keys()) {
    const identity = await identityOf(dir);
    if (identity === null)
      logger.warn({ dir }, 'the config directory does not exist; relying on polling until it does');
    else watchDirectory(dir, identity, false);
  }

  const refreshWatches = async () => {
    for (const [dir, current] of directories) {
      const identity = await identityOf(dir);
      if (closed) return;
      if (current !== null && current.identity === identity) continue;
      unwatch(dir);
      // Whatever happened while the directory was not watched is only seen by reading the files.
      if (identity !== null && watchDirectory(dir, identity, true)) trigger('directory watch restored');
    }
  };

  let polling = false;
  const poll = setInterval(() => {
    if (polling) return;
    polling = true;
    refreshWatches()
      .catch((error: unknown) => logger.warn({ err: error }, 'refreshing config directory watches failed'))
      .finally(() => {
        polling = false;
        trigger('poll');
      });
  }, pollIntervalMs);
  poll.unref();

  return {
    trigger,
    settled: () =>
      timer === null && running === null
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            idleWaiters.push(resolve);
          }),
    async close() {
      closed = true;
      clearInterval(poll);
      if (timer !== null) {
        clearTimeout(timer);
        timer = null;
      }
      for (const entry of directories.values()) entry?.watcher.close();
      directories.clear();
      if (running !== null) await running;
      notifyIdle();
    },
  };
}
