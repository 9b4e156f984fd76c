import type { IncomingMessage } from 'node:http';
import type { ProxyRequest } from '../request/record.ts';
import { takeQueryParam } from './query.ts';

/**
 * Every place a Tollgate token can travel besides `Authorization`, and its removal before a request
 * is forwarded (docs/tokens.md#what-reaches-the-upstream). Runs on every route, open ones included:
 * a shared link pasted onto another route, or the `Referer` a page sends for its own subresources,
 * must never hand the token to an upstream that has no business seeing it.
 */
export interface TokenCarriers {
  /** The token from the query parameter (exact name), or null when absent. */
  readonly fromQuery: string | null;
  /** The token from the link cookie, or null. */
  readonly fromCookie: string | null;
}

/**
 * Takes the token out of the forwarded query, the `Referer` header and the `Cookie` header of this
 * request, and returns what was found. The request's headers are rewritten in place (both the parsed
 * and the raw list), so every forwarder — HTTP and WebSocket — sends the cleaned values.
 */
export function removeTokenCarriers(
  request: ProxyRequest,
  tokenParam: string,
  cookieName: string,
): TokenCarriers {
  const fromQuery = takeQueryParam(request.query, tokenParam);
  request.forwardQuery = fromQuery.rest;

  const { req } = request;
  const referer = req.headers.referer;
  if (referer !== undefined) {
    const cleaned = refererWithoutToken(referer, tokenParam);
    if (cleaned !== referer) replaceRequestHeader(req, 'referer', cleaned);
  }

  let fromCookie: string | null = null;
  const cookie = req.headers.cookie;
  if (cookie?.includes(cookieName)) {
    const taken = takeCookie(cookie, cookieName);
    if (taken.value !== null) {
      fromCookie = taken.value;
      replaceRequestHeader(req, 'cookie', taken.rest === '' ? null : taken.rest);
    }
  }
  return { fromQuery: fromQuery.value, fromCookie };
}

/** The Referer with the token parameter (and its variants) taken out of its query. */
export function refererWithoutToken(referer: string, tokenParam: string): string {
  const question = referer.indexOf('?');
  if (question === -1) return referer;
  const hash = referer.indexOf('#', question);
  const query = referer.slice(question + 1, hash === -1 ? undefined : hash);
  const { rest } = takeQueryParam(query, tokenParam);
  if (rest === query) return referer;
  const base = referer.slice(0, question);
  return rest === '' ? base : `${base}?${rest}`;
}

/**
 * Takes every `name=value` pair out of a Cookie header (RFC 6265 §5.4: `; `-separated). Returns the
 * first value (the browser sends the cookie with the longest Path first) and the other pairs.
 */
export function takeCookie(header: string, name: string): { value: string | null; rest: string } {
  let value: string | null = null;
  const kept: string[] = [];
  for (const pair of header.split(';')) {
    const trimmed = pair.trim();
    if (trimmed === '') continue;
    const equals = trimmed.indexOf('=');
    const pairName = equals === -1 ? '' : trimmed.slice(0, equals).trim();
    if (pairName === name) {
      value ??= trimmed.slice(equals + 1).trim();
    } else {
      kept.push(trimmed);
    }
  }
  return value === null ? { value: null, rest: header } : { value, rest: kept.join('; ') };
}

/** Takes every cookie whose name `drop` accepts out of the forwarded Cookie header. */
export function removeCookies(req: IncomingMessage, drop: (name: string) => boolean): void {
  const header = req.headers.cookie;
  if (header === undefined) return;
  const kept = header
    .split(';')
    .map((pair) => pair.trim())
    .filter((pair) => {
      if (pair === '') return false;
      const equals = pair.indexOf('=');
      return !drop((equals === -1 ? pair : pair.slice(0, equals)).trim());
    });
  replaceRequestHeader(req, 'cookie', kept.length === 0 ? null : kept.join('; '));
}

/**
 * Sets (or with null, removes) a request header in both `req.headers` and `req.rawHeaders`, which
 * different forwarders read. Every raw copy of the header is replaced by one.
 */
function replaceRequestHeader(req: IncomingMessage, lowerName: string, value: string | null): void {
  const raw = req.rawHeaders;
  const out: string[] = [];
  let written = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.toLowerCase() !== lowerName) {
      out.push(name, raw[i + 1] as string);
    } else if (!written && value !== null) {
      out.push(name, value);
      written = true;
    }
  }
  raw.length = 0;
  raw.push(...out);
  if (value === null) delete req.headers[lowerName];
  else req.headers[lowerName] = value;
}
