/**
 * The last thing each watched source did, for /status (docs/observability.md#status): when it was
 * loaded or last tried, whether that worked, the config identity it made live, and why a refused
 * reload was refused. Fed from the same two calls that count tollgate_config_reloads_total
 * (sources/files), so the page and the metric never disagree. Only what the logs already say is
 * kept (the problems are the logged one-line messages, never a file's content or its sha256).
 */
/** `restart_required`: main.yaml changed on disk, which is never applied live (docs/reload.md). */
export type ReloadResult = 'loaded' | 'success' | 'failure' | 'restart_required';

export interface ReloadRecord {
  /** The `file` label of the reload metrics: upstreams.yaml, main.yaml, tls_certificate, … */
  readonly source: string;
  /** Where the content came from when not the file itself (a ConfigMap). */
  readonly origin: string | null;
  /** Unix milliseconds of the last attempt. */
  readonly at: number;
  readonly result: ReloadResult;
  /** The config identity made live (upstreams.yaml only), never a hash of the file's bytes. */
  readonly hash: string | null;
  /** Why the last attempt was refused (at most MAX_PROBLEMS lines); empty when it worked. */
  readonly problems: readonly string[];
  /** Unix milliseconds of the last load that went live (at start or by a reload). */
  readonly lastSuccessAt: number | null;
}

export interface ReloadDetail {
  origin?: string;
  hash?: string;
  problems?: readonly string[];
}

/** A refusal listing hundreds of problems says enough in its first few; the log has them all. */
const MAX_PROBLEMS = 20;
const MAX_PROBLEM_LENGTH = 500;

const records = new Map<string, ReloadRecord>();

export function noteReload(
  source: string,
  result: ReloadResult,
  detail: ReloadDetail = {},
  now = Date.now(),
): void {
  const previous = records.get(source);
  const live = result === 'loaded' || result === 'success';
  records.set(source, {
    source,
    origin: detail.origin ?? null,
    at: now,
    result,
    // A refused reload changes nothing: the identity live before stays live.
    hash: live ? (detail.hash ?? previous?.hash ?? null) : (previous?.hash ?? null),
    problems: (detail.problems ?? [])
      .slice(0, MAX_PROBLEMS)
      .map((line) => (line.length > MAX_PROBLEM_LENGTH ? `${line.slice(0, MAX_PROBLEM_LENGTH)}…` : line)),
    lastSuccessAt: live ? now : (previous?.lastSuccessAt ?? null),
  });
}

/** Every source's last record, in the order they were first seen. */
export function reloadRecords(): readonly ReloadRecord[] {
  return [...records.values()];
}
