import type http2 from 'node:http2';

/**
 * One HTTP/2 connection of an H2SessionPool (h2-session-pool.ts): how many streams it carries, how
 * many it may (the peer's SETTINGS_MAX_CONCURRENT_STREAMS, capped), and whether it still takes new
 * ones (not after GOAWAY). Its own module: the pool makes it and each request on it (h2-request.ts)
 * gives its stream back, so neither of those two modules imports the other both ways.
 */
export class PooledSession {
  readonly session: http2.ClientHttp2Session;
  active = 0;
  max: number;
  usable = true;
  #idle: NodeJS.Timeout | null = null;
  readonly #idleTimeoutMs: number;

  constructor(session: http2.ClientHttp2Session, max: number, idleTimeoutMs: number) {
    this.session = session;
    this.max = max;
    this.#idleTimeoutMs = idleTimeoutMs;
  }

  get hasRoom(): boolean {
    return this.usable && this.active < this.max && !this.session.closed && !this.session.destroyed;
  }

  take(): void {
    this.active++;
    if (this.#idle !== null) clearTimeout(this.#idle);
    this.#idle = null;
  }

  /** A stream of this session closed: an idle session is closed after the idle timeout. */
  give(): void {
    this.active--;
    if (this.active > 0) return;
    if (!this.usable) {
      this.session.close();
      return;
    }
    if (this.#idle === null) this.#idle = setTimeout(() => this.retire(), this.#idleTimeoutMs).unref();
    else this.#idle.refresh();
  }

  /** No new streams; the session closes once its streams have ended. */
  retire(): void {
    this.usable = false;
    if (this.#idle !== null) clearTimeout(this.#idle);
    this.#idle = null;
    if (this.active === 0) this.session.close();
  }
}
