import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

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

/** For config validation: true when `value` is a well-formed hash with acceptable parameters. */
export function isPasswordHash(value: string): boolean {
  return parsePasswordHash(value) !== null;
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

/** True when `password` matches `hash` (a string or an already parsed hash). Constant-time compare. */
export async function verifyPassword(password: string, hash: string | PasswordHash): Promise<boolean> {
  const parsed = typeof hash === 'string' ? parsePasswordHash(hash) : hash;
  if (!parsed) return false;
  const key = await deriveKey(password, parsed.salt, parsed.key.length, parsed);
  return timingSafeEqual(key, parsed.key);
}
