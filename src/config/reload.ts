import { resolve } from 'node:path';
import { configInfo, configLastReloadSuccess, configReloadsTotal } from '../admin/metrics.ts';
import type { Logger } from '../log.ts';
import { compileRoutingTable } from '../routing/compile.ts';
import type { RoutingTable } from '../routing/types.ts';
import type { Runtime } from '../runtime.ts';
import { formatIssue } from './issues.ts';
import { checkConsistency, parseUpstreamsConfig } from './load.ts';
import type { ConfigIssue, UpstreamsConfig } from './types.ts';
import { type ConfigWatcher, type FileSnapshot, watchConfigFiles } from './watch.ts';

export type ReloadOutcome =
  | { ok: true; hash: string }
  | { ok: false; reason: 'unavailable' | 'invalid'; messages: string[] };

export interface ReloaderOptions {
  runtime: Runtime;
  logger?: Logger;
  /**
   * Applies other state derived from upstreams.yaml (e.g. the masterkey source) once the new config
   * validated and compiled, just before the table swap. Throwing rejects the reload like an invalid
   * file; the step must then leave its own previous state in place.
   */
  beforeSwap?: (config: UpstreamsConfig) => void;
  /** Called after a new table went live (the runtime's own onTableSwap listeners have run). */
  onReloaded?: (table: RoutingTable, config: UpstreamsConfig) => void;
}

export interface Reloader {
  /** Parses, validates and compiles a new upstreams.yaml and swaps it in; on any problem keeps the old. */
  apply(snapshot: FileSnapshot, trigger?: string): ReloadOutcome;
}

/** Exposes which upstreams.yaml is live: tollgate_config_info{hash} and the success timestamp. */
export function recordLiveConfig(hash: string): void {
  // Exactly one hash series at a time: a dashboard joining on it must never see two "live" configs.
  configInfo.reset();
  configInfo.set({ hash }, 1);
  configLastReloadSuccess.setToCurrentTime();
}

/**
 * Turns a changed upstreams.yaml into a live routing table, or explains why not. Validation and
 * compilation are the same as at start, plus the cross-file masterkey rule, so a config that would
 * not start never goes live by reload either. The swap is one reference assignment in the runtime:
 * a request holds the table it started with until it finishes.
 */
export function createReloader(options: ReloaderOptions): Reloader {
  const { runtime, beforeSwap, onReloaded } = options;
  const logger = options.logger ?? runtime.logger;
  const file = runtime.main.upstreamsConf;

  const reject = (
    reason: 'unavailable' | 'invalid',
    messages: string[],
    details: Record<string, unknown>,
  ): ReloadOutcome => {
    configReloadsTotal.inc({ result: 'failure' });
    logger.error(
      { file, live_hash: runtime.table().hash, ...details },
      `upstreams.yaml not reloaded; the previous config keeps serving`,
    );
    return { ok: false, reason, messages };
  };

  const logIssues = (issues: readonly ConfigIssue[]) => {
    // One line per problem, in the file:line:col: path: message shape editors and CI link to.
    for (const issue of issues) {
      logger.error({ file: issue.file, line: issue.line, path: issue.path }, formatIssue(issue));
    }
    return issues.map(formatIssue);
  };

  return {
    apply(snapshot, trigger = 'manual') {
      if (snapshot.kind === 'unavailable') {
        return reject('unavailable', [`${file}: ${snapshot.reason}`], { trigger, reason: snapshot.reason });
      }
      const parsed = parseUpstreamsConfig(snapshot.text, file);
      const issues = parsed.ok ? checkConsistency(runtime.main, parsed.value) : parsed.issues;
      if (!parsed.ok || issues.length > 0) {
        const messages = logIssues(issues);
        return reject('invalid', messages, { trigger, hash: snapshot.hash, problems: issues.length });
      }
      const config = parsed.value;
      config.file = resolve(file);
      const table = compileRoutingTable(config);
      try {
        beforeSwap?.(config);
      } catch (error) {
        const message = `${file}: ${(error as Error).message}`;
        logger.error({ file }, message);
        return reject('invalid', [message], { trigger, hash: snapshot.hash, problems: 1 });
      }

      const previous = runtime.table();
      runtime.swapTable(table);
      configReloadsTotal.inc({ result: 'success' });
      recordLiveConfig(table.hash);
      logger.info(
        {
          file,
          trigger,
          hash: table.hash,
          previous_hash: previous.hash,
          routes: table.routes.length,
          servers: table.servers.length,
        },
        'upstreams.yaml reloaded',
      );
      onReloaded?.(table, config);
      return { ok: true, hash: table.hash };
    },
  };
}

/**
 * main.yaml holds listeners, timeouts and secrets that are bound at start; applying part of it live
 * would leave the process in a state no file describes. So a change is only reported, once per
 * distinct content, with what to do about it.
 */
export function createMainChangeNotice(logger: Logger, file: string): (snapshot: FileSnapshot) => void {
  return (snapshot) => {
    logger.warn(
      { file, hash: snapshot.kind === 'content' ? snapshot.hash : null },
      snapshot.kind === 'content'
        ? 'main.yaml changed on disk; it is not reloaded live: restart tollgate to apply it'
        : `main.yaml is no longer readable (${snapshot.reason}); the running process is unaffected`,
    );
  };
}

export interface HotReloadOptions extends ReloaderOptions {
  debounceMs?: number;
  pollIntervalMs?: number;
}

export interface HotReload {
  /** Checks the files now (debounced), e.g. on SIGHUP. */
  trigger(reason: string): void;
  /** Resolves once no check is pending (tests). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts hot reload for a running process: marks the table loaded at start as live in the metrics,
 * then watches the directories of upstreams.yaml (reloaded) and main.yaml (restart notice).
 */
export async function startHotReload(options: HotReloadOptions): Promise<HotReload> {
  const { runtime } = options;
  const logger = options.logger ?? runtime.logger;
  const reloader = createReloader({ ...options, logger });

  // Both results exist from the start, so rate() and alerts see a 0 rather than no series.
  configReloadsTotal.inc({ result: 'success' }, 0);
  configReloadsTotal.inc({ result: 'failure' }, 0);
  recordLiveConfig(runtime.table().hash);

  const watcher: ConfigWatcher = await watchConfigFiles({
    logger,
    debounceMs: options.debounceMs,
    pollIntervalMs: options.pollIntervalMs,
    files: [
      {
        path: runtime.main.upstreamsConf,
        liveHash: runtime.table().hash,
        onChange: (snapshot, trigger) => {
          reloader.apply(snapshot, trigger);
        },
      },
      { path: runtime.main.file, onChange: createMainChangeNotice(logger, runtime.main.file) },
    ],
  });
  logger.debug({ file: runtime.main.upstreamsConf }, 'watching upstreams.yaml for changes');
  return watcher;
}
