import { resolve } from 'node:path';
import { formatIssue } from '../config/issues.ts';
import { checkConsistency, parseUpstreamsConfig } from '../config/load.ts';
import type { ConfigIssue, MainConfig, UpstreamsConfig } from '../config/types.ts';
import type { Logger } from '../log.ts';
import { compileRoutingTable } from '../routing/compile.ts';
import type { RoutingTable } from '../routing/types.ts';
import type { FileSnapshot } from './files.ts';

/** The `file` label of the reload metrics for upstreams.yaml, whichever source delivered it. */
export const UPSTREAMS_METRIC_NAME = 'upstreams.yaml';

/** Which source a reload of the routing config came through, as the metrics and /status name it. */
export interface ReloadSource {
  /** The `file` label: upstreams.yaml, or the file whose change made it apply again (jwks_file). */
  source: string;
  /** Where the text came from: the upstreams_conf path, or a ConfigMap (docs/kubernetes.md). */
  origin: string;
}

/**
 * What a source of the routing config needs of the control plane (control-plane/live-config.ts):
 * the table served now, and the one place a new one is published or a refusal recorded.
 */
export interface ConfigPublisher {
  readonly main: MainConfig;
  readonly logger: Logger;
  table(): RoutingTable;
  publish(table: RoutingTable, reload?: { config: UpstreamsConfig; via: ReloadSource }): void;
  refused(via: ReloadSource, problems: readonly string[]): void;
}

export type ReloadOutcome =
  | { ok: true; hash: string }
  | { ok: false; reason: 'unavailable' | 'invalid'; messages: string[] };

export interface UpstreamsApplierOptions {
  /** The control plane's live config: what is served now, and where a new table is published. */
  liveConfig: ConfigPublisher;
  logger?: Logger | undefined;
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
  compile?: ((config: UpstreamsConfig) => RoutingTable) | undefined;
  /** The content loaded at start, when known: what reapply() applies until a reload replaces it. */
  live?: FileSnapshot | undefined;
  /** Called after a new table went live (every onSnapshot listener has run). */
  onReloaded?: ((table: RoutingTable, config: UpstreamsConfig) => void) | undefined;
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

/**
 * Turns a changed upstreams.yaml into a live routing table, or explains why not. Validation and
 * compilation are the same as at start, plus the cross-file masterkey rule, so a config that would
 * not start never goes live by reload either. The new table goes out as a snapshot (liveConfig.publish),
 * which every data plane applies with one reference swap: a request holds the table it started with.
 */
export function createUpstreamsApplier(options: UpstreamsApplierOptions): UpstreamsApplier {
  const { liveConfig, beforeSwap, onReloaded } = options;
  const compile = options.compile ?? compileRoutingTable;
  const logger = options.logger ?? liveConfig.logger;
  const upstreamsFile = liveConfig.main.upstreamsConf;
  let live: { snapshot: FileSnapshot; origin: string } | null =
    options.live?.kind === 'content' ? { snapshot: options.live, origin: upstreamsFile } : null;

  const reject = (
    metric: string,
    file: string,
    reason: 'unavailable' | 'invalid',
    messages: string[],
    details: Record<string, unknown>,
  ): ReloadOutcome => {
    liveConfig.refused({ source: metric, origin: file }, messages);
    logger.error(
      { file, live_hash: liveConfig.table().hash, ...details },
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
    const issues = parsed.ok ? checkConsistency(liveConfig.main, parsed.value) : parsed.issues;
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

    const previous = liveConfig.table();
    liveConfig.publish(table, { config, via: { source: metric, origin: file } });
    live = { snapshot, origin: file };
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
