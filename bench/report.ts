/**
 * Reduces the rounds of each target to medians and renders them: a table for the terminal and a
 * JSON document for bench/results/latest.json.
 */
import type { LoadResult } from './load.ts';

export interface TargetSummary {
  id: string;
  label: string;
  requestsPerSecond: number;
  p99Ms: number;
  rounds: LoadResult[];
}

export interface Ratio {
  name: string;
  value: number;
  /** The bar from the issues (Tollgate ≥ 0.45 × nginx, JWT ≥ 0.9 × no auth), when there is one. */
  goal?: number;
  /** What the figure is compared with when it is a calibration, not a goal. */
  note?: string;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? Number.NaN)
    : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

export function summarise(id: string, label: string, rounds: LoadResult[]): TargetSummary {
  return {
    id,
    label,
    requestsPerSecond: median(rounds.map((round) => round.requestsPerSecond)),
    p99Ms: median(rounds.map((round) => round.p99Ms)),
    rounds,
  };
}

export function ratio(
  name: string,
  numerator: TargetSummary | undefined,
  denominator: TargetSummary | undefined,
  bar: { goal: number } | { note: string },
): Ratio | null {
  if (numerator === undefined || denominator === undefined) return null;
  return { name, value: numerator.requestsPerSecond / denominator.requestsPerSecond, ...bar };
}

function pad(text: string, width: number, alignRight: boolean): string {
  return alignRight ? text.padStart(width) : text.padEnd(width);
}

export function renderTable(summaries: readonly TargetSummary[], ratios: readonly Ratio[]): string {
  const rows = [
    ['target', 'req/s (median)', 'p99 ms (median)', 'req/s per round', 'errors'],
    ...summaries.map((summary) => [
      summary.label,
      Math.round(summary.requestsPerSecond).toLocaleString('en-US'),
      summary.p99Ms.toFixed(2),
      summary.rounds.map((round) => Math.round(round.requestsPerSecond)).join(' '),
      String(summary.rounds.reduce((sum, round) => sum + round.socketErrors + round.badStatuses, 0)),
    ]),
  ];
  const widths =
    rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  const lines = rows.map((row) =>
    row.map((cell, column) => pad(cell, widths[column] ?? 0, column > 0 && column !== 3)).join('  '),
  );
  lines.splice(1, 0, widths.map((width) => '-'.repeat(width)).join('  '));
  if (ratios.length > 0) lines.push('');
  for (const { name, value, goal, note } of ratios) {
    const comment =
      goal !== undefined ? `goal ≥ ${goal}: ${value >= goal ? 'met' : 'NOT met'}` : (note ?? '');
    lines.push(`${name}: ${value.toFixed(2)}${comment === '' ? '' : `  (${comment})`}`);
  }
  return lines.join('\n');
}
