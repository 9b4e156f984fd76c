import * as client from 'openid-client';
import type { Logger } from '../../log.ts';
import { emailIsVerified } from '../allow-rules.ts';
import type { Clock } from '../clock.ts';
import type { Sealer } from '../session-cookie.ts';
import type { OidcProvider } from './provider.ts';

/**
 * What a session cookie holds once opened (docs/authentication.md#sessions). Short keys: the whole
 * thing travels in a cookie on every request.
 */
export interface Session {
  /** Format version. */
  v: 1;
  /** The oidc_providers name that logged this person in: another provider's routes ignore it. */
  p: string;
  sub: string;
  em: string | null;
  gr: string[];
  /** ID token claims beyond the protocol ones, for `allow.claims`. */
  cl: Record<string, unknown>;
  /** Unix seconds: the tokens' expiry; past it, refreshed (with `rt`) or gone. */
  exp: number;
  /** Unix seconds: login + session_max_age_seconds; nothing extends a session past it. */
  max: number;
  rt?: string;
  /** Kept only with pass_access_token. */
  at?: string;
  /** For the logout's id_token_hint. */
  idt?: string;
}

/** Protocol claims of an ID token that say nothing about the person: not kept in the cookie. */
const PROTOCOL_CLAIMS = new Set([
  'iss',
  'aud',
  'exp',
  'iat',
  'nbf',
  'nonce',
  'at_hash',
  'c_hash',
  'auth_time',
  'sid',
  'azp',
  'jti',
  'acr',
  'amr',
  'sub',
]);
/** Longest ID token kept for the logout hint (see sessionFromTokens). */
const MAX_KEPT_ID_TOKEN = 2048;
/** A session is refreshed this long before its tokens expire, so a request never meets an expired one. */
const REFRESH_EARLY_SECONDS = 30;
/** Without any expiry from the provider, a login lasts this long before the next refresh. */
const DEFAULT_TOKEN_SECONDS = 300;
/** Opened cookies remembered, so a request with a known session costs a map lookup, not an AES-GCM open. */
const OPENED_CACHE_ENTRIES = 10_000;
/** A refresh's outcome is handed to requests still carrying the old cookie for this long. */
const REFRESHED_KEPT_MS = 60_000;

type Tokens = client.TokenEndpointResponse & client.TokenEndpointResponseHelpers;

/** Builds a session from a token response (login or refresh); `previous` fills what a refresh omits. */
export function sessionFromTokens(
  provider: OidcProvider,
  tokens: Tokens,
  nowSeconds: number,
  maxAgeSeconds: number,
  previous: Session | null,
  userinfo: Readonly<Record<string, unknown>> | null = null,
): Session {
  const settings = provider.settings;
  const claims = tokens.claims();
  // The ID token wins over userinfo; what neither says (a refresh's ID token often omits email and
  // groups) is kept from the session being renewed.
  const source: Record<string, unknown> = { ...userinfo, ...claims };
  // What is kept apart (subject, email, groups) is not stored twice; identityClaims() puts it back.
  const apart = new Set([settings.subjectClaim, settings.groupsClaim, 'email', 'email_verified']);
  const kept: Record<string, unknown> = { ...previous?.cl };
  for (const [name, value] of Object.entries(source)) {
    if (!PROTOCOL_CLAIMS.has(name) && !apart.has(name)) kept[name] = value;
  }
  const subjectValue = source[settings.subjectClaim];
  const subject = typeof subjectValue === 'string' && subjectValue !== '' ? subjectValue : previous?.sub;
  if (subject === undefined) throw new SessionError('no_subject');
  const email =
    typeof source.email === 'string'
      ? emailIsVerified(source.email_verified, settings.requireVerifiedEmail)
        ? source.email
        : null
      : (previous?.em ?? null);
  const groupsValue = source[settings.groupsClaim];
  const groups = Array.isArray(groupsValue)
    ? groupsValue.filter((group): group is string => typeof group === 'string')
    : typeof groupsValue === 'string'
      ? [groupsValue]
      : (previous?.gr ?? []);
  const expiresIn = tokens.expiresIn();
  const tokenExpiry =
    typeof claims?.exp === 'number'
      ? claims.exp
      : expiresIn !== undefined
        ? nowSeconds + expiresIn
        : nowSeconds + DEFAULT_TOKEN_SECONDS;
  const max = previous?.max ?? nowSeconds + maxAgeSeconds;
  const session: Session = {
    v: 1,
    p: settings.name,
    sub: subject,
    em: email,
    gr: groups,
    cl: kept,
    exp: Math.min(tokenExpiry, max),
    max,
  };
  const refresh = tokens.refresh_token ?? previous?.rt;
  if (refresh !== undefined) session.rt = refresh;
  if (settings.passAccessToken) session.at = tokens.access_token;
  // Only for the logout's id_token_hint, which is optional: a huge ID token (hundreds of groups)
  // would double the cookie for it, so such a one is not kept (the logout then sends client_id alone).
  const idToken = tokens.id_token ?? previous?.idt;
  if (idToken !== undefined && idToken.length <= MAX_KEPT_ID_TOKEN) session.idt = idToken;
  return session;
}

/** The claims the allow rules see: the stored ones with email and groups under their claim names. */
export function identityClaims(session: Session, groupsClaim: string): Record<string, unknown> {
  return { ...session.cl, email: session.em ?? undefined, [groupsClaim]: session.gr, sub: session.sub };
}

export class SessionError extends Error {
  readonly reason: string;
  constructor(reason: string) {
    super(reason);
    this.reason = reason;
  }
}

/** A usable session, and the cookie value to set when it was just refreshed (else null). */
export interface OpenedSession {
  session: Session;
  resealed: string | null;
}

export interface SessionStore {
  /**
   * The live session a cookie holds for `provider`, refreshed when due; null when there is none
   * (tampered, foreign, expired beyond refresh, another provider's). Synchronous on a cache hit.
   */
  use(sealed: string, provider: OidcProvider): OpenedSession | null | Promise<OpenedSession | null>;
  /** Opens a cookie whatever its age (the logout's id_token_hint). */
  peek(sealed: string): Promise<Session | null>;
  seal(session: Session): Promise<string>;
}

export function createSessionStore(deps: {
  sealer: Sealer;
  now: Clock;
  maxAgeSeconds: number;
  logger: Logger;
}): SessionStore {
  const { sealer, now, logger } = deps;
  const opened = new Map<string, Session>();
  /** In-flight refreshes by refresh token: one at a time per session in this process. */
  const refreshing = new Map<string, Promise<OpenedSession | null>>();
  const refreshed = new Map<string, { result: OpenedSession | null; until: number }>();

  const remember = (sealed: string, session: Session) => {
    if (opened.size >= OPENED_CACHE_ENTRIES) opened.delete(opened.keys().next().value as string);
    opened.set(sealed, session);
  };

  const open = async (sealed: string): Promise<Session | null> => {
    const cached = opened.get(sealed);
    if (cached !== undefined) return cached;
    const payload = await sealer.open(sealed);
    if (!isSession(payload)) return null;
    remember(sealed, payload);
    return payload;
  };

  const refresh = (session: Session, provider: OidcProvider): Promise<OpenedSession | null> => {
    const token = session.rt as string;
    const recent = refreshed.get(token);
    if (recent !== undefined && recent.until > Date.now()) return Promise.resolve(recent.result);
    let pending = refreshing.get(token);
    if (pending === undefined) {
      pending = runRefresh(session, provider).then((result) => {
        refreshing.delete(token);
        // Rotating refresh tokens are single-use: requests that still carry the old cookie get this
        // outcome instead of a second refresh the provider would refuse.
        refreshed.set(token, { result, until: Date.now() + REFRESHED_KEPT_MS });
        for (const [key, entry] of refreshed) if (entry.until <= Date.now()) refreshed.delete(key);
        return result;
      });
      refreshing.set(token, pending);
    }
    return pending;
  };

  const runRefresh = async (session: Session, provider: OidcProvider): Promise<OpenedSession | null> => {
    const stillValid = session.exp > now();
    const keepOrDrop = (): OpenedSession | null => (stillValid ? { session, resealed: null } : null);
    const configuration = await provider.configuration();
    if (configuration === null) return keepOrDrop();
    try {
      const tokens = await client.refreshTokenGrant(configuration, session.rt as string);
      const next = sessionFromTokens(provider, tokens, now(), deps.maxAgeSeconds, session);
      if (next.sub !== session.sub) throw new SessionError('subject_changed');
      const sealed = await sealer.seal(next);
      remember(sealed, next);
      return { session: next, resealed: sealed };
    } catch (error) {
      // Either way a session whose tokens are still valid is kept until they expire: a refresh
      // token refused because another worker or replica just rotated it (two requests of one page
      // landing on two processes) must not log the person out; the winner's cookie replaces this one.
      // Once the tokens have expired, the session ends.
      const refused =
        (error instanceof client.ResponseBodyError && error.status < 500) || error instanceof SessionError;
      logger.info(
        {
          event: 'oidc_refresh_failed',
          provider: provider.settings.name,
          reason: refused ? 'refused' : 'unreachable',
          err: (error as Error).message,
        },
        'session refresh failed',
      );
      return keepOrDrop();
    }
  };

  const decide = (session: Session | null, provider: OidcProvider) => {
    if (session === null || session.p !== provider.settings.name) return null;
    const seconds = now();
    if (session.max <= seconds) return null;
    if (session.exp - REFRESH_EARLY_SECONDS > seconds) return { session, resealed: null };
    if (session.rt === undefined || session.exp >= session.max) {
      return session.exp > seconds ? { session, resealed: null } : null;
    }
    return refresh(session, provider);
  };

  return {
    use(sealed, provider) {
      const cached = opened.get(sealed);
      if (cached !== undefined) return decide(cached, provider);
      return open(sealed).then((session) => decide(session, provider));
    },
    peek: open,
    seal: (session) => sealer.seal(session),
  };
}

function isSession(payload: Record<string, unknown> | null): payload is Record<string, unknown> & Session {
  return (
    payload !== null &&
    payload.v === 1 &&
    typeof payload.p === 'string' &&
    typeof payload.sub === 'string' &&
    typeof payload.exp === 'number' &&
    typeof payload.max === 'number' &&
    Array.isArray(payload.gr) &&
    typeof payload.cl === 'object' &&
    payload.cl !== null
  );
}
