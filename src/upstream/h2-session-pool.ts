import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import { PooledSession } from './h2-pooled-session.ts';
import { H2Request, type H2RequestTimeouts } from './h2-request.ts';

/** Dials one connection to the origin: TCP for h2c, TLS with ALPN h2 otherwise (see UpstreamPools). */
export type Dial = (callback: (error: Error | null, socket: Duplex | null) => void) => void;

export interface H2SessionPoolOptions {
  /** `http://host:port` or `https://host:port`: the `:scheme` and the session's origin. */
  origin: string;
  dial: Dial;
  /** Streams per session at most, whatever the peer allows (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxStreamsPerSession: number;
  /** A session with no stream for this long is closed. */
  idleTimeoutMs: number;
  timeouts: H2RequestTimeouts;
}

const STREAM_WINDOW_BYTES = 256 * 1024;
const CONNECTION_WINDOW_BYTES = 512 * 1024;

type Waiter = (error: Error | null, session: PooledSession | null) => void;

/**
 * Upstream HTTP/2 sessions to one origin on `node:http2` (docs/traffic.md#http2-to-upstreams), with
 * the dispatch() of an undici dispatcher so the forwarder drives it like any pool: streams are
 * multiplexed on a session up to the peer's SETTINGS_MAX_CONCURRENT_STREAMS (and our cap), another
 * session is dialled when every one is full, and a session that received GOAWAY, closed or failed
 * takes no new stream. Sessions idle for the idle timeout are closed.
 */
export class H2SessionPool {
  readonly #options: H2SessionPoolOptions;
  readonly #scheme: string;
  readonly #sessions: PooledSession[] = [];
  /** Requests waiting for a session being dialled, each dial taking up to maxStreamsPerSession. */
  readonly #dialling: Waiter[][] = [];
  #closed = false;

  constructor(options: H2SessionPoolOptions) {
    this.#options = options;
    this.#scheme = new URL(options.origin).protocol === 'https:' ? 'https' : 'http';
  }

  /** Sends one request; the handler sees what undici's handlers see (forward.ts UpstreamExchange). */
  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const request = new H2Request(options, handler, this.#scheme, this.#options.timeouts);
    if (!request.begin()) return true;
    if (this.#closed) {
      request.fail(Object.assign(new Error('the upstream pool is closed'), { code: 'UND_ERR_DESTROYED' }));
      return true;
    }
    this.#acquire((error, pooled) => {
      if (error !== null || pooled === null) request.fail(error as Error);
      else request.start(pooled);
    });
    return true;
  }

  #acquire(waiter: Waiter): void {
    for (const pooled of this.#sessions) {
      if (!pooled.hasRoom) continue;
      pooled.take();
      waiter(null, pooled);
      return;
    }
    const batch = this.#dialling.find((waiters) => waiters.length < this.#options.maxStreamsPerSession);
    if (batch !== undefined) {
      batch.push(waiter);
      return;
    }
    const waiters = [waiter];
    this.#dialling.push(waiters);
    this.#options.dial((error, socket) => this.#dialled(waiters, error, socket));
  }

  #dialled(waiters: Waiter[], error: Error | null, socket: Duplex | null): void {
    this.#dialling.splice(this.#dialling.indexOf(waiters), 1);
    if (error !== null || socket === null || this.#closed) {
      socket?.destroy();
      const failure =
        error ?? Object.assign(new Error('the upstream pool is closed'), { code: 'UND_ERR_DESTROYED' });
      for (const waiter of waiters) waiter(failure, null);
      return;
    }
    // undici's windows (256 KiB a stream, 512 KiB the connection), so a response the client is slow
    // to take buffers no more upstream than it did before: backpressure is bounded by these.
    const session = http2.connect(this.#options.origin, {
      createConnection: () => socket,
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES },
    });
    session.once('connect', () => session.setLocalWindowSize(CONNECTION_WINDOW_BYTES));
    const pooled = new PooledSession(
      session,
      this.#options.maxStreamsPerSession,
      this.#options.idleTimeoutMs,
    );
    session.on('remoteSettings', (settings) => {
      const peer = settings.maxConcurrentStreams ?? Number.POSITIVE_INFINITY;
      pooled.max = Math.max(1, Math.min(peer, this.#options.maxStreamsPerSession));
    });
    // The peer is going away: streams it will still process finish, no new one starts here.
    session.on('goaway', () => pooled.retire());
    // Its streams get their own errors; the session only leaves the pool.
    session.on('error', () => this.#forget(pooled));
    session.on('close', () => this.#forget(pooled));
    // The connection does not keep the process alive (streams in flight hold their requests).
    session.unref();
    // Used once the peer's SETTINGS are known (its first frame): a stream over its concurrency limit
    // would be refused. Waiters beyond that limit look for room again (possibly another dial).
    const gone = () => {
      this.#forget(pooled);
      const failure = Object.assign(new Error('the upstream closed the HTTP/2 connection at once'), {
        code: 'ECONNRESET',
      });
      for (const waiter of waiters) waiter(failure, null);
    };
    session.once('close', gone);
    session.once('remoteSettings', () => {
      session.off('close', gone);
      this.#sessions.push(pooled);
      for (const waiter of waiters) {
        if (pooled.hasRoom) {
          pooled.take();
          waiter(null, pooled);
        } else this.#acquire(waiter);
      }
    });
  }

  #forget(pooled: PooledSession): void {
    pooled.usable = false;
    const index = this.#sessions.indexOf(pooled);
    if (index !== -1) this.#sessions.splice(index, 1);
  }

  /** Closes every session once its streams have ended (Pool.close() semantics). */
  async close(): Promise<void> {
    this.#closed = true;
    const sessions = this.#sessions.splice(0);
    await Promise.all(
      sessions.map(
        (pooled) =>
          new Promise<void>((resolve) => {
            pooled.usable = false;
            if (pooled.session.closed || pooled.session.destroyed) resolve();
            else pooled.session.close(() => resolve());
          }),
      ),
    );
  }
}
