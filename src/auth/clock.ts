/** Seconds since the Unix epoch (fractional). Token issuance and verification read time only through this. */
export type Clock = () => number;

/**
 * The clock tokens are issued and verified with: the system clock, shifted by env
 * `TOLLGATE_CLOCK_OFFSET_SECONDS` when set. The offset exists for tests only (an integration test
 * starts a second process "in the future" to see a token expire without sleeping for minutes); in
 * production it stays unset. A value that is not a finite number is ignored rather than trusted.
 */
export function processClock(env: NodeJS.ProcessEnv = process.env): Clock {
  const offset = Number(env.TOLLGATE_CLOCK_OFFSET_SECONDS ?? 0);
  if (!Number.isFinite(offset) || offset === 0) return () => Date.now() / 1000;
  return () => Date.now() / 1000 + offset;
}
