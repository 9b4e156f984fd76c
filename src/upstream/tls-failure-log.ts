import type { Logger } from '../log.ts';
import type { UpstreamServer } from '../routing/types.ts';

/**
 * Why a TLS handshake with an upstream failed, as a warn line (docs/observability.md#log-events): the
 * 502 and `tollgate_upstream_errors_total{kind="tls"}` say that it failed, this line says why (the
 * OpenSSL verify code or Node's error code: UNABLE_TO_VERIFY_LEAF_SIGNATURE, ERR_TLS_CERT_ALTNAME_INVALID,
 * TOLLGATE_NO_H2…), as nginx logs its upstream verify errors.
 *
 * A broken upstream fails every request, so the lines are rate-limited: the first failure of a server
 * with a given code is logged at once, then at most one line per `intervalMs` for that pair, which
 * counts the failures left unlogged since (`suppressed`). Nothing credential-bearing is logged: the
 * server's configured address, the name checked, the code and the TLS library's message.
 */

/** One line per server and code at most this often. */
export const TLS_FAILURE_LOG_INTERVAL_MS = 10_000;
/** Pairs remembered at most; beyond it (endpoints churning) the memory starts over, never grows. */
const MAX_REMEMBERED = 1024;

export type TlsFailureLog = (route: string, server: UpstreamServer, error: Error) => void;

interface Remembered {
  loggedAt: number;
  suppressed: number;
}

export function createTlsFailureLog(
  logger: Logger,
  now: () => number = Date.now,
  intervalMs = TLS_FAILURE_LOG_INTERVAL_MS,
): TlsFailureLog {
  const remembered = new Map<string, Remembered>();
  return (route, server, error) => {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown';
    const key = `${server.address} ${code}`;
    const at = now();
    const seen = remembered.get(key);
    if (seen !== undefined && at - seen.loggedAt < intervalMs) {
      seen.suppressed++;
      return;
    }
    if (seen === undefined && remembered.size >= MAX_REMEMBERED) remembered.clear();
    const suppressed = seen?.suppressed ?? 0;
    remembered.set(key, { loggedAt: at, suppressed: 0 });
    logger.warn(
      {
        event: 'upstream_tls_failed',
        route,
        server: server.address,
        server_name: server.transport.tls?.serverName ?? null,
        code,
        reason: error.message,
        ...(suppressed > 0 ? { suppressed } : {}),
      },
      'TLS with the upstream server failed: its requests answer 502 until it succeeds',
    );
  };
}
