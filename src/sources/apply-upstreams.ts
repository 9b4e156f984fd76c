import { resolve } from 'node:path';
import { configInfo } from '../admin/metrics.ts';
import { formatIssue } from '../config/issues.ts';
import { checkConsistency, parseUpstreamsConfig } from '../config/load.ts';
import type { ConfigIssue, UpstreamsConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import { compileRoutingTable } from '../routing/compile.ts';
import type { RoutingTable } from '../routing/types.ts';
import type { Runtime } from '../runtime.ts';
import { type FileSnapshot, recordLoadedAtStart, recordReload } from './files.ts';

/** The `file` label of the reload metrics for upstreams.yaml, whichever source delivered it. */
export const UPSTREAMS_METRIC_NAME = 'upstreams.yaml';

export type ReloadOutcome =
  | { ok: true; hash: string }
  | { ok: false; reason: 'unavailable' | 'invalid'; messages: string[] };

export interface UpstreamsApplierOptions {
  runtime: Runtime;
  logger?: Logger;
  /**
   * Applies other state derived from upstreams.yaml (e.g. the masterkey source) once the new config
   * validated and compiled, just before the table swap. Throwing rejects the reload like an invalid
   * file; the step must then leave its own previous state in place.
   */
  beforeSwap?: (config: UpstreamsConfig) => void;
  /**
   * Compiles a validated config; the Kubernetes provider passes one that fills `service:` paths with
   * the current endpoints (docs/kubernetes.md). Defaults to compileRoutingTable alone.
   */
  compile?: (config: UpstreamsConfig) => RoutingTable;
  /** The content loaded at start, when known: what reapply() applies until a reload replaces it. */
  live?: FileSnapshot;
  /** Called after a new table went live (the runtime's own onTableSwap listeners have run). */
  onReloaded?: (table: RoutingTable, config: UpstreamsConfig) => void;
}

/**
 * The one way a new upstreams.yaml goes live, whichever source delivers it (the file watcher, a
 * Kubernetes ConfigMap): parse → validate → compile → swap, or keep the old table and say why.
 */
export interface UpstreamsApplier {
  /**
   * `origin` names where the text came from in every message (default: the upstreams_conf path;
   * a ConfigMap read through the API names itself, docs/kubernetes.md).
   */
  apply(snapshot: FileSnapshot, trigger?: string, origin?: string, metricName?: string): ReloadOutcome;
  /**
   * Applies the live content again (same origin), so what it names and is read while validating and
   * compiling (a `jwks_file`) is read anew; counted under `metricName`, the file that changed. Null
   * when the live content is unknown (nothing applied since a start that did not say what it loaded).
   */
  reapply(trigger: string, metricName: string): ReloadOutcome | null;
}

/** Exposes which upstreams.yaml is live: tollgate_config_info{hash} (and the success timestamp). */
export function recordLiveConfig(hash: string): void {
  // Exactly one hash series at a time: a dashboard joining on it must never see two "live" configs.
  configInfo.reset();
  configInfo.set({ hash }, 1);
}

/** Publishes the table loaded at start as live, before any reload. */
export function recordStartupConfig(table: RoutingTable, origin?: string): void {
  recordLoadedAtStart(UPSTREAMS_METRIC_NAME, { hash: table.hash, origin });
  recordLiveConfig(table.hash);
}

/**
 * Turns a changed upstreams.yaml into a live routing table, or explains why not. Validation and
 * compilation are the same as at start, plus the cross-file masterkey rule, so a config that would
 * not start never goes live by reload either. The swap is one reference assignment in the runtime:
 * a request holds the table it started with until it finishes.
 */
export function createUpstreamsApplier(options: UpstreamsApplierOptions): UpstreamsApplier {
  const { runtime, beforeSwap, onReloaded } = options;
  const compile = options.compile ?? compileRoutingTable;
  const logger = options.logger ?? runtime.logger;
  const upstreamsFile = runtime.main.upstreamsConf;
  let live: { snapshot: FileSnapshot; origin: string } | null =
    options.live?.kind === 'content' ? { snapshot: options.live, origin: upstreamsFile } : null;

  const reject = (
    metric: string,
    file: string,
    reason: 'unavailable' | 'invalid',
    messages: string[],
    details: Record<string, unknown>,
  ): ReloadOutcome => {
    recordReload(metric, 'failure', { origin: file, problems: messages });
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

  const apply = (snapshot: FileSnapshot, trigger: string, file: string, metric: string): ReloadOutcome => {
    if (snapshot.kind === 'unavailable') {
      return reject(metric, file, 'unavailable', [`${file}: ${snapshot.reason}`], {
        trigger,
        reason: snapshot.reason,
      });
    }
    const parsed = parseUpstreamsConfig(snapshot.text, file);
    const issues = parsed.ok ? checkConsistency(runtime.main, parsed.value) : parsed.issues;
    if (!parsed.ok || issues.length > 0) {
      const messages = logIssues(issues);
      // No hash of the rejected file: a hash of a file holding passwords can be guessed at.
      return reject(metric, file, 'invalid', messages, { trigger, problems: issues.length });
    }
    const config = parsed.value;
    config.file = resolve(file);
    let table: RoutingTable;
    try {
      // The Kubernetes provider's compile refuses a merged table that breaks a cap (sources/kubernetes/merge.ts).
      table = compile(config);
      beforeSwap?.(config);
    } catch (error) {
      const message = `${file}: ${(error as Error).message}`;
      logger.error({ file }, message);
      return reject(metric, file, 'invalid', [message], { trigger, problems: 1 });
    }

    const previous = runtime.table();
    runtime.swapTable(table);
    live = { snapshot, origin: file };
    recordReload(metric, 'success', { origin: file, hash: table.hash });
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
  };

  return {
    apply: (snapshot, trigger = 'manual', origin = upstreamsFile, metricName = UPSTREAMS_METRIC_NAME) =>
      apply(snapshot, trigger, origin, metricName),
    reapply: (trigger, metricName) =>
      live === null ? null : apply(live.snapshot, trigger, live.origin, metricName),
  };
}
