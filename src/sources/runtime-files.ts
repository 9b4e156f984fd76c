import type { Logger } from '../log.ts';
import { configReloadsTotal } from '../observe/metrics.ts';
import { noteReload } from '../observe/reload-journal.ts';
import { concernChanges } from '../routing/table-change.ts';
import type { Route, RoutingTable } from '../routing/types.ts';
import {
  type ConfigPublisher,
  createUpstreamsApplier,
  UPSTREAMS_METRIC_NAME,
  type UpstreamsApplier,
  type UpstreamsApplierOptions,
} from './apply-upstreams.ts';
import {
  createFileWatcher,
  type FileSnapshot,
  type FileWatcher,
  type FileWatcherOptions,
  readSnapshot,
} from './files.ts';
import { type MasterkeySource, watchMasterkeyFile } from './masterkey.ts';

export const MAIN_METRIC_NAME = 'main.yaml';
/** The `file` label for the key set files external issuers name (`jwks_file`). */
export const JWKS_METRIC_NAME = 'jwks_file';

/** Every `jwks_file` the live routes' policies name, each once. */
export function jwksFilesOf(table: RoutingTable): string[] {
  const files = new Set<string>();
  for (const route of table.routes) {
    for (const issuer of route.auth?.jwt?.external ?? []) if (issuer.jwksFile) files.add(issuer.jwksFile);
  }
  return [...files].sort();
}

function namesJwksFile(route: Route): boolean {
  return (route.auth?.jwt?.external ?? []).some((issuer) => Boolean(issuer.jwksFile));
}

/**
 * main.yaml holds listeners, timeouts and secrets that are bound at start; applying part of it live
 * would leave the process in a state no file describes. So a change is only reported, once per
 * distinct content, with what to do about it, and counted as `result="restart_required"`.
 */
export function createMainChangeNotice(
  logger: Logger,
  file: string,
  runningHash: string | null = null,
): (snapshot: FileSnapshot) => void {
  configReloadsTotal.inc({ file: MAIN_METRIC_NAME, result: 'restart_required' }, 0);
  noteReload(MAIN_METRIC_NAME, 'loaded', { origin: file });
  return (snapshot) => {
    if (snapshot.kind === 'content' && snapshot.hash === runningHash) {
      // No hash of main.yaml in logs: it may hold the masterkey or a Redis password, and a hash of
      // the file lets them be guessed offline (docs/configuration.md, "Config identity").
      logger.info({ file }, 'main.yaml is back to the content tollgate is running with');
      noteReload(MAIN_METRIC_NAME, 'loaded', { origin: file });
      return;
    }
    if (snapshot.kind === 'content') {
      configReloadsTotal.inc({ file: MAIN_METRIC_NAME, result: 'restart_required' });
      noteReload(MAIN_METRIC_NAME, 'restart_required', {
        origin: file,
        problems: ['changed on disk; restart tollgate to apply it'],
      });
    }
    logger.warn(
      { file },
      snapshot.kind === 'content'
        ? 'main.yaml changed on disk; it is not reloaded live: restart tollgate to apply it'
        : `main.yaml is no longer readable (${snapshot.reason}); the running process is unaffected`,
    );
  };
}

/** What the file watches need of the control plane's live config (control-plane/live-config.ts). */
export interface WatchedConfig extends ConfigPublisher {
  /** Marks the config loaded at start as live in the metrics and the journal, or `source` as loaded. */
  recordStart(source?: string): void;
  /** Called after every snapshot published. */
  onSnapshot(listener: () => void): void;
}

export interface RuntimeFilesOptions extends Omit<FileWatcherOptions, 'logger'> {
  /** The control plane's live config: reloads publish their snapshots there. */
  liveConfig: WatchedConfig;
  logger?: Logger | undefined;
  masterkeys: MasterkeySource;
  /** After a new upstreams.yaml went live (a primary sends it on to its workers, docs/workers.md). */
  onUpstreamsReloaded?: UpstreamsApplierOptions['onReloaded'];
  /** Compiles each new upstreams.yaml (the Kubernetes provider fills `service:` paths, docs/kubernetes.md). */
  compileUpstreams?: UpstreamsApplierOptions['compile'];
  /** False when upstreams.yaml comes from a ConfigMap through the API: the file is then only read at start. */
  watchUpstreamsFile?: boolean;
}

export interface RuntimeFiles {
  /** The shared watcher: register any other file read at runtime here (watchFile). */
  readonly files: FileWatcher;
  /** The upstreams apply path, for other sources of upstreams.yaml (a Kubernetes ConfigMap). */
  readonly upstreams: UpstreamsApplier;
  /** Checks every file now, e.g. on SIGHUP. */
  trigger(reason: string): void;
  settled(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Watches the config files of the control plane (docs/reload.md): upstreams.yaml (reloaded),
 * main.yaml (restart notice), masterkey_file and the jwks_files the routes name, through one
 * watcher, which the data plane registers its own files with (TLS pairs, revoked tokens). Marks
 * what was loaded at start as live in the metrics first.
 */
export async function watchRuntimeFiles(options: RuntimeFilesOptions): Promise<RuntimeFiles> {
  const { liveConfig, masterkeys } = options;
  const { main } = liveConfig;
  const logger = options.logger ?? liveConfig.logger;
  const files = await createFileWatcher({ ...options, logger });
  // The file's content stands for what was loaded at start when it hashes the same.
  const upstreamsAtStart =
    options.watchUpstreamsFile === false ? null : await readSnapshot(main.upstreamsConf);
  const upstreams = createUpstreamsApplier({
    liveConfig,
    logger,
    live:
      upstreamsAtStart?.kind === 'content' && upstreamsAtStart.hash === liveConfig.table().sourceHash
        ? upstreamsAtStart
        : undefined,
    beforeSwap: (next) => masterkeys.reload(next),
    onReloaded: options.onUpstreamsReloaded,
    compile: options.compileUpstreams,
  });
  try {
    liveConfig.recordStart();
    if (options.watchUpstreamsFile !== false) {
      await files.watch({
        name: UPSTREAMS_METRIC_NAME,
        paths: [main.upstreamsConf],
        liveHashes: [liveConfig.table().sourceHash],
        onChange: ([snapshot], trigger) => {
          if (snapshot) upstreams.apply(snapshot, trigger);
        },
      });
    }
    // What main.yaml holds now stands for what the process started with (read moments ago).
    const mainAtStart = await readSnapshot(main.file);
    const runningHash = mainAtStart.kind === 'content' ? mainAtStart.hash : null;
    const notice = createMainChangeNotice(logger, main.file, runningHash);
    await files.watch({
      name: MAIN_METRIC_NAME,
      paths: [main.file],
      liveHashes: runningHash === null ? undefined : [runningHash],
      onChange: ([snapshot]) => {
        if (snapshot) notice(snapshot);
      },
    });
    await watchMasterkeyFile(files, masterkeys);
    await watchJwksFiles(files, liveConfig, upstreams, logger);
  } catch (error) {
    await files.close();
    throw error;
  }
  return {
    files,
    upstreams,
    trigger: (reason) => files.trigger(reason),
    settled: () => files.settled(),
    close: () => files.close(),
  };
}

/**
 * The key set files external issuers name are read when upstreams.yaml is validated and compiled, so
 * a change to one alone applies the live upstreams.yaml again: the new keys are checked (a broken
 * set is refused, the old keys keep verifying) and the policies rebuilt with them. Which files are
 * watched follows the live routes.
 */
async function watchJwksFiles(
  files: FileWatcher,
  liveConfig: WatchedConfig,
  upstreams: UpstreamsApplier,
  logger: Logger,
): Promise<void> {
  let watched = '';
  const jwksFilesMayChange = concernChanges(namesJwksFile);
  let updating: Promise<void> = Promise.resolve();
  const follow = async () => {
    const table = liveConfig.table();
    // The same files (a Kubernetes change or an endpoint change rarely touches one).
    if (!jwksFilesMayChange(table)) return;
    const paths = jwksFilesOf(table);
    if (paths.join('\n') === watched) return;
    watched = paths.join('\n');
    files.unwatch(JWKS_METRIC_NAME);
    if (paths.length === 0) return;
    liveConfig.recordStart(JWKS_METRIC_NAME);
    await files.watch({
      name: JWKS_METRIC_NAME,
      paths,
      onChange: (_snapshots, trigger) => {
        const outcome = upstreams.reapply(`jwks_file changed (${trigger})`, JWKS_METRIC_NAME);
        if (outcome === null) {
          logger.warn({ paths }, 'a jwks_file changed; it applies with the next upstreams.yaml change');
        }
      },
    });
  };
  await follow();
  liveConfig.onSnapshot(() => {
    updating = updating.then(follow).catch((error: unknown) => {
      logger.error({ err: error }, 'following the jwks_file list failed');
    });
  });
}
