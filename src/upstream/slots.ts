/**
 * Per-server connection slots with a bounded wait queue (docs/configuration.md "Upstream
 * connections"). A request holds one slot of its server from dispatch until its response ends (an
 * upgrade until the handshake is answered). A server has `perServer` slots and one route may hold at
 * most `perRoute` of them, so a route flooded with slow requests cannot take every connection of a
 * server other routes share. A request that finds no slot waits in a FIFO queue of at most `queueSize`
 * entries for at most `queueTimeoutMs`; beyond that it is refused (503) at once rather than hanging.
 */
export interface SlotLimits {
  perServer: number;
  perRoute: number;
  queueSize: number;
  queueTimeoutMs: number;
}

/** Gives the slot back; calling it again does nothing. */
export type Release = () => void;

export type QueueOutcome =
  | { ok: true; release: Release }
  | { ok: false; reason: 'queue_full' | 'queue_timeout' };

interface Waiter {
  routeId: string;
  done: (outcome: QueueOutcome) => void;
  timer: NodeJS.Timeout;
}

/** Routes a server's slot counts remember at 0 before idle ones are dropped. */
const MANY_ROUTES = 256;

export class ServerSlots {
  readonly #limits: SlotLimits;
  #inUse = 0;
  /** Slots ever handed out: requests sent to this server, for /status and its metric (observe/server-load). */
  #dispatched = 0;
  readonly #byRoute = new Map<string, number>();
  readonly #waiters: Waiter[] = [];

  constructor(limits: SlotLimits) {
    this.#limits = limits;
  }

  get inUse(): number {
    return this.#inUse;
  }

  get dispatched(): number {
    return this.#dispatched;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  /** A slot now, or null when the server or the route is at its limit. */
  tryAcquire(routeId: string): Release | null {
    if (!this.#fits(routeId)) return null;
    return this.#take(routeId);
  }

  /** Waits for a slot in the queue; `done` runs exactly once (possibly synchronously when refused). */
  wait(routeId: string, done: (outcome: QueueOutcome) => void): void {
    // Someone queued earlier is served first, even if this route would fit now.
    if (this.#waiters.length === 0 && this.#fits(routeId)) {
      done({ ok: true, release: this.#take(routeId) });
      return;
    }
    if (this.#waiters.length >= this.#limits.queueSize) {
      done({ ok: false, reason: 'queue_full' });
      return;
    }
    const waiter: Waiter = {
      routeId,
      done,
      timer: setTimeout(() => {
        const index = this.#waiters.indexOf(waiter);
        if (index !== -1) this.#waiters.splice(index, 1);
        done({ ok: false, reason: 'queue_timeout' });
      }, this.#limits.queueTimeoutMs),
    };
    waiter.timer.unref();
    this.#waiters.push(waiter);
  }

  /** Refuses every waiter (shutdown, or the server left the configuration). */
  drain(): void {
    for (const waiter of this.#waiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.done({ ok: false, reason: 'queue_full' });
    }
  }

  #fits(routeId: string): boolean {
    return this.#inUse < this.#limits.perServer && (this.#byRoute.get(routeId) ?? 0) < this.#limits.perRoute;
  }

  #take(routeId: string): Release {
    this.#inUse++;
    this.#dispatched++;
    this.#byRoute.set(routeId, (this.#byRoute.get(routeId) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inUse--;
      // Kept at 0 rather than deleted: a key deleted and added again per request churns the Map's
      // tables, which keeps young objects alive through scavenges (see lifecycle.ts, createOpenResponses).
      // (Pruned only when many routes have come and gone, so reloads do not grow it without bound.)
      const left = (this.#byRoute.get(routeId) ?? 1) - 1;
      if (left === 0 && this.#byRoute.size > MANY_ROUTES) this.#byRoute.delete(routeId);
      else this.#byRoute.set(routeId, left);
      this.#grant();
    };
  }

  /** Hands freed slots to the oldest waiters that fit (a waiter of a route at its cap lets others pass). */
  #grant(): void {
    for (let i = 0; i < this.#waiters.length && this.#inUse < this.#limits.perServer; ) {
      const waiter = this.#waiters[i] as Waiter;
      if (!this.#fits(waiter.routeId)) {
        i++;
        continue;
      }
      this.#waiters.splice(i, 1);
      clearTimeout(waiter.timer);
      waiter.done({ ok: true, release: this.#take(waiter.routeId) });
    }
  }
}
