import pino from 'pino';
import type { LogLevel } from './config/types.ts';
import { logLinesDropped } from './observe/metrics.ts';

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

/**
 * Most bytes of log lines held while stdout does not take them (a log collector that fell behind, a
 * stalled pipe): beyond this, lines are dropped and counted in tollgate_log_lines_dropped_total
 * rather than held without bound (docs/observability.md#when-stdout-stalls).
 */
export const LOG_BUFFER_BYTES = 4 * 1024 * 1024;

/** stdout, written asynchronously through a bounded buffer. */
function stdoutDestination(): pino.DestinationStream {
  // process.stdout opens fd 1 through libuv, which puts a pipe in non-blocking mode: a write stdout
  // does not take then fails (SonicBoom retries it later) instead of holding a libuv thread in
  // write(2), which the process exit would wait for.
  const destination = pino.destination({ dest: process.stdout.fd, sync: false, maxLength: LOG_BUFFER_BYTES });
  destination.on('drop', (data: string | Buffer) => {
    let lines = 0;
    for (let at = data.indexOf('\n'); at !== -1; at = data.indexOf('\n', at + 1)) lines++;
    logLinesDropped.inc(Math.max(lines, 1));
  });
  return destination;
}

type Flushable = pino.DestinationStream & {
  flushSync?(): void;
  /** SonicBoom's count of bytes written to it and not yet taken by the file descriptor. */
  _len?: number;
};

const streamOf = (logger: Logger) => (logger as unknown as Record<symbol, Flushable>)[pino.symbols.streamSym];

/**
 * Waits for the buffered log lines to reach stdout, for at most `withinMs`; resolves with whether
 * they did. When they did not, the rest is given up: the exit must not then block writing it
 * synchronously (pino's exit hook) while nobody reads stdout (docs/observability.md#when-stdout-stalls).
 */
export function flushLogs(logger: Logger, withinMs: number): Promise<boolean> {
  const stream = streamOf(logger);
  // SonicBoom's flush() answers at once when nothing holds it back, buffered or not: watch the
  // buffer itself. Another destination (a test's) has nothing to wait for.
  if (typeof stream?._len !== 'number') return Promise.resolve(true);
  const deadline = Date.now() + Math.max(0, withinMs);
  return new Promise((resolve) => {
    const check = () => {
      if (stream._len === 0) return resolve(true);
      if (Date.now() >= deadline) {
        abandonLogs(logger);
        return resolve(false);
      }
      setTimeout(check, 20);
    };
    check();
  });
}

/** Gives up the lines not written yet, so exiting never waits for stdout. */
export function abandonLogs(logger: Logger): void {
  const stream = streamOf(logger);
  if (stream && typeof stream.flushSync === 'function') stream.flushSync = () => {};
}

export function createLogger(level: LogLevel = 'info', destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'tollgate' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? stdoutDestination(),
  );
}
