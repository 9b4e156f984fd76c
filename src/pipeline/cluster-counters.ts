import cluster, { type Worker } from 'node:cluster';
import { RateLimiterCompatibleAbstract, RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

/**
 * Rate-limit counters shared by every worker, kept by the primary (docs/workers.md): one budget for
 * the whole set, as with one process.
 *
 * rate-limiter-flexible's RateLimiterCluster does this with one IPC message each way per request,
 * plus a 5 s timer and a string-keyed promise record per request. With `workers: 2` that made a
 * rate-limited route cost 1.58 × the CPU per request of an open one, and gave fewer requests per
 * second than a single process (docs/benchmark.md, "Rate limits with workers"). Here a worker sends
 * every count asked for in one turn of its event loop as one message, and the primary answers them
 * in one message, in order; the counting itself stays rate-limiter-flexible's (a RateLimiterMemory
 * per limit in the primary), so the answers are exactly what one process would give.
 */

const CHANNEL = 'tollgate:counters';

type Operation = 'consume' | 'get';
/** [operation, keyPrefix, points, duration in seconds, key] */
type Ask = [Operation, string, number, number, string];
/**
 * One answer: null (`get` of an unknown key); [1, ...state] resolved; [0, ...state] refused (over
 * the limit); [2, message] the counter failed.
 */
type State = [remaining: number, msBeforeNext: number, consumed: number, first: boolean];
type Answer = null | [1 | 0, ...State] | [2, string];

interface AskBatch {
  channel: typeof CHANNEL;
  id: number;
  asks: Ask[];
}
interface AnswerBatch {
  channel: typeof CHANNEL;
  id: number;
  answers: Answer[];
}

const isAskBatch = (message: unknown): message is AskBatch =>
  typeof message === 'object' &&
  message !== null &&
  (message as AskBatch).channel === CHANNEL &&
  Array.isArray((message as AskBatch).asks);
const isAnswerBatch = (message: unknown): message is AnswerBatch =>
  typeof message === 'object' &&
  message !== null &&
  (message as AnswerBatch).channel === CHANNEL &&
  Array.isArray((message as AnswerBatch).answers);

const stateOf = (res: RateLimiterRes): State => [
  res.remainingPoints,
  res.msBeforeNext,
  res.consumedPoints,
  res.isFirstInDuration,
];

/**
 * The primary's side: answers every worker's batches from one RateLimiterMemory per limit. Call once,
 * before forking the workers.
 */
export function serveClusterCounters(): void {
  const limiters = new Map<string, RateLimiterMemory>();
  const limiterFor = (keyPrefix: string, points: number, duration: number) => {
    let limiter = limiters.get(keyPrefix);
    if (limiter === undefined) {
      limiter = new RateLimiterMemory({ keyPrefix, points, duration });
      limiters.set(keyPrefix, limiter);
    }
    return limiter;
  };
  const answer = async ([operation, keyPrefix, points, duration, key]: Ask): Promise<Answer> => {
    const limiter = limiterFor(keyPrefix, points, duration);
    try {
      if (operation === 'get') {
        const res = await limiter.get(key);
        return res === null ? null : [1, ...stateOf(res)];
      }
      return [1, ...stateOf(await limiter.consume(key))];
    } catch (rejection) {
      return rejection instanceof RateLimiterRes ? [0, ...stateOf(rejection)] : [2, String(rejection)];
    }
  };
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (!isAskBatch(message)) return;
    // The asks are counted in the order sent (RateLimiterMemory counts before its promise settles),
    // and answered together.
    void Promise.all(message.asks.map(answer)).then((answers) => {
      if (!worker.isConnected()) return;
      const reply: AnswerBatch = { channel: CHANNEL, id: message.id, answers };
      worker.send(reply);
    });
  });
}

interface Waiting {
  resolve(res: RateLimiterRes | null): void;
  reject(reason: unknown): void;
}

/** The worker's side of the channel: one per process, shared by every limiter. */
class CountersChannel {
  readonly #timeoutMs: number;
  #asks: Ask[] = [];
  #waiting: Waiting[] = [];
  #flushScheduled = false;
  #nextId = 1;
  /**
   * Batches sent and not yet answered, oldest first (the primary answers in order, so the match is
   * almost always the first). An array, not a Map keyed by id: a Map that gains and loses a key per
   * batch keeps the requests' continuations alive through young collections (see lifecycle.ts,
   * createOpenResponses).
   */
  readonly #inFlight: { id: number; waiting: Waiting[]; timer: NodeJS.Timeout }[] = [];

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
    process.on('message', (message: unknown) => {
      if (isAnswerBatch(message)) this.#settle(message);
    });
  }

  ask(ask: Ask): Promise<RateLimiterRes | null> {
    return new Promise((resolve, reject) => {
      this.#asks.push(ask);
      this.#waiting.push({ resolve, reject });
      if (this.#flushScheduled) return;
      this.#flushScheduled = true;
      // After the I/O callbacks of this turn of the loop: every request read in it shares one message.
      setImmediate(() => this.#flush());
    });
  }

  #flush(): void {
    this.#flushScheduled = false;
    const asks = this.#asks;
    const waiting = this.#waiting;
    this.#asks = [];
    this.#waiting = [];
    if (process.send === undefined || !process.connected) {
      for (const one of waiting) one.reject(new Error('not a worker of a Tollgate primary'));
      return;
    }
    const id = this.#nextId++;
    // One timer per batch: a primary that does not answer in time lets these requests through (the
    // caller logs it), rather than holding them.
    const timer = setTimeout(() => {
      this.#take(id);
      const error = new Error('no answer from the primary in time');
      for (const one of waiting) one.reject(error);
    }, this.#timeoutMs);
    timer.unref();
    this.#inFlight.push({ id, waiting, timer });
    const batch: AskBatch = { channel: CHANNEL, id, asks };
    process.send(batch);
  }

  #take(id: number): { waiting: Waiting[]; timer: NodeJS.Timeout } | undefined {
    const index = this.#inFlight.findIndex((batch) => batch.id === id);
    return index === -1 ? undefined : this.#inFlight.splice(index, 1)[0];
  }

  #settle(message: AnswerBatch): void {
    const batch = this.#take(message.id);
    if (batch === undefined) return;
    clearTimeout(batch.timer);
    batch.waiting.forEach((one, index) => {
      const answer = message.answers[index];
      if (answer === null || answer === undefined) one.resolve(null);
      else if (answer[0] === 2) one.reject(new Error(answer[1]));
      else {
        const [settled, remaining, msBeforeNext, consumed, first] = answer;
        const res = new RateLimiterRes(remaining, msBeforeNext, consumed, first);
        if (settled === 1) one.resolve(res);
        else one.reject(res);
      }
    });
  }
}

let channel: CountersChannel | null = null;

/**
 * A worker's limiter whose counts live in the primary (serveClusterCounters). It answers `consume`
 * and `get`, what the rate-limit stage and auth_failure_limit ask; as Redis's insurance limiter it is
 * asked the same.
 */
export class ClusterCounter extends RateLimiterCompatibleAbstract {
  override readonly keyPrefix: string;
  override blockDuration = 0;
  override execEvenly = false;
  readonly points: number;
  readonly duration: number;
  readonly #channel: CountersChannel;

  constructor(options: { points: number; duration: number; keyPrefix: string; timeoutMs: number }) {
    super();
    this.keyPrefix = options.keyPrefix;
    this.points = options.points;
    this.duration = options.duration;
    channel ??= new CountersChannel(options.timeoutMs);
    this.#channel = channel;
  }

  override consume(key: string | number): Promise<RateLimiterRes> {
    return this.#channel.ask([
      'consume',
      this.keyPrefix,
      this.points,
      this.duration,
      String(key),
    ]) as Promise<RateLimiterRes>;
  }

  override get(key: string | number): Promise<RateLimiterRes | null> {
    return this.#channel.ask(['get', this.keyPrefix, this.points, this.duration, String(key)]);
  }

  override penalty(): Promise<RateLimiterRes> {
    return Promise.reject(new Error('ClusterCounter counts with consume only'));
  }

  override reward(): Promise<RateLimiterRes> {
    return Promise.reject(new Error('ClusterCounter counts with consume only'));
  }

  override block(): Promise<RateLimiterRes> {
    return Promise.reject(new Error('ClusterCounter counts with consume only'));
  }

  override set(): Promise<RateLimiterRes> {
    return Promise.reject(new Error('ClusterCounter counts with consume only'));
  }

  override delete(): Promise<boolean> {
    return Promise.reject(new Error('ClusterCounter counts with consume only'));
  }
}
