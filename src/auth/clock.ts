/** Seconds since the Unix epoch (fractional). Token issuance and verification read time only through this. */
export type Clock = () => number;

/** The clock tokens use unless the app is given another (src/app.ts `clock`). */
export const systemClock: Clock = () => Date.now() / 1000;
