/**
 * Reduces the rounds of each target to medians and renders them: tables for the terminal and a JSON
 * document for bench/results/latest.json.
 */
import type { LoadResult } from './load.ts';

/** One measured run of one target: the load generator's figures and the CPU its processes used. */
export interface RoundResult extends LoadResult {
  /** CPU seconds of the target's process trees during the run; null when not measured. */
  cpuSeconds: number | null;
}

export interface TargetSummary {
  id: string;
  label: string;
  requestsPerSecond: number;
  /** Median over the rounds of CPU µs per completed request; NaN when not measured. */
  cpuMicrosPerRequest: number;
  /** Median over the rounds of the cores the target kept busy (CPU seconds / wall seconds). */
  cores: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  rounds: RoundResult[];
}

export interface Ratio {
  name: string;
  /** What is compared: requests/s, CPU per request, or the paced run's p99. */
  metric: string;
  value: number;
  /** The bar from the issues, when there is one. */
  goal?: number;
  /** Whether the goal is met: `value >= goal` for throughput, `value <= goal` for cost and latency. */
  met?: boolean;
  /** What the figure is compared with when it is a calibration, not a goal. */
  note?: string;
}

export function median(values: readonly number[]): number {
  const sorted = values.filter((value) => !Number.isNaN(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? Number.NaN)
    : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

export function cpuMicrosPerRequest(round: RoundResult): number {
  return round.cpuSeconds === null || round.requests === 0
    ? Number.NaN
    : (round.cpuSeconds * 1e6) / round.requests;
}

export function summarise(id: string, label: string, rounds: RoundResult[]): TargetSummary {
  return {
    id,
    label,
    requestsPerSecond: median(rounds.map((round) => round.requestsPerSecond)),
    cpuMicrosPerRequest: median(rounds.map(cpuMicrosPerRequest)),
    cores: median(
      rounds.map((round) =>
        round.cpuSeconds === null
          ? Number.NaN
          : (round.cpuSeconds * round.requestsPerSecond) / round.requests,
      ),
    ),
    p50Ms: median(rounds.map((round) => round.p50Ms)),
    p99Ms: median(rounds.map((round) => round.p99Ms)),
    p999Ms: median(rounds.map((round) => round.p999Ms)),
    rounds,
  };
}

function formatted(value: number, digits: number): string {
  return Number.isNaN(value) ? '–' : value.toFixed(digits);
}

function table(rows: string[][], leftAligned: ReadonlySet<number>): string {
  const widths =
    rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  const lines = rows.map((row) =>
    row
      .map((cell, column) =>
        leftAligned.has(column) ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0),
      )
      .join('  '),
  );
  lines.splice(1, 0, widths.map((width) => '-'.repeat(width)).join('  '));
  return lines.join('\n');
}

const errors = (summary: TargetSummary): string =>
  String(summary.rounds.reduce((sum, round) => sum + round.socketErrors + round.badStatuses, 0));

/** The closed-loop table: as many requests as each target answers. */
export function renderThroughput(summaries: readonly TargetSummary[]): string {
  return table(
    [
      [
        'target',
        'req/s',
        'CPU µs/req',
        'cores',
        'p99 ms',
        'req/s per round',
        'CPU µs/req per round',
        'errors',
      ],
      ...summaries.map((summary) => [
        summary.label,
        Math.round(summary.requestsPerSecond).toLocaleString('en-US'),
        formatted(summary.cpuMicrosPerRequest, 1),
        formatted(summary.cores, 2),
        formatted(summary.p99Ms, 2),
        summary.rounds.map((round) => Math.round(round.requestsPerSecond)).join(' '),
        summary.rounds.map((round) => formatted(cpuMicrosPerRequest(round), 0)).join(' '),
        errors(summary),
      ]),
    ],
    new Set([0, 5, 6]),
  );
}

/** The paced table: the same moderate rate for every target, latency percentiles. */
export function renderPaced(summaries: readonly TargetSummary[]): string {
  return table(
    [
      ['target', 'req/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'CPU µs/req', 'p99 ms per round', 'errors'],
      ...summaries.map((summary) => [
        summary.label,
        Math.round(summary.requestsPerSecond).toLocaleString('en-US'),
        formatted(summary.p50Ms, 2),
        formatted(summary.p99Ms, 2),
        formatted(summary.p999Ms, 2),
        formatted(summary.cpuMicrosPerRequest, 1),
        summary.rounds.map((round) => formatted(round.p99Ms, 1)).join(' '),
        errors(summary),
      ]),
    ],
    new Set([0, 6]),
  );
}

export function renderRatios(ratios: readonly Ratio[]): string {
  return ratios
    .map(({ name, metric, value, goal, met, note }) => {
      const bar = metric === 'throughput' ? '≥' : '≤';
      const comment = goal !== undefined ? `goal ${bar} ${goal}: ${met ? 'met' : 'NOT met'}` : (note ?? '');
      return `${metric.padEnd(10)} ${name}: ${formatted(value, 2)}${comment === '' ? '' : `  (${comment})`}`;
    })
    .join('\n');
}
