/**
 * How busy each upstream server is, read when asked (a scrape, /status), never counted on the
 * request path a second time: the connection slots (upstream/slots) already know how many requests
 * hold one and how many were handed out. The app names where to read it (`followServerLoad`); the
 * metrics tollgate_upstream_in_flight and tollgate_upstream_requests_total (observe/metrics) read it
 * here (docs/observability.md).
 */
export interface ServerLoad {
  /** The server as configured (`10.0.0.5:8080`): the `server` label of every upstream metric. */
  readonly address: string;
  /** Requests holding a connection slot of the server now (all routes together). */
  readonly inFlight: number;
  /** Requests sent to it since its slots were created (every attempt, retries included). */
  readonly dispatched: number;
}

let source: (() => readonly ServerLoad[]) | null = null;

/** Where the load comes from in this process (the proxy's connection pools); replaces any earlier. */
export function followServerLoad(read: () => readonly ServerLoad[]): void {
  source = read;
}

/** The load now; empty in a process that proxies nothing (a primary of workers). */
export function serverLoadNow(): readonly ServerLoad[] {
  return source === null ? [] : source();
}
