import { isIPv4, isIPv6 } from 'node:net';

/**
 * Host and request-target normalisation (docs/configuration.md, "How requests are matched"). The
 * request functions run on every request, so they scan character codes through lookup tables (no
 * regular expressions, nothing that can backtrack) and return the input string itself when it is
 * already in normal form: the common request costs a single pass and no allocation beyond the result.
 *
 * Config validation and routing compile call the same functions for host keys and path prefixes, so
 * a key and a request that mean the same host or path always end up as the same string. Nothing here
 * depends on the config module beyond plain strings: config imports these helpers, never the reverse.
 */

const SLASH = 0x2f;
const BACKSLASH = 0x5c;
const DOT = 0x2e;
const PERCENT = 0x25;
const HASH = 0x23;
const SEMICOLON = 0x3b;
const COLON = 0x3a;
const OPEN_BRACKET = 0x5b;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;

// ---------------------------------------------------------------------------------------------------
// Host

/** 1: kept as is; 2: upper-case letter (lower-cased). Anything else is refused. */
const HOST_CHAR = new Uint8Array(128);
for (const c of 'abcdefghijklmnopqrstuvwxyz0123456789-._') HOST_CHAR[c.charCodeAt(0)] = 1;
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZ') HOST_CHAR[c.charCodeAt(0)] = 2;

/** A DNS name is at most 253 characters; allow a trailing dot and a `:65535` port on top. */
const MAX_HOST_HEADER = 253 + 1 + 6;
/** The longest textual IPv6 address (`ffff:…:255.255.255.255`). */
const MAX_IPV6_TEXT = 45;

/**
 * The Host header in routing form: lower case, port removed, one trailing dot removed, IP literals
 * canonical (`[0:0:0:0:0:0:0:1]:8080` → `::1`, `[::ffff:127.0.0.1]` → `127.0.0.1`). Returns null for
 * a missing, empty or malformed value (spaces, `/`, `@`, an empty label such as `localhost..` or
 * `a..b`, a numeric name that is not a dotted-quad IPv4 address, an unbracketed or invalid IPv6
 * literal, a bad port…): the caller answers 400.
 *
 * Since results are always lower case, no request host can ever equal the upper-case `DEFAULT` key.
 */
export function normaliseHost(hostHeader: string | undefined): string | null {
  if (hostHeader === undefined) return null;
  const length = hostHeader.length;
  if (length === 0 || length > MAX_HOST_HEADER) return null;
  if (hostHeader.charCodeAt(0) === OPEN_BRACKET) return normaliseBracketedHost(hostHeader);

  let hasUpper = false;
  // Only digits and dots: an IPv4 attempt, which must then be a canonical dotted quad.
  let numeric = true;
  let previous = DOT; // a leading dot is an empty first label
  let end = length;
  for (let i = 0; i < length; i++) {
    const c = hostHeader.charCodeAt(i);
    if (c === DOT) {
      if (previous === DOT) return null; // empty label
      previous = c;
      continue;
    }
    if (c < 128) {
      const kind = HOST_CHAR[c];
      if (kind === 1 || kind === 2) {
        if (kind === 2) hasUpper = true;
        if (c < DIGIT_0 || c > DIGIT_9) numeric = false;
        previous = c;
        continue;
      }
    }
    if (c === COLON && isPort(hostHeader, i + 1)) {
      end = i;
      break;
    }
    return null;
  }
  if (end === 0) return null;
  // One trailing dot (the absolute form of a DNS name) is the same host; the loop refused a second.
  if (hostHeader.charCodeAt(end - 1) === DOT) end--;
  const host = end === length ? hostHeader : hostHeader.slice(0, end);
  if (numeric && !isIPv4(host)) return null;
  return hasUpper ? host.toLowerCase() : host;
}

/** `[v6]` or `[v6]:port`; zone ids and IPvFuture are refused. */
function normaliseBracketedHost(hostHeader: string): string | null {
  const close = hostHeader.indexOf(']');
  if (close < 3 || close - 1 > MAX_IPV6_TEXT) return null;
  if (close + 1 < hostHeader.length) {
    if (hostHeader.charCodeAt(close + 1) !== COLON || !isPort(hostHeader, close + 2)) return null;
  }
  const literal = hostHeader.slice(1, close);
  // isIPv6 alone would accept a zone id (`fe80::1%eth0`), which has no place in a Host header.
  if (literal.indexOf('%') !== -1 || !isIPv6(literal)) return null;
  return canonicalIPv6(literal);
}

/** `::ffff:a.b.c.d` after WHATWG serialisation, which writes the IPv4 part as two hex groups. */
const IPV4_MAPPED = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;

/**
 * One spelling per IPv6 address: the WHATWG URL serialisation (lower case, leading zeros dropped,
 * the longest run of zero groups written `::`, as RFC 5952 recommends), so `0:0:0:0:0:0:0:1`,
 * `0::1` and `::1` are one host. An IPv4-mapped address is the IPv4 host it maps
 * (`::ffff:127.0.0.1` → `127.0.0.1`): a client reaching 127.0.0.1 over an IPv6 socket writes it so.
 * `literal` must already be a valid IPv6 address without zone id.
 */
export function canonicalIPv6(literal: string): string {
  const serialised = new URL(`http://[${literal}]/`).hostname.slice(1, -1);
  const mapped = IPV4_MAPPED.exec(serialised);
  if (mapped === null) return serialised;
  const high = Number.parseInt(mapped[1] as string, 16);
  const low = Number.parseInt(mapped[2] as string, 16);
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}

/** An optional port after the colon: empty (RFC 3986 allows `host:`) or 1-5 digits up to 65535. */
function isPort(s: string, start: number): boolean {
  const length = s.length - start;
  if (length === 0) return true;
  if (length > 5) return false;
  let value = 0;
  for (let i = start; i < s.length; i++) {
    const digit = s.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return false;
    value = value * 10 + digit;
  }
  return value <= 65535;
}

// ---------------------------------------------------------------------------------------------------
// Config keys: host keys and path prefixes, in the form requests are matched in

/** The host key that catches requests whose Host matches no other key. */
export const DEFAULT_HOST = 'DEFAULT';

/** The normalised value, or a sentence saying what is wrong with the key as written. */
export type Normalised = { ok: true; value: string } | { ok: false; reason: string };

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/i;

/** RFC 1123 host name (underscores tolerated: some internal DNS names carry them). */
export function isHostname(name: string): boolean {
  if (name.length === 0 || name.length > 253) return false;
  // All digits and dots is an IPv4 attempt, never a name: `10.0.0.300` must not be looked up in DNS.
  if (/^[\d.]+$/.test(name)) return false;
  return name.split('.').every((label) => LABEL.test(label));
}

/**
 * A host key of upstreams.yaml in routing form: exactly what normaliseHost makes of a Host header
 * naming the same host, so `API.example.com.`, `[0:0:0:0:0:0:0:1]`, `0::1` and `::1` each become one
 * key (two spellings of one host are then a duplicate). IPv6 keys may be written with or without
 * brackets. `DEFAULT` keeps its spelling: no request host can produce it.
 */
export function normaliseHostKey(key: string): Normalised {
  if (key === DEFAULT_HOST) return { ok: true, value: DEFAULT_HOST };
  if (key.toLowerCase() === 'default') {
    return { ok: false, reason: `the catch-all host is spelled '${DEFAULT_HOST}' (capitals)` };
  }
  const bareIPv6 = !key.startsWith('[') && key.indexOf(':') !== key.lastIndexOf(':');
  const hasPort = bareIPv6 ? false : key.startsWith('[') ? /\]:/.test(key) : key.includes(':');
  if (hasPort) {
    return {
      ok: false,
      reason: 'host keys have no port (the port is ignored when matching the Host header)',
    };
  }
  const host = normaliseHost(bareIPv6 ? `[${key}]` : key);
  // normaliseHost is lenient about label syntax (it only has to be safe); a key must be a real name.
  if (host === null || !(host.includes(':') || isIPv4(host) || isHostname(host))) {
    const reason = key.endsWith('..')
      ? 'is not a host name: at most one trailing dot'
      : 'is neither a host name nor an IP address';
    return { ok: false, reason };
  }
  return { ok: true, value: host };
}

/**
 * A path key in the form request paths take after normaliseTarget, without a trailing slash (except
 * the root), so `/v1/`, `/v1//` and `/v1` are one prefix and matching is a plain string comparison.
 */
export function normalisePrefix(prefix: string): Normalised {
  if (!prefix.startsWith('/')) return { ok: false, reason: "must start with '/'" };
  // Requests whose ;parameters would change their route are refused, so such a prefix is unreachable.
  if (prefix.includes(';')) return { ok: false, reason: "must not contain ';'" };
  if (prefix.includes('?')) return { ok: false, reason: "must not contain '?'" };
  // YAML gives Unicode text; clients send UTF-8 percent-encoded, so encode the same way first.
  let ascii: string;
  try {
    ascii = prefix.replace(/[\u0080-\uffff]+/g, encodeURIComponent);
  } catch {
    return { ok: false, reason: 'is not valid Unicode' }; // a lone surrogate
  }
  const normalised = normaliseTarget(ascii);
  if (!normalised.ok)
    return { ok: false, reason: `is not a valid path (${PREFIX_REFUSALS[normalised.reason]})` };
  const path = normalised.path;
  return { ok: true, value: path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path };
}

const PREFIX_REFUSALS: Readonly<Record<Refusal['reason'], string>> = {
  encoded_slash: 'an encoded slash or a backslash',
  bad_encoding: "a '%' not followed by two hex digits, or a '#'",
  not_origin_form: "it must start with '/'",
  dot_segment_parameters: "a dot-segment with ';' parameters",
};

// ---------------------------------------------------------------------------------------------------
// Request target

export type NormalisedPath =
  | { ok: true; path: string; query: string }
  | { ok: false; reason: 'encoded_slash' | 'bad_encoding' | 'not_origin_form' | 'dot_segment_parameters' };

type Refusal = Extract<NormalisedPath, { ok: false }>;

const ENCODED_SLASH: Refusal = Object.freeze({ ok: false, reason: 'encoded_slash' });
const BAD_ENCODING: Refusal = Object.freeze({ ok: false, reason: 'bad_encoding' });
const NOT_ORIGIN_FORM: Refusal = Object.freeze({ ok: false, reason: 'not_origin_form' });
/**
 * `/public/..;/admin`: Tomcat and other servlet containers drop `;parameters` from a segment before
 * resolving dot-segments, so they serve `/admin` while a proxy that routes on `/public` would apply
 * the wrong policy. No legitimate client sends a dot-segment with parameters: refuse it.
 */
const DOT_SEGMENT_PARAMETERS: Refusal = Object.freeze({ ok: false, reason: 'dot_segment_parameters' });

/** RFC 3986 unreserved: an escape of one of these is decoded. */
const UNRESERVED = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~') {
  UNRESERVED[c.charCodeAt(0)] = 1;
}
/** RFC 3986 pchar without `%`: may appear raw in a normalised segment. */
const PCHAR = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@") {
  PCHAR[c.charCodeAt(0)] = 1;
}
/** Hex digit values, both cases; -1 elsewhere. */
const HEX_VALUE = new Int8Array(128).fill(-1);
/** Hex digit values, upper case only: what a normalised escape may contain. */
const UPPER_HEX_VALUE = new Int8Array(128).fill(-1);
for (let v = 0; v < 16; v++) {
  const upper = v.toString(16).toUpperCase().charCodeAt(0);
  const lower = v.toString(16).charCodeAt(0);
  HEX_VALUE[upper] = v;
  HEX_VALUE[lower] = v;
  UPPER_HEX_VALUE[upper] = v;
}
/** `%XX` for every byte value, precomputed so re-encoding allocates nothing new. */
const ESCAPE: string[] = [];
for (let v = 0; v < 256; v++) ESCAPE.push(`%${v.toString(16).toUpperCase().padStart(2, '0')}`);

function hexValue(c: number): number {
  return c < 128 ? (HEX_VALUE[c] as number) : -1;
}

/**
 * Splits an origin-form request target (`req.url`) into a normalised path and the raw query (without
 * `?`, '' when absent). The path is what gets routed, authorised and forwarded, so it is made
 * canonical: escapes of unreserved characters decoded (so `%2e%2e` is a dot-segment), other escapes
 * upper-cased, bytes that may not appear raw in a path percent-encoded, repeated slashes merged,
 * dot-segments resolved (RFC 3986 §5.2.4; never above the root), a trailing slash kept.
 *
 * Refused: an encoded slash or backslash (`%2F`, `%5C`) or a raw backslash (upstreams disagree on
 * whether they separate segments) → encoded_slash; a `%` not followed by two hex digits, a `#`, or a
 * character above U+00FF (Node's parser yields latin1, so this only comes from other callers)
 * → bad_encoding; absolute-form, authority-form or `*` → not_origin_form.
 */
export function normaliseTarget(target: string): NormalisedPath {
  if (target.charCodeAt(0) !== SLASH) return NOT_ORIGIN_FORM;
  const questionMark = target.indexOf('?');
  const end = questionMark === -1 ? target.length : questionMark;
  const query = questionMark === -1 ? '' : target.slice(questionMark + 1);
  if (isNormalPath(target, end)) {
    return { ok: true, path: questionMark === -1 ? target : target.slice(0, end), query };
  }
  const path = rebuildPath(target, end);
  if (typeof path !== 'string') return path;
  return { ok: true, path, query };
}

/**
 * True when `s[0, end)` is already what rebuildPath would produce: no `//`, no `.`/`..` segment, only
 * pchars, and only upper-case escapes of characters that must stay escaped.
 */
function isNormalPath(s: string, end: number): boolean {
  for (let i = 0; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c === SLASH) {
      // The end of the path counts as a segment boundary, hence the SLASH stand-in.
      const next = i + 1 < end ? s.charCodeAt(i + 1) : -1;
      if (next === SLASH) return false;
      if (next === DOT) {
        const second = i + 2 < end ? s.charCodeAt(i + 2) : SLASH;
        if (second === SLASH || second === SEMICOLON) return false;
        const third = i + 3 < end ? s.charCodeAt(i + 3) : SLASH;
        if (second === DOT && (third === SLASH || third === SEMICOLON)) return false;
      }
    } else if (c === PERCENT) {
      if (i + 2 >= end) return false;
      const c1 = s.charCodeAt(i + 1);
      const c2 = s.charCodeAt(i + 2);
      if (c1 >= 128 || c2 >= 128) return false;
      const high = UPPER_HEX_VALUE[c1] as number;
      const low = UPPER_HEX_VALUE[c2] as number;
      if (high < 0 || low < 0) return false;
      const value = high * 16 + low;
      if (value === SLASH || value === BACKSLASH || (value < 128 && UNRESERVED[value] === 1)) return false;
      i += 2;
    } else if (c >= 128 || PCHAR[c] === 0) {
      return false;
    }
  }
  return true;
}

/** The slow path: rebuilds the path segment by segment, or returns why it is refused. */
function rebuildPath(s: string, end: number): string | Refusal {
  const segments: string[] = [];
  let trailingSlash = false;
  let i = 1; // s[0] is the leading '/'
  for (;;) {
    let segment = '';
    let runStart = i; // start of the stretch copied verbatim
    for (; i < end; i++) {
      const c = s.charCodeAt(i);
      if (c === SLASH) break;
      if (c < 128 && PCHAR[c] === 1) continue;
      let replacement: string;
      if (c === PERCENT) {
        const high = i + 2 < end ? hexValue(s.charCodeAt(i + 1)) : -1;
        const low = i + 2 < end ? hexValue(s.charCodeAt(i + 2)) : -1;
        if (high < 0 || low < 0) return BAD_ENCODING;
        const value = high * 16 + low;
        if (value === SLASH || value === BACKSLASH) return ENCODED_SLASH;
        replacement =
          value < 128 && UNRESERVED[value] === 1 ? String.fromCharCode(value) : (ESCAPE[value] as string);
        segment += s.slice(runStart, i) + replacement;
        i += 2;
        runStart = i + 1;
        continue;
      }
      if (c === BACKSLASH) return ENCODED_SLASH;
      if (c === HASH || c > 0xff) return BAD_ENCODING;
      // A byte that may not appear raw in a path (space, quote, control, latin1 high half): escaped, so
      // `/a b` and `/a%20b` are one and the same path for routing, auth and the upstream.
      segment += s.slice(runStart, i) + (ESCAPE[c] as string);
      runStart = i + 1;
    }
    segment += s.slice(runStart, i);

    if (segment.startsWith('.;') || segment.startsWith('..;')) return DOT_SEGMENT_PARAMETERS;
    if (segment === '' || segment === '.') {
      trailingSlash = true;
    } else if (segment === '..') {
      segments.pop();
      trailingSlash = true;
    } else {
      segments.push(segment);
      trailingSlash = false;
    }
    if (i >= end) break;
    i++; // past the '/'
  }
  if (segments.length === 0) return '/';
  const joined = `/${segments.join('/')}`;
  return trailingSlash ? `${joined}/` : joined;
}
