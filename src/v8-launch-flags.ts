/**
 * V8 settings that only work on Node's command line (V8 sizes its heap before any script runs, so
 * `v8.setFlagsFromString` is too late for them). The container image's entrypoint, `npm start` and
 * the benchmark pass them; the primary passes them on to every worker it forks. docs/benchmark.md
 * ("Young-generation size") has the measurements.
 *
 * `--max-semi-space-size=8` (MiB): under sustained load V8 grows the young generation up to 64 MiB
 * on a machine with this much memory, and on a busy VM each young collection then paused the event
 * loop for 6–40 ms even though little survived it; capped at 8 MiB, collections come more often but
 * stay around 1–3 ms, which is what the paced p99 measures. The price, when the machine is fast and
 * the default would have behaved: 5–10 % more CPU per request. The cap bounds the worst case.
 */
export const V8_LAUNCH_FLAGS: readonly string[] = ['--max-semi-space-size=8'];

/** `execArgv` plus every launch flag it does not already set (an operator's own value wins). */
export function withLaunchFlags(execArgv: readonly string[]): string[] {
  const nameOf = (flag: string) => flag.split('=')[0]?.replaceAll('_', '-');
  const given = new Set(execArgv.map(nameOf));
  return [...execArgv, ...V8_LAUNCH_FLAGS.filter((flag) => !given.has(nameOf(flag)))];
}
