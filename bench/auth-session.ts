/** The session cookie the bench's forward-auth service (reference/auth-service.ts) accepts. */
export const BENCH_SESSION_COOKIE = '_oauth2_proxy=bench-session';
