import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { MainConfig } from './config/types.ts';
import { http2StreamOf } from './local-response.ts';
import { flushLogs, type Logger } from './log.ts';
import type { Phase } from './runtime.ts';
import { startErrorOf } from './start-error.ts';

/** What the drain needs from a listener; http.Server and https.Server both fit. */
export interface DrainableServer {
  close(callback?: (error?: Error) => void): unknown;
  closeIdleConnections(): void;
  closeAllConnections(): void;
  readonly listening: boolean;
  listenerCount(event: 'checkContinue'): number;
  on(event: 'connection', listener: (socket: Socket) => void): unknown;
  prependListener(
    event: 'request' | 'checkContinue',
    listener: (req: IncomingMessage, res: ServerResponse) => void,
  ): unknown;
}

/** The admin listener: only needs closing at the very end. */
export interface ClosableServer {
  close(callback?: (error?: Error) => void): unknown;
  closeAllConnections(): void;
}

export interface LifecycleOptions {
  /** Whose phase readiness reports: `draining` from the first moment of a shutdown. */
  runtime: { phase: Phase };
  /** Listeners that stop accepting and drain: proxy, proxy TLS, token API. */
  servers: readonly DrainableServer[];
  /** Listeners kept up until the process exits, so the kubelet keeps seeing /readyz 503 (admin). */
  keepUntilExit?: readonly ClosableServer[];
  main: Pick<MainConfig, 'shutdownDelaySeconds' | 'shutdownGraceSeconds'>;
  logger: Logger;
  /** Run once the listeners are drained (upstream pools, config watcher, rate-limit store). */
  cleanup?: ReadonlyArray<() => unknown>;
}

export interface Lifecycle {
  /**
   * Starts the graceful shutdown (`reason` is logged: a signal name, or why the app closes) and
   * resolves once it finished; a second call returns the same promise.
   */
  shutdown(reason: string): Promise<void>;
  /**
   * The start failed (a port taken, a provider that would not start): logs why, once, as an error,
   * and makes the shutdown that follows release what was bound without the drain's lines, since
   * nothing was served and there is nothing to drain (docs/observability.md).
   */
  startFailed(error: unknown): void;
}

/** How long a cleanup step may take before the exit goes ahead anyway. */
const CLEANUP_TIMEOUT_MS = 2_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** `logger` without its info and debug lines (unless it is quieter already). */
function warningsOnly(logger: Logger): Logger {
  return logger.isLevelEnabled('info') ? logger.child({}, { level: 'warn' }) : logger;
}

/**
 * The graceful shutdown, in the order Kubernetes needs (docs/reload.md):
 *
 * 1. SIGTERM/SIGINT: phase `draining`, so /readyz answers 503 and the endpoint is removed. The proxy
 *    keeps serving for `shutdown_delay_seconds`, because kube-proxy and ingress controllers learn of
 *    the removal a little later and keep sending here meanwhile. Responses already carry
 *    `Connection: close`, so keep-alive clients move to another pod on their next request.
 * 2. Stop accepting (listening sockets closed: new connections are refused), close idle keep-alive
 *    connections, and let in-flight requests finish for up to `shutdown_grace_seconds`.
 * 3. Cut whatever is left, run the cleanup steps (upstream pools, watchers), close admin.
 *
 * Exiting is the caller's business: src/cli.ts exits 0 once this resolves, and at once with
 * 128 + signal number on a second signal.
 */
export function createLifecycle(options: LifecycleOptions): Lifecycle {
  const { runtime, servers, logger, main } = options;
  const keepUntilExit = options.keepUntilExit ?? [];
  const cleanup = options.cleanup ?? [];

  const openResponses = createOpenResponses();
  const sockets = new Set<Socket>();
  let draining = false;
  /** Listeners closed: from now on a connection is closed as soon as it has nothing in flight. */
  let stoppedAccepting = false;
  let onAllClosed: (() => void) | null = null;

  const closeAfterResponse = (res: ServerResponse) => {
    const session = http2StreamOf(res)?.session;
    if (session !== undefined) {
      // HTTP/2 has no Connection header: GOAWAY lets this stream and the others in flight finish
      // and sends the client's next request to a new connection (RFC 9113 §6.8).
      if (!session.closed) session.close();
      return;
    }
    // Headers already sent (a streaming response): its connection is closed once idle instead.
    if (!res.headersSent) res.setHeader('connection', 'close');
  };

  for (const server of servers) {
    // Tracked per socket rather than through server.close()'s callback: upgraded (WebSocket) sockets
    // leave the HTTP server's bookkeeping but must still be waited for and, at the end, cut.
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.once('close', () => {
        sockets.delete(socket);
        if (sockets.size === 0) onAllClosed?.();
      });
    });
    // One listener function per server, not a closure per response, and `on` rather than `once`
    // (a response closes exactly once): this runs for every request (docs/benchmark.md).
    function untrack(this: ServerResponse) {
      openResponses.closed(this);
      // A keep-alive connection whose response went out before the drain goes idle now: close it
      // (once Node has marked it idle, hence the next turn of the loop).
      if (stoppedAccepting) setImmediate(() => server.closeIdleConnections());
    }
    const track = (req: IncomingMessage, res: ServerResponse) => {
      if (draining) closeAfterResponse(res);
      openResponses.opened(req, res);
      res.on('close', untrack);
    };
    server.prependListener('request', track);
    // Where the app answers `Expect: 100-continue` itself, those requests arrive as 'checkContinue'
    // instead. Only then: any listener stops Node from sending the 100 and the request on by itself.
    if (server.listenerCount('checkContinue') > 0) server.prependListener('checkContinue', track);
  }

  let finished: Promise<void> | null = null;
  /** Set by startFailed(): the drain's steps run, only its warnings are logged. */
  let failedStart = false;

  const runCleanup = async () => {
    await Promise.allSettled(
      cleanup.map((step) =>
        Promise.race([Promise.resolve().then(step), sleep(CLEANUP_TIMEOUT_MS)]).catch((error: unknown) =>
          logger.warn({ err: error }, 'a shutdown cleanup step failed'),
        ),
      ),
    );
  };

  const drain = async (signal: string, wasReady: boolean) => {
    // Readiness never turned on (a failed or interrupted start): nobody is routing here, no delay.
    const delayMs = wasReady ? main.shutdownDelaySeconds * 1000 : 0;
    const graceMs = main.shutdownGraceSeconds * 1000;
    const graceEnds = Date.now() + delayMs + graceMs;
    // After a failed start nothing was served: the drain's info lines would only mislead (startFailed).
    const logger = failedStart ? warningsOnly(options.logger) : options.logger;
    const starting = wasReady
      ? 'shutting down: readiness is off, still serving until the delay ends'
      : 'shutting down before it was ready: no delay';
    logger.info(
      {
        signal,
        shutdown_delay_seconds: main.shutdownDelaySeconds,
        shutdown_grace_seconds: main.shutdownGraceSeconds,
      },
      starting,
    );
    for (const res of openResponses.latestPerConnection()) closeAfterResponse(res);
    await sleep(delayMs);

    stoppedAccepting = true;
    for (const server of servers) {
      if (server.listening) server.close(() => {});
      server.closeIdleConnections();
    }
    logger.info(
      { in_flight: openResponses.count, connections: sockets.size },
      'stopped accepting connections; draining',
    );
    // Every connection closed (each goes as soon as its last response is out), or the grace is over.
    const allClosed = new Promise<void>((resolve) => {
      onAllClosed = resolve;
      if (sockets.size === 0) resolve();
    });
    let graceTimer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      graceTimer = setTimeout(resolve, graceMs);
    });
    await Promise.race([allClosed, graceOver]);
    clearTimeout(graceTimer);
    const cut = sockets.size;
    if (cut > 0) {
      logger.warn(
        { connections: cut, in_flight: openResponses.count },
        'shutdown_grace_seconds elapsed; closing the remaining connections',
      );
      for (const server of servers) server.closeAllConnections();
      for (const socket of sockets) socket.destroy();
    }

    await runCleanup();
    for (const server of keepUntilExit) {
      server.close(() => {});
      server.closeAllConnections();
    }
    logger.info({ connections_cut: cut }, 'shutdown complete');
    // Log lines still buffered get what is left of the grace period, never more: a stdout nobody
    // reads must not hold the exit (docs/observability.md#when-stdout-stalls).
    await flushLogs(logger, graceEnds - Date.now());
  };

  return {
    shutdown(reason) {
      if (finished === null) {
        draining = true;
        const wasReady = runtime.phase === 'ready';
        runtime.phase = 'draining';
        finished = drain(reason, wasReady);
      }
      return finished;
    },
    startFailed(error) {
      if (failedStart) return;
      failedStart = true;
      logger.error(
        // The words of the stderr line, without its `tollgate: ` prefix (a worker's reason arrives with it).
        {
          event: 'start_failed',
          error: (error instanceof Error ? error.message : String(error)).replace(/^tollgate: /, ''),
        },
        'start-up failed: exiting without serving',
      );
    },
  };
}

/** A connection as the drain sees it: an HTTP/1.1 socket or an HTTP/2 session. */
interface Connection {
  readonly destroyed: boolean;
  once(event: 'close', listener: () => void): unknown;
}

/**
 * The responses in flight, as the drain needs them: how many, and the latest one of each connection
 * (closing a connection after its latest response lets the ones before it finish; an HTTP/2 session
 * is closed whole).
 *
 * Why not a Set of open responses: a Set that every request adds to and deletes from is rehashed into
 * a new table every few dozen requests, and V8 links each discarded table to its successor (for
 * iterators still walking it). Once a discarded table has been promoted to the old generation, that
 * link keeps the newer tables, and every response they held, alive through each young collection
 * until the next full one: under steady load every request's objects were copied and promoted, about
 * 6 MB per scavenge (docs/benchmark.md, "Bytes surviving a scavenge"). Here a request only overwrites
 * its connection's entry, and entries come and go with connections, not requests.
 */
function createOpenResponses() {
  const latest = new Map<Connection, ServerResponse | null>();
  let count = 0;
  const connectionOf = (req: IncomingMessage, res: ServerResponse): Connection =>
    http2StreamOf(res)?.session ?? req.socket;
  return {
    get count() {
      return count;
    },
    opened(req: IncomingMessage, res: ServerResponse): void {
      count++;
      const connection = connectionOf(req, res);
      if (connection.destroyed) return;
      if (!latest.has(connection)) connection.once('close', () => latest.delete(connection));
      latest.set(connection, res);
    },
    closed(res: ServerResponse): void {
      count--;
      const connection = connectionOf(res.req, res);
      if (latest.get(connection) === res) latest.set(connection, null);
    },
    *latestPerConnection(): Iterable<ServerResponse> {
      for (const res of latest.values()) if (res !== null) yield res;
    },
  };
}

/**
 * Runs a start; when it fails nothing is served half-way: what was bound is released (close), then
 * the first problem is rethrown, a listener that could not be bound as the CLI's one line.
 */
export async function startOrRelease<T>(
  lifecycle: Lifecycle,
  close: (reason: string) => Promise<unknown>,
  start: () => Promise<T>,
): Promise<T> {
  try {
    return await start();
  } catch (error) {
    lifecycle.startFailed(error);
    await close('start-up failed');
    throw startErrorOf(error);
  }
}
