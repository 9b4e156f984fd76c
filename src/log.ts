import pino from 'pino';
import type { LogLevel } from './config/types.ts';

/**
 * Paths pino censors in every log line. Declared once (pino's redaction is compiled, so it costs
 * nothing on lines that lack these keys); test/unit/log.test.ts proves each one is censored.
 */
export const REDACTED_PATHS = [
  'headers.authorization',
  'headers["x-api-key"]',
  'headers.cookie',
  'headers["proxy-authorization"]',
  'master_key',
  'masterkey',
  'password',
  'token',
  'creds',
];

export type Logger = pino.Logger;

export function createLogger(level: LogLevel = 'info', destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'tollgate' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
