import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { MainConfig, ServerAddress, UpstreamsConfig } from '../config/types.ts';
import type { CertificatePem } from '../sources/kubernetes/ingress/certificates.ts';

/**
 * What the primary and its workers say to each other over the cluster IPC channel
 * (docs/workers.md). Every message carries `tollgate`, so they never mix with the messages
 * prom-client or rate-limiter-flexible send on the same channel.
 */

/** One process's metrics, as prom-client's `registry.getMetricsAsJSON()` gives them. */
export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

/**
 * A control-plane snapshot as sent to a worker (workers/snapshots.ts): validated by the primary,
 * compiled by the worker (no table travels; compile is pure, so it is the primary's table).
 */
export interface WorkerSnapshot {
  /** Increases with every config the primary sends; an answer names the one it is about. */
  seq: number;
  upstreams: UpstreamsConfig;
  /**
   * The masterkey as the primary resolved it (env, main.yaml, masterkey_file, upstreams.yaml): the
   * primary alone watches masterkey_file, and a rotated key reaches the workers as a new snapshot.
   */
  masterkey: string | null;
  /**
   * With `provider: kubernetes`, the ready servers of every `service:` reference of `upstreams`, by
   * the reference as written: the primary alone watches the API.
   */
  endpoints: Array<[reference: string, servers: ServerAddress[]]>;
  /**
   * TLS certificates from the Secrets Ingresses name (docs/ingress.md#tls), served by SNI beside
   * main.yaml's: the primary alone reads them from the API.
   */
  certificates: CertificatePem[];
}

/** The proxy ports a worker is bound to (port 0 in main.yaml: the first worker's choice, see primary). */
export interface WorkerPorts {
  proxy: number;
  proxyTls: number | null;
}

export type PrimaryMessage =
  /** First message to a new worker: everything it needs to serve, no file read of its own. */
  | { tollgate: 'start'; main: MainConfig; config: WorkerSnapshot }
  | { tollgate: 'config'; config: WorkerSnapshot }
  | { tollgate: 'metrics-request'; id: number }
  /** The admin port's `DELETE /cache` (docs/traffic.md#response-cache): each worker empties its own store. */
  | { tollgate: 'cache-purge'; id: number; host: string; prefix: string }
  | { tollgate: 'shutdown' };

export type WorkerMessage =
  /** Listening for messages: the primary answers with `start`. */
  | { tollgate: 'hello' }
  /** Listening and serving `seq` (after start, or after applying a config), on these ports. */
  | { tollgate: 'serving'; seq: number; hash: string; ports: WorkerPorts }
  | { tollgate: 'config-failed'; seq: number; error: string }
  /** The worker could not start (e.g. a listener cannot be bound); it exits 1 next. */
  | { tollgate: 'start-failed'; error: string }
  /** Readiness off: the worker is draining after a shutdown. */
  | { tollgate: 'draining' }
  | { tollgate: 'metrics'; id: number; snapshot: MetricsSnapshot }
  | { tollgate: 'cache-purged'; id: number; count: number };

export function isPrimaryMessage(message: unknown): message is PrimaryMessage {
  return typeof message === 'object' && message !== null && 'tollgate' in message;
}

export function isWorkerMessage(message: unknown): message is WorkerMessage {
  return typeof message === 'object' && message !== null && 'tollgate' in message;
}
