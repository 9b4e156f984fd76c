import {
  type ConfigurationOptions,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  Observable,
  type RequestContext,
  type ResponseContext,
  Watch,
} from '@kubernetes/client-node';
import type { Logger } from '../../log.ts';
import type { WatchHealth } from './watch-health.ts';
import type { RestartReason, WatchedResource } from './watch-kinds.ts';

export interface WatchTuning {
  /** First retry delay after an error; doubles per failure up to maxBackoffMs, then jittered. */
  initialBackoffMs: number;
  maxBackoffMs: number;
  /** A watch that sends nothing (not even a bookmark) for this long is reopened. */
  idleTimeoutMs: number;
  /** A list that has not answered after this long is abandoned and retried (a slow API server). */
  listTimeoutMs: number;
  /** Asked of the server so that it ends (and we resume) each watch after a few minutes. */
  watchTimeoutSeconds: number;
  random: () => number;
}

export const DEFAULT_TUNING: WatchTuning = {
  initialBackoffMs: 500,
  maxBackoffMs: 30_000,
  // The API server sends a bookmark about once a minute when asked; a watch silent for longer than
  // that is not coming back.
  idleTimeoutMs: 90_000,
  listTimeoutMs: 30_000,
  watchTimeoutSeconds: 300,
  random: Math.random,
};

/**
 * The delay before retry number `attempt` (1-based): exponential, capped, with jitter so that many
 * replicas restarted together do not retry in lockstep against a recovering API server.
 */
export function backoffDelay(
  attempt: number,
  tuning: Pick<WatchTuning, 'initialBackoffMs' | 'maxBackoffMs' | 'random'>,
): number {
  const ceiling = Math.min(tuning.maxBackoffMs, tuning.initialBackoffMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (ceiling / 2) * tuning.random());
}

export interface ResourceWatchOptions<T extends KubernetesObject> {
  kubeConfig: KubeConfig;
  resource: WatchedResource;
  /** Names what is watched in log lines, e.g. `EndpointSlices of web.apps`. */
  description: string;
  /** The collection path: namespaced, except Ingresses (and their Services) when `watch_namespaces` is unset, and IngressClasses. */
  path: string;
  /** The typed list call of the client library, with the same selectors as the watch; pass it `options`. */
  list: (options: ConfigurationOptions) => Promise<KubernetesListObject<T>>;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  /**
   * The full current set of objects, after the first list and after every change (coalesced);
   * `desired` is false when every change since the last call only touched objects' status (kinds of
   * GENERATION_KINDS only; always true for the others).
   */
  onObjects: (objects: readonly T[], desired: boolean) => void;
  health: WatchHealth;
  logger: Logger;
  tuning?: Partial<WatchTuning> | undefined;
}

/** What every watch of one source shares, and what it does after any watch brought a change. */
export interface WatchContext {
  kubeConfig: KubeConfig;
  health: WatchHealth;
  logger: Logger;
  tuning?: Partial<WatchTuning> | undefined;
  /** After each new set of objects of any watch (a source schedules its translation here). */
  onChange(): void;
}

/** A source's `watch(…)`: startResourceWatch with the source's shared context filled in. */
export type StartWatch = <T extends KubernetesObject>(
  resource: WatchedResource,
  description: string,
  path: string,
  list: ResourceWatchOptions<T>['list'],
  onObjects: (objects: readonly T[]) => void,
  fieldSelector?: string,
) => ResourceWatch;

export function watchStarter(context: WatchContext): StartWatch {
  return (resource, description, path, list, onObjects, fieldSelector) =>
    startResourceWatch({
      kubeConfig: context.kubeConfig,
      resource,
      description,
      path,
      list,
      fieldSelector,
      onObjects: (objects, desired) => {
        onObjects(objects);
        if (desired) context.onChange();
      },
      health: context.health,
      logger: context.logger,
      tuning: context.tuning,
    });
}

/**
 * Kinds whose `metadata.generation` the API server bumps on every change of what they ask for (their
 * spec): a change of these that leaves generation, labels and annotations alone is a status write
 * (often Tollgate's own, for every object it serves) and cannot change a translation; translating
 * everything again after each of those made start-up quadratic in the number of objects
 * (docs/benchmark.md#control-plane-at-scale). Other kinds count every change.
 */
const GENERATION_KINDS: ReadonlySet<WatchedResource> = new Set([
  'ingresses',
  'gateways',
  'httproutes',
  'grpcroutes',
  'referencegrants',
  'tollgatepolicies',
  'gatewayclasses',
]);

/** What of an object a translation can read, besides status; null: no generation to tell by. */
function desiredOf(object: KubernetesObject): string | null {
  const metadata = object.metadata;
  if (metadata?.generation == null) return null;
  return JSON.stringify([
    metadata.generation,
    metadata.labels ?? null,
    metadata.annotations ?? null,
    metadata.deletionTimestamp ?? null,
  ]);
}

export interface ResourceWatch {
  /** True once a list succeeded; stays true (the last objects keep serving while the API is away). */
  readonly synced: boolean;
  /** The object as last received (a status writer's current copy), looked up, not searched. */
  get(name: string, namespace?: string): KubernetesObject | undefined;
  stop(): Promise<void>;
}

/**
 * One informer: list, then watch from the list's resourceVersion, through the client library's
 * ListWatch (which also relists on 410 and resumes after a stream ends). What it adds: bookmarks and
 * a server-side watch timeout, an idle timeout, retry with jittered backoff after errors (ListWatch
 * gives up on the first one), and a state (up/down, synced) reported to WatchHealth — logged once
 * per change, not once per retry.
 */
export function startResourceWatch<T extends KubernetesObject>(
  options: ResourceWatchOptions<T>,
): ResourceWatch {
  const tuning = { ...DEFAULT_TUNING, ...options.tuning };
  const { health, logger, resource, description } = options;
  const member = health.register(resource);
  let stopped = false;
  let synced = false;
  /** A list succeeded and its objects are not handed over yet. */
  let listed = false;
  let failures = 0;
  let retryTimer: NodeJS.Timeout | undefined;
  let emitScheduled = false;
  /** Since the last emit, some change touched more than status (or a list came in). */
  let desiredChange = true;
  const pendingDelays = new Set<NodeJS.Timeout>();

  const markUp = () => {
    failures = 0;
    if (member.setUp(true)) logger.info({ resource, watch: description }, 'kubernetes watch up');
  };
  const markDown = (reason: RestartReason, error: unknown) => {
    if (member.setUp(false)) {
      logger.warn(
        { resource, watch: description, reason, error: describeError(error) },
        'kubernetes watch down; serving the last known state',
      );
    }
  };

  const watch = new ReportingWatch(options.kubeConfig, tuning, {
    isStopped: () => stopped,
    onEstablished: () => {
      member.touch();
      markUp();
    },
    onEvent: () => member.touch(),
    onEnded: (reason, error) => {
      member.restarted(reason);
      if (isError(reason)) markDown(reason, error);
    },
  });

  const listWatch = new ListWatch<T>(
    options.path,
    watch,
    async () => {
      try {
        const list = await options.list(timeoutOptions(tuning.listTimeoutMs));
        // Synced once the objects were handed over (below), not before: a source that sees every
        // watch synced must also hold every watch's objects (else a Service listed a moment ago
        // reads as missing, and readiness comes before the routes).
        listed = true;
        desiredChange = true;
        markUp();
        scheduleEmit();
        return list;
      } catch (error) {
        const reason = classifyError(error);
        member.restarted(reason);
        markDown(reason, error);
        throw error;
      }
    },
    false,
    options.labelSelector,
    options.fieldSelector,
    {
      // ListWatch pauses between stream ends that brought no event; these pauses must die with stop().
      delayFn: (ms) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            pendingDelays.delete(timer);
            resolve();
          }, ms);
          timer.unref();
          pendingDelays.add(timer);
        }),
    },
  );

  const scheduleEmit = () => {
    if (emitScheduled || stopped) return;
    emitScheduled = true;
    // After the current burst: a relist delivers its adds and deletes synchronously, one by one.
    setImmediate(() => {
      emitScheduled = false;
      if (stopped || (!synced && !listed)) return;
      if (listed) {
        listed = false;
        synced = true;
        member.synced();
      }
      const desired = desiredChange;
      desiredChange = false;
      options.onObjects(listWatch.list(), desired);
    });
  };
  // Per object, what a translation reads of it (GENERATION_KINDS), kept from event to event.
  const tracked = GENERATION_KINDS.has(resource) ? new Map<string, string | null>() : null;
  const idOf = (object: KubernetesObject) =>
    `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;
  const noteChange = (object: KubernetesObject, deleted: boolean) => {
    if (tracked === null) {
      desiredChange = true;
      return;
    }
    const id = idOf(object);
    if (deleted) {
      tracked.delete(id);
      desiredChange = true;
      return;
    }
    const desired = desiredOf(object);
    if (desired === null || tracked.get(id) !== desired) desiredChange = true;
    tracked.set(id, desired);
  };
  listWatch.on('add', (object) => {
    noteChange(object, false);
    scheduleEmit();
  });
  listWatch.on('update', (object) => {
    noteChange(object, false);
    scheduleEmit();
  });
  listWatch.on('delete', (object) => {
    noteChange(object, true);
    scheduleEmit();
  });
  listWatch.on('error', () => {
    // ListWatch stops at the first error (counted by the list or watch wrapper): retry later.
    if (stopped) return;
    failures += 1;
    const delay = backoffDelay(failures, tuning);
    logger.debug({ resource, watch: description, delay_ms: delay }, 'kubernetes watch retry scheduled');
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (!stopped) void listWatch.start();
    }, delay);
    retryTimer.unref();
  });

  void listWatch.start();
  return {
    get synced() {
      return synced;
    },
    get: (name, namespace) => listWatch.get(name, namespace),
    async stop() {
      stopped = true;
      clearTimeout(retryTimer);
      for (const timer of pendingDelays) clearTimeout(timer);
      pendingDelays.clear();
      member.unregister();
      await listWatch.stop();
    },
  };
}

interface WatchReporter {
  isStopped(): boolean;
  onEstablished(): void;
  onEvent(): void;
  onEnded(reason: RestartReason, error: unknown): void;
}

/**
 * The client library's Watch, asking for bookmarks and a server-side timeout, with an idle timeout,
 * and telling the reporter when a stream opened, delivered, or ended and why.
 */
class ReportingWatch extends Watch {
  readonly #tuning: WatchTuning;
  readonly #reporter: WatchReporter;

  constructor(kubeConfig: KubeConfig, tuning: WatchTuning, reporter: WatchReporter) {
    super(kubeConfig);
    this.#tuning = tuning;
    this.#reporter = reporter;
    // Watch's inactivity timeout (30 s by default) is typed private but is its only tuning knob.
    (this as unknown as { requestTimeoutMs: number }).requestTimeoutMs = tuning.idleTimeoutMs;
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    if (this.#reporter.isStopped()) return new AbortController();
    let ended = false;
    let established = false;
    let expired = false;
    const params = {
      ...queryParams,
      allowWatchBookmarks: true,
      timeoutSeconds: this.#tuning.watchTimeoutSeconds,
    };
    const controller = await super.watch(
      path,
      params,
      (phase, object, raw) => {
        this.#reporter.onEvent();
        if (phase === 'ERROR' && (object as { code?: number } | undefined)?.code === 410) expired = true;
        callback(phase, object, raw);
      },
      (err) => {
        ended = true;
        if (!this.#reporter.isStopped()) {
          this.#reporter.onEnded(endReason(err, established, expired), err);
        }
        done(err);
      },
    );
    if (!ended) {
      established = true;
      this.#reporter.onEstablished();
    }
    return controller;
  }
}

/**
 * Why a stream ended. A connection cut after the stream was open (an API server restart, a load
 * balancer's idle cut) is a routine end like the server's own; failing to open one is an error.
 */
function endReason(error: unknown, established: boolean, expired: boolean): RestartReason {
  if (!error) return expired ? 'gone' : 'closed';
  const reason = classifyError(error);
  return established && reason === 'unreachable' ? 'closed' : reason;
}

function isError(reason: RestartReason): boolean {
  return reason !== 'closed' && reason !== 'timeout' && reason !== 'gone';
}

/** Per-call options giving a list request a deadline (the generated client has none by default). */
/** Call options that abort a request after `ms` (a slow API server never holds a caller for good). */
export function timeoutOptions(ms: number): ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (context: RequestContext) => {
          context.setSignal(AbortSignal.timeout(ms));
          return new Observable(Promise.resolve(context));
        },
        post: (context: ResponseContext) => new Observable(Promise.resolve(context)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}

/** Maps what the client library throws (ApiException, Watch's status error, fetch errors). */
export function classifyError(error: unknown): RestartReason {
  const e = error as { name?: string; code?: unknown; statusCode?: unknown } | null;
  if (e?.name === 'TimeoutError') return 'timeout';
  const status =
    typeof e?.statusCode === 'number' ? e.statusCode : typeof e?.code === 'number' ? e.code : null;
  if (status === null) return 'unreachable';
  if (status === 410) return 'gone';
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  return 'server_error';
}

/** One line about an error, without the response body (which can be large). */
function describeError(error: unknown): string {
  const e = error as {
    code?: unknown;
    statusCode?: unknown;
    message?: string;
    cause?: { code?: string };
  } | null;
  const status =
    typeof e?.statusCode === 'number' ? e.statusCode : typeof e?.code === 'number' ? e.code : null;
  const body = (error as { body?: unknown } | null)?.body;
  const message =
    typeof body === 'string'
      ? statusMessage(body)
      : ((body as { message?: string } | undefined)?.message ?? null);
  // A failed watch carries only the status text (Watch does not read the body); a list the Status.
  if (status !== null) return `HTTP ${status}: ${message ?? e?.message?.split('\n', 1)[0] ?? ''}`;
  return e?.cause?.code ?? e?.message?.split('\n', 1)[0] ?? String(error);
}

function statusMessage(body: string): string | null {
  try {
    return (JSON.parse(body) as { message?: string }).message ?? null;
  } catch {
    return null;
  }
}
