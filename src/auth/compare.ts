import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Constant-time comparison helpers. Secrets are compared as SHA-256 digests: timingSafeEqual needs
 * equal lengths, and comparing digests keeps the time independent of how long either secret is
 * (a length check on the raw values would leak the length of the configured one).
 */

export function sha256(value: string | Buffer): Buffer {
  return createHash('sha256').update(value).digest();
}

/** True when `given` hashes to `expectedDigest`; takes the same time wherever the inputs differ. */
export function matchesDigest(given: string | Buffer, expectedDigest: Buffer): boolean {
  return timingSafeEqual(sha256(given), expectedDigest);
}

/** Constant-time equality of two strings (as UTF-8 bytes). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}
