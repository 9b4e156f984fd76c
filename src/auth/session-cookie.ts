import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { CompactEncrypt, compactDecrypt } from 'jose';
import { removeCookies } from './token-carriers.ts';

/**
 * Sealed cookies (docs/authentication.md#sessions): JWE compact, `dir` + A256GCM, so the content is
 * both secret and tamper-proof, with the key derived from a `session_secret_file` line. The first
 * secret seals; every secret opens (the `kid` names which), so a new secret added on top rotates the
 * key without logging anyone out. Any process with the same file opens what another sealed.
 */
export interface Sealer {
  seal(payload: object): Promise<string>;
  /** The payload, or null for anything not sealed by one of our secrets (tampered, foreign, garbage). */
  open(sealed: string): Promise<Record<string, unknown> | null>;
}

/** The name of the session cookie; `_1`, `_2`… when it is split (docs/authentication.md#sessions). */
export const SESSION_COOKIE = 'tollgate_session';
/**
 * Browsers drop a cookie over 4096 bytes (name, value and attributes) without a word, which shows as
 * a login loop; a value longer than this goes out in chunks instead.
 */
export const MAX_COOKIE_VALUE = 3800;
/** A split session never needs more (a 40 KB session is a misconfigured provider). */
const MAX_CHUNKS = 10;

export function createSealer(secrets: readonly Buffer[]): Sealer {
  // SHA-256 of a labelled secret: exactly the 32 bytes A256GCM wants, whatever the line's length.
  const keys = secrets.map((secret) => {
    const key = createHash('sha256').update('tollgate session v1\0').update(secret).digest();
    return { key, kid: createHash('sha256').update(key).digest('base64url').slice(0, 8) };
  });
  const sealing = keys[0];
  if (sealing === undefined) throw new Error('no session secret');
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  return {
    seal: (payload) =>
      new CompactEncrypt(encoder.encode(JSON.stringify(payload)))
        .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', kid: sealing.kid })
        .encrypt(sealing.key),
    async open(sealed) {
      // Cheap shape check first: five base64url parts, nothing else.
      if (sealed.length > MAX_COOKIE_VALUE * MAX_CHUNKS || !/^[\w-]+\.\.[\w-]+\.[\w-]+\.[\w-]+$/.test(sealed))
        return null;
      let kid: unknown;
      try {
        kid = JSON.parse(Buffer.from(sealed.slice(0, sealed.indexOf('.')), 'base64url').toString()).kid;
      } catch {
        return null;
      }
      const entry = keys.find((candidate) => candidate.kid === kid);
      if (entry === undefined) return null;
      try {
        const { plaintext } = await compactDecrypt(sealed, entry.key, {
          keyManagementAlgorithms: ['dir'],
          contentEncryptionAlgorithms: ['A256GCM'],
        });
        const payload: unknown = JSON.parse(decoder.decode(plaintext));
        return typeof payload === 'object' && payload !== null && !Array.isArray(payload)
          ? (payload as Record<string, unknown>)
          : null;
      } catch {
        return null;
      }
    },
  };
}

/** Our cookies in a Cookie header, by name (first copy wins); only names starting with `prefix`. */
export function cookiesStartingWith(header: string | undefined, prefix: string): Map<string, string> {
  const found = new Map<string, string>();
  if (header === undefined || !header.includes(prefix)) return found;
  for (const pair of header.split(';')) {
    const trimmed = pair.trim();
    const equals = trimmed.indexOf('=');
    if (equals <= 0) continue;
    const name = trimmed.slice(0, equals).trim();
    if (name.startsWith(prefix) && !found.has(name)) found.set(name, trimmed.slice(equals + 1).trim());
  }
  return found;
}

/** The sealed session from the cookies: whole, or its chunks `_1…_n` joined in order; null when none. */
export function readSessionValue(cookies: ReadonlyMap<string, string>): string | null {
  const whole = cookies.get(SESSION_COOKIE);
  if (whole !== undefined && whole !== '') return whole;
  let joined = '';
  for (let index = 1; index <= MAX_CHUNKS; index++) {
    const chunk = cookies.get(`${SESSION_COOKIE}_${index}`);
    if (chunk === undefined) break;
    joined += chunk;
  }
  return joined === '' ? null : joined;
}

export interface CookieAttributes {
  /** HTTPS request: the cookie gets `Secure`. */
  secure: boolean;
  /** Seconds; 0 deletes. */
  maxAge: number;
  path?: string;
  /** `Domain=` (a session shared by the hosts under it, see sessionCookieDomain); absent = host-only. */
  domain?: string;
}

/**
 * The `Domain` a session cookie gets on `host` (docs/authentication.md#sessions): the provider's
 * `cookie_domain` when the host is it or under it, else none (host-only): a host outside the domain
 * never sets, nor is sent, a cookie for it.
 */
/** A session cookie's attributes on a request's host: Secure on HTTPS, the shared domain when it covers the host. */
export function sessionCookieAttributes(
  request: { secure: boolean; host: string },
  cookieDomain: string | null | undefined,
  maxAge: number,
): CookieAttributes {
  const domain = sessionCookieDomain(cookieDomain, request.host);
  return { secure: request.secure, maxAge, ...(domain === undefined ? {} : { domain }) };
}

export function sessionCookieDomain(
  cookieDomain: string | null | undefined,
  host: string,
): string | undefined {
  if (cookieDomain == null) return undefined;
  return host === cookieDomain || host.endsWith(`.${cookieDomain}`) ? cookieDomain : undefined;
}

/** One Set-Cookie: HttpOnly, SameSite=Lax, host-only (no Domain), Path=/ unless told. */
export function setCookie(name: string, value: string, attributes: CookieAttributes): string {
  const secure = attributes.secure ? '; Secure' : '';
  const domain = attributes.domain === undefined ? '' : `; Domain=${attributes.domain}`;
  return `${name}=${value}; Path=${attributes.path ?? '/'}${domain}; Max-Age=${Math.max(0, Math.floor(attributes.maxAge))}; HttpOnly; SameSite=Lax${secure}`;
}

/**
 * The Set-Cookie lines that store `sealed` as the session: one cookie when it fits, else chunks
 * `_1…_n`; either way every session cookie the browser sent that is not part of the new set is
 * expired, so no stale chunk is ever joined to a new one.
 */
export function sessionCookies(
  sealed: string,
  sent: ReadonlyMap<string, string>,
  attributes: CookieAttributes,
): string[] {
  const names: string[] = [];
  const lines: string[] = [];
  if (sealed.length <= MAX_COOKIE_VALUE) {
    names.push(SESSION_COOKIE);
    lines.push(setCookie(SESSION_COOKIE, sealed, attributes));
  } else {
    for (let index = 0; index * MAX_COOKIE_VALUE < sealed.length; index++) {
      const name = `${SESSION_COOKIE}_${index + 1}`;
      names.push(name);
      lines.push(
        setCookie(name, sealed.slice(index * MAX_COOKIE_VALUE, (index + 1) * MAX_COOKIE_VALUE), attributes),
      );
    }
  }
  for (const name of sent.keys()) {
    if (isSessionCookieName(name) && !names.includes(name))
      lines.push(setCookie(name, '', { ...attributes, maxAge: 0 }));
  }
  return lines;
}

/** Set-Cookie lines expiring every session cookie the browser sent (and the plain name in any case). */
export function clearedSessionCookies(
  sent: ReadonlyMap<string, string>,
  secure: boolean,
  domain?: string,
): string[] {
  const names = new Set([SESSION_COOKIE, ...[...sent.keys()].filter(isSessionCookieName)]);
  // Both the host-only and the shared cookie, whichever this browser holds.
  return [...names].flatMap((name) => [
    setCookie(name, '', { secure, maxAge: 0 }),
    ...(domain === undefined ? [] : [setCookie(name, '', { secure, maxAge: 0, domain })]),
  ]);
}

export function isSessionCookieName(name: string): boolean {
  return name === SESSION_COOKIE || /^tollgate_session_\d+$/.test(name);
}

/** The prefix of a pending login's state cookie (auth/oidc/login). */
export const STATE_COOKIE_PREFIX = 'tollgate_oidc_';

/** A cookie an OpenID login set: the session (whole or a chunk) or a pending login's state. */
export function isLoginCookieName(name: string): boolean {
  return isSessionCookieName(name) || name.startsWith(STATE_COOKIE_PREFIX);
}

/**
 * Takes the login cookies out of the forwarded Cookie header. They are credentials: no upstream
 * sees them, on any route (an open path of the same host included). Other cookies, Tollgate's sticky
 * cookie among them, are left as they are.
 */
export function removeLoginCookies(req: IncomingMessage): void {
  const header = req.headers.cookie;
  if (header === undefined || !(header.includes(SESSION_COOKIE) || header.includes(STATE_COOKIE_PREFIX)))
    return;
  removeCookies(req, isLoginCookieName);
}
