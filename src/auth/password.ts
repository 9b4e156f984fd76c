import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { type ForeignHash, foreignDecoy, parseForeignHash, verifyForeignHash } from './foreign-hashes.ts';

/**
 * Salted password hashes for basic-auth `users:` entries, with scrypt from node:crypto.
 *
 * Format (one line, safe to paste into YAML unquoted):
 *
 *     scrypt$ln=<log2 N>,r=<block size>,p=<parallelism>$<salt>$<key>
 *
 * salt and key are unpadded base64url; the key length is whatever was stored (32 bytes by default).
 * The parameters live in the string so they can be raised later without breaking old hashes.
 * Example: `scrypt$ln=15,r=8,p=1$3q2-7w…$Yf0…`. Produce one with `tollgate hash-password`.
 */

export const DEFAULT_LOG_N = 15;
export const MIN_LOG_N = 10;
/** 2^20 × r=8 needs 1 GiB per check: anything above is a typo, not a policy. */
export const MAX_LOG_N = 20;
const SALT_BYTES = 16;
const KEY_BYTES = 32;

export interface ScryptParams {
  logN: number;
  r: number;
  p: number;
}

export interface PasswordHash extends ScryptParams {
  salt: Buffer;
  key: Buffer;
}

const HASH_PATTERN =
  /^scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9_-]{16,})\$([A-Za-z0-9_-]{22,})$/;

/** Parses a `scrypt$…` string, or returns null when it is not one Tollgate can check. */
export function parsePasswordHash(value: string): PasswordHash | null {
  const match = HASH_PATTERN.exec(value);
  if (!match) return null;
  const [, logN, r, p, salt, key] = match as unknown as [string, string, string, string, string, string];
  const params = { logN: Number(logN), r: Number(r), p: Number(p) };
  if (params.logN < MIN_LOG_N || params.logN > MAX_LOG_N) return null;
  if (params.r < 1 || params.r > 32 || params.p < 1 || params.p > 16) return null;
  return { ...params, salt: Buffer.from(salt, 'base64url'), key: Buffer.from(key, 'base64url') };
}

/**
 * Any hash a basic-auth user may carry: Tollgate's scrypt, or (from an Ingress's htpasswd Secret,
 * docs/ingress.md) bcrypt, Apache's `$apr1$` MD5 or `{SHA}`.
 */
export type StoredHash = PasswordHash | ForeignHash;

/** scrypt first, then the htpasswd formats; null when it is none Tollgate can check. */
export function parseStoredHash(value: string): StoredHash | null {
  return parsePasswordHash(value) ?? parseForeignHash(value);
}

/** For config validation: true when `value` is a well-formed hash with acceptable parameters. */
export function isPasswordHash(value: string): boolean {
  return parsePasswordHash(value) !== null;
}

/** Thrown instead of queueing a check when the queue of password checks is already full. */
export class PasswordChecksOverloaded extends Error {
  constructor() {
    super('too many password checks are waiting');
  }
}

/**
 * At most this many scrypt checks run at once in the process. libuv's thread pool (4 threads by
 * default) also does DNS lookups and file reads: letting password guesses take every thread would
 * stall connects to upstreams named by host and config reloads. See docs/security.md.
 */
export const MAX_CONCURRENT_CHECKS = 2;
/**
 * Checks of one client (IP) allowed to wait for one policy; beyond this that client's next check is
 * refused at once (503 auth_overloaded). Other clients keep their own places in the queue.
 */
export const MAX_WAITING_CHECKS_PER_CLIENT = 4;
/** Checks of one policy allowed to wait, all clients together. */
export const MAX_WAITING_CHECKS_PER_POLICY = 256;

/** A counting gate in front of the thread pool: bounded concurrency, bounded queue, no busy wait. */
export class CheckGate {
  #active = 0;
  readonly #waiting: Array<() => void> = [];
  readonly #concurrency: number;
  readonly #maxWaiting: number;
  constructor(concurrency: number, maxWaiting: number) {
    this.#concurrency = concurrency;
    this.#maxWaiting = maxWaiting;
  }

  /** Runs `task` when a slot is free; throws PasswordChecksOverloaded when the queue is full. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#active >= this.#concurrency) {
      if (this.#waiting.length >= this.#maxWaiting) throw new PasswordChecksOverloaded();
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    } else {
      this.#active++;
    }
    try {
      return await task();
    } finally {
      // The slot passes straight to the next waiter, so #active only drops when nobody waits.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#active--;
    }
  }

  get active(): number {
    return this.#active;
  }

  get waiting(): number {
    return this.#waiting.length;
  }
}

/**
 * The process-wide gate in front of the thread pool. Each policy queues behind its own gate first
 * (at most one check of suspect clients and one of the others at a time, bounded queues), so this
 * one never holds more than two waiters per policy: guesses flooding one route cannot make another
 * route's checks wait behind them.
 */
export const hashingThreads = new CheckGate(MAX_CONCURRENT_CHECKS, Number.POSITIVE_INFINITY);

/**
 * Checks of suspect clients (recent failures, see FairCheckGate), all policies together, take at
 * most one of hashingThreads' slots: the other always serves everyone else.
 */
export const suspectThreads = new CheckGate(1, Number.POSITIVE_INFINITY);

/**
 * A policy's own gate (docs/security.md "Password floods"): checks are served round robin over the
 * clients waiting, each with a queue of at most MAX_WAITING_CHECKS_PER_CLIENT, so a client flooding
 * guesses only lengthens its own queue. Clients the caller marks as suspect (recent failed checks)
 * go through a lane of their own: one suspect check and one other check may run at once (both still
 * behind the process-wide `hashingThreads`), so another client's login never waits for the flood,
 * not even for the flood's check that is running.
 */
export class FairCheckGate {
  readonly #lanes: { normal: RoundRobinLane; suspect: RoundRobinLane };
  readonly #maxPerClient: number;
  readonly #maxWaiting: number;
  readonly #isSuspect: (client: string) => boolean;
  constructor(
    options: { maxPerClient?: number; maxWaiting?: number; isSuspect?: (client: string) => boolean } = {},
  ) {
    this.#maxPerClient = options.maxPerClient ?? MAX_WAITING_CHECKS_PER_CLIENT;
    this.#maxWaiting = options.maxWaiting ?? MAX_WAITING_CHECKS_PER_POLICY;
    this.#isSuspect = options.isSuspect ?? (() => false);
    // Checks queued before their client turned suspect wait behind everyone else's in their lane.
    this.#lanes = { normal: new RoundRobinLane(this.#isSuspect), suspect: new RoundRobinLane() };
  }

  /** Runs `task` at `client`'s turn; throws PasswordChecksOverloaded when its queue is full. */
  run<T>(client: string, task: () => Promise<T>): Promise<T> {
    // Checks are independent requests: a client that turns suspect sends its next ones to that lane
    // at once (a flooder's queue in the other lane, always refilled, would never drain).
    const lane = this.#isSuspect(client) ? this.#lanes.suspect : this.#lanes.normal;
    if (lane.queued(client) >= this.#maxPerClient || this.waiting >= this.#maxWaiting) {
      if (lane.busy) return Promise.reject(new PasswordChecksOverloaded());
    }
    return lane.run(client, task);
  }

  get waiting(): number {
    return this.#lanes.normal.waiting + this.#lanes.suspect.waiting;
  }
}

/**
 * One check at a time; waiting checks served one per client in turn, `demoted` clients last. The one
 * exception: a check of a client that is not demoted does not wait for a demoted client's check that
 * is already running (one queued before its client turned suspect); it runs beside it.
 */
class RoundRobinLane {
  #running = 0;
  #runningDemoted = 0;
  readonly #demoted: (client: string) => boolean;
  /** Waiting checks by client, in turn order: a client served goes to the back (Map insertion order). */
  readonly #queues = new Map<string, Array<() => void>>();
  waiting = 0;
  constructor(demoted: (client: string) => boolean = () => false) {
    this.#demoted = demoted;
  }

  get busy(): boolean {
    return this.#running > 0;
  }

  queued(client: string): number {
    return this.#queues.get(client)?.length ?? 0;
  }

  async run<T>(client: string, task: () => Promise<T>): Promise<T> {
    const besideDemoted = this.#running === 1 && this.#runningDemoted === 1 && !this.#demoted(client);
    if (this.#running > 0 && !besideDemoted) {
      let queue = this.#queues.get(client);
      if (queue === undefined) {
        queue = [];
        this.#queues.set(client, queue);
      }
      this.waiting++;
      // #next counts this check as running before it resolves.
      await new Promise<void>((resolve) => (queue as Array<() => void>).push(resolve));
    } else {
      this.#running++;
    }
    const demoted = this.#demoted(client);
    if (demoted) this.#runningDemoted++;
    try {
      return await task();
    } finally {
      this.#running--;
      if (demoted) this.#runningDemoted--;
      this.#next();
    }
  }

  #next(): void {
    if (this.#running > 0) return;
    let chosen: [string, Array<() => void>] | undefined;
    for (const entry of this.#queues) {
      chosen ??= entry;
      if (!this.#demoted(entry[0])) {
        chosen = entry;
        break;
      }
    }
    if (chosen === undefined) return;
    const [client, queue] = chosen;
    const resolve = queue.shift() as () => void;
    this.#queues.delete(client);
    if (queue.length > 0) this.#queues.set(client, queue);
    this.waiting--;
    this.#running++;
    resolve();
  }
}

function deriveKey(password: string, salt: Buffer, keyBytes: number, params: ScryptParams): Promise<Buffer> {
  const N = 2 ** params.logN;
  // Node refuses (ERR_CRYPTO_INVALID_SCRYPT_PARAMS) when 128·N·r·p exceeds maxmem; give it room.
  const maxmem = 128 * N * params.r * params.p + 16 * 1024 * 1024;
  // The callback form runs on the libuv thread pool, so a check never blocks the event loop.
  return new Promise((resolve, reject) => {
    scrypt(password, salt, keyBytes, { N, r: params.r, p: params.p, maxmem }, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

/** Hashes a password with a fresh random salt. */
export async function hashPassword(password: string, logN: number = DEFAULT_LOG_N): Promise<string> {
  if (!Number.isInteger(logN) || logN < MIN_LOG_N || logN > MAX_LOG_N) {
    throw new RangeError(`log2 N must be an integer from ${MIN_LOG_N} to ${MAX_LOG_N}`);
  }
  const params = { logN, r: 8, p: 1 };
  const salt = randomBytes(SALT_BYTES);
  const key = await deriveKey(password, salt, KEY_BYTES, params);
  return `scrypt$ln=${logN},r=${params.r},p=${params.p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

/**
 * True when `password` matches `hash` (a string or an already parsed hash). Constant-time compare.
 * Not gated: callers that check untrusted input go through a policy gate and `hashingThreads`.
 */
export async function verifyPassword(password: string, hash: string | StoredHash): Promise<boolean> {
  const parsed = typeof hash === 'string' ? parsePasswordHash(hash) : hash;
  if (!parsed) return false;
  if ('kind' in parsed) return verifyForeignHash(password, parsed);
  const key = await deriveKey(password, parsed.salt, parsed.key.length, parsed);
  return timingSafeEqual(key, parsed.key);
}

/** A hash with the same cost as `like` that no password matches: a random key, never derived. */
export function decoyHash(like: StoredHash): StoredHash {
  if ('kind' in like) return foreignDecoy(like);
  return {
    logN: like.logN,
    r: like.r,
    p: like.p,
    salt: randomBytes(like.salt.length),
    key: randomBytes(like.key.length),
  };
}

/** One string per distinct scrypt cost (parameters and key length): two hashes cost the same work. */
export function costOf(hash: StoredHash): string {
  if ('kind' in hash) return hash.cost;
  return `${hash.logN},${hash.r},${hash.p},${hash.key.length}`;
}
