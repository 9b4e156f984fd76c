import { createHash, randomBytes } from 'node:crypto';
import { safeEqual } from './compare.ts';

/**
 * Password hashes from htpasswd files (an Ingress's `auth` Secret, docs/ingress.md), checked the
 * way Apache and ingress-nginx check them: bcrypt (`$2a$`, `$2b$`, `$2y$`), and the weak ones kept
 * for migration only, Apache's MD5 (`$apr1$`) and `{SHA}` (unsalted SHA-1). Tollgate's own format
 * is scrypt (auth/password).
 */
export interface ForeignHash {
  kind: 'bcrypt' | 'apr1' | 'sha1';
  /** The hash as written. */
  value: string;
  /** Equal for two hashes that take the same work to check (see auth/basic: uniform timing). */
  cost: string;
}

const BCRYPT = /^\$2[aby]\$(\d{2})\$[./A-Za-z0-9]{53}$/;
const APR1 = /^\$apr1\$([^$]{1,8})\$[./0-9A-Za-z]{22}$/;
const SHA1 = /^\{SHA\}([A-Za-z0-9+/]{27}=)$/;
/** bcrypt's own bounds are 4..31; above 16 one check takes seconds, a typo rather than a policy. */
const MAX_BCRYPT_ROUNDS = 16;
const MIN_BCRYPT_ROUNDS = 4;
const ITOA64 = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A bcrypt, `$apr1$` or `{SHA}` hash, or null. */
export function parseForeignHash(value: string): ForeignHash | null {
  const bcryptMatch = BCRYPT.exec(value);
  if (bcryptMatch) {
    const rounds = Number(bcryptMatch[1]);
    if (rounds < MIN_BCRYPT_ROUNDS || rounds > MAX_BCRYPT_ROUNDS) return null;
    return { kind: 'bcrypt', value, cost: `bcrypt,${rounds}` };
  }
  if (APR1.test(value)) return { kind: 'apr1', value, cost: 'apr1' };
  if (SHA1.test(value)) return { kind: 'sha1', value, cost: 'sha1' };
  return null;
}

/** Constant-time where the format allows it; bcrypt's own compare is. */
export async function verifyForeignHash(password: string, hash: ForeignHash): Promise<boolean> {
  switch (hash.kind) {
    case 'bcrypt': {
      const bcrypt = await loadBcrypt();
      return bcrypt.compare(password, hash.value);
    }
    case 'apr1': {
      const salt = (APR1.exec(hash.value) as RegExpExecArray)[1] as string;
      return safeEqual(apr1(password, salt), hash.value);
    }
    case 'sha1':
      return safeEqual(`{SHA}${createHash('sha1').update(password).digest('base64')}`, hash.value);
  }
}

/** A hash of the same kind and cost that no password matches (auth/basic's decoys). */
export function foreignDecoy(like: ForeignHash): ForeignHash {
  const random = (length: number) => Array.from(randomBytes(length), (byte) => ITOA64[byte & 0x3f]).join('');
  switch (like.kind) {
    case 'bcrypt':
      return { ...like, value: `${like.value.slice(0, 7)}${random(53)}` };
    case 'apr1':
      return { ...like, value: `$apr1$${random(8)}$${random(22)}` };
    case 'sha1':
      return { ...like, value: `{SHA}${randomBytes(20).toString('base64')}` };
  }
}

let bcryptModule: Promise<typeof import('bcryptjs')> | null = null;

/**
 * bcryptjs, loaded on the first bcrypt check (only htpasswd Secrets of Ingresses carry bcrypt
 * hashes), so a process that never meets one never loads it.
 */
function loadBcrypt(): Promise<typeof import('bcryptjs')> {
  bcryptModule ??= import('bcryptjs');
  return bcryptModule;
}

/** Apache's MD5-crypt variant (`htpasswd -m`, `openssl passwd -apr1`). */
export function apr1(password: string, salt: string): string {
  const magic = '$apr1$';
  const md5 = (...parts: Buffer[]) => {
    const hash = createHash('md5');
    for (const part of parts) hash.update(part);
    return hash.digest();
  };
  const pw = Buffer.from(password);
  const saltBytes = Buffer.from(salt);
  let alternate = md5(pw, saltBytes, pw);
  const parts: Buffer[] = [pw, Buffer.from(magic), saltBytes];
  for (let left = pw.length; left > 0; left -= 16) parts.push(alternate.subarray(0, Math.min(16, left)));
  for (let i = pw.length; i > 0; i >>= 1) parts.push(i & 1 ? Buffer.from([0]) : pw.subarray(0, 1));
  let final = md5(...parts);
  for (let i = 0; i < 1000; i++) {
    const round: Buffer[] = [i & 1 ? pw : final];
    if (i % 3) round.push(saltBytes);
    if (i % 7) round.push(pw);
    round.push(i & 1 ? final : pw);
    final = md5(...round);
  }
  alternate = final;
  const to64 = (value: number, count: number) => {
    let out = '';
    for (let n = count, v = value; n > 0; n--, v >>= 6) out += ITOA64[v & 0x3f];
    return out;
  };
  const f = (i: number) => alternate[i] as number;
  const encoded =
    to64((f(0) << 16) | (f(6) << 8) | f(12), 4) +
    to64((f(1) << 16) | (f(7) << 8) | f(13), 4) +
    to64((f(2) << 16) | (f(8) << 8) | f(14), 4) +
    to64((f(3) << 16) | (f(9) << 8) | f(15), 4) +
    to64((f(4) << 16) | (f(10) << 8) | f(5), 4) +
    to64(f(11), 2);
  return `${magic}${salt}$${encoded}`;
}
