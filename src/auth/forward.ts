import { Pool } from 'undici';
import type { ForwardAuthSettings } from '../config/types.ts';
import { normaliseHeaderName } from '../header-names.ts';
import { isGrpcRequest } from '../local-response.ts';
import type { Logger } from '../log.ts';
import { forwardAuthDuration, forwardAuthFailing } from '../observe/metrics.ts';
import type { ProxyRequest } from '../request/record.ts';
import { requestTarget } from '../request/targets.ts';
import {
  type AuthDenial,
  type Authenticator,
  type AuthOutcome,
  subjectHeaderValue,
} from './authenticator.ts';
import { signinLocation as expandSignin } from './signin-url.ts';

/**
 * `type: forward` (docs/authentication.md#forward-auth): before a request goes upstream, a GET (HEAD
 * for HEAD) without its body asks an auth service (oauth2-proxy, Authelia…) whether it may. The
 * answer decides, failing closed:
 *
 * - 2xx: pass; the `auth_response_headers` it returned are sent upstream in place of any the client
 *   sent (those are removed even when the auth service returns none: delete, then set);
 * - 401, 403, 3xx (not 304): relayed to the client with its status, Location, Set-Cookie,
 *   WWW-Authenticate, Content-Type and body (at most 64 KiB), so login redirects work; with
 *   `signin_url`, a 401 becomes a 302 to the sign-in page instead (not for gRPC: it stays a 401);
 * - anything else, a timeout (`timeout_seconds`, connect to body) or no connection: 503
 *   `auth_unavailable`.
 *
 * Redirects are never followed. The request's body is never read here: it stays in the client's
 * socket (an `Expect: 100-continue` is answered only after a 2xx) and is streamed upstream as usual.
 */

/** Relayed bodies are login pages and short messages; anything longer is not relayed. */
export const MAX_RELAYED_BODY_BYTES = 64 * 1024;
/** Headers of the auth service's refusal that reach the client. */
const RELAYED_HEADERS = ['location', 'set-cookie', 'www-authenticate', 'content-type'] as const;
/** Connections kept open to one auth service (its checks are small, quick and frequent). */
const POOL_CONNECTIONS = 64;
const POOL_KEEP_ALIVE_MS = 30_000;

export interface ForwardMethodDeps {
  logger: Logger;
}

export interface ForwardMethod {
  create(settings: ForwardAuthSettings): Authenticator;
  close(): Promise<void>;
}

/**
 * The forward method: one keep-alive pool per auth service (origin and timeout), shared by every
 * policy that names it and kept across reloads, so a reload never drops warm connections.
 */
export function createForwardMethod(deps: ForwardMethodDeps): ForwardMethod {
  const pools = new Map<string, AuthServicePool>();

  const poolFor = (origin: string, timeoutMs: number): AuthServicePool => {
    const key = `${origin}|${timeoutMs}`;
    let pool = pools.get(key);
    if (pool === undefined) {
      pool = {
        origin,
        dispatcher: new Pool(origin, {
          connections: POOL_CONNECTIONS,
          keepAliveTimeout: POOL_KEEP_ALIVE_MS,
          connect: { timeout: timeoutMs },
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        }),
        failing: false,
      };
      pools.set(key, pool);
    }
    return pool;
  };

  return {
    create(settings) {
      const url = new URL(settings.url);
      const pool = poolFor(url.origin, settings.timeoutMs);
      return createForwardAuthenticator(settings, `${url.pathname}${url.search}`, pool, deps.logger);
    },
    async close() {
      await Promise.all([...pools.values()].map((pool) => pool.dispatcher.close()));
      pools.clear();
    },
  };
}

interface AuthServicePool {
  /** For logs: never the configured URL's path or query, which may carry a secret. */
  readonly origin: string;
  readonly dispatcher: Pool;
  /** The last check failed to get a usable answer: logged once per outage, not once per request. */
  failing: boolean;
}

type Failure = 'timeout' | 'unreachable' | 'bad_status' | 'body_too_large';

function createForwardAuthenticator(
  settings: ForwardAuthSettings,
  path: string,
  pool: AuthServicePool,
  logger: Logger,
): Authenticator {
  const fromUpstreamCopies = settings.authResponseHeaders.map(normaliseHeaderName);
  if (settings.subjectHeader !== null) fromUpstreamCopies.push(normaliseHeaderName(settings.subjectHeader));
  const consumed = [...new Set(fromUpstreamCopies)];

  /**
   * Each route's last failure, published so /status shows the route down while it answers 503
   * (docs/observability.md#the-status-page); the gauge changes only when the failure does.
   */
  const failingRoutes = new Map<string, Failure>();
  const routeFailed = (routeId: string, failure: Failure | null) => {
    const previous = failingRoutes.get(routeId);
    if (previous === (failure ?? undefined)) return;
    if (previous !== undefined) forwardAuthFailing.remove({ route: routeId, failure: previous });
    if (failure === null) {
      failingRoutes.delete(routeId);
    } else {
      forwardAuthFailing.set({ route: routeId, failure }, 1);
      failingRoutes.set(routeId, failure);
    }
  };

  const unavailable = (request: ProxyRequest, failure: Failure, detail: string): AuthOutcome => {
    routeFailed(request.route.id, failure);
    if (!pool.failing) {
      pool.failing = true;
      logger.warn(
        {
          event: 'forward_auth_unavailable',
          route: request.route.id,
          auth_service: pool.origin,
          failure,
          detail,
        },
        'the forward-auth service gave no usable answer: its routes answer 503 until it does',
      );
    }
    return 'auth_unavailable';
  };

  const recovered = (request: ProxyRequest) => {
    if (failingRoutes.size > 0) routeFailed(request.route.id, null);
    if (!pool.failing) return;
    pool.failing = false;
    logger.info(
      { event: 'forward_auth_available', route: request.route.id, auth_service: pool.origin },
      'the forward-auth service answers again',
    );
  };

  return async (request) => {
    const { req } = request;
    // Whatever the auth service answers, the client's own copies of what it vouches for are dropped.
    request.consumedHeaders.push(...consumed);
    const method = req.method === 'HEAD' ? 'HEAD' : 'GET';
    const startedAt = performance.now();
    const headers = checkHeaders(request, settings);
    // The check's CLIENT span, its traceparent sent to the auth service (docs/observability.md#tracing).
    const span = request.trace === null ? null : request.trace.authCall(pool.origin, method, headers);
    const observe = (result: 'allowed' | 'denied' | 'error', failure?: Failure) => {
      forwardAuthDuration.observe(
        { route: request.route.id, result },
        (performance.now() - startedAt) / 1000,
      );
      if (span === null) return;
      span.attribute('tollgate.auth.result', result);
      span.end(result === 'error' ? (failure ?? 'error') : null);
    };
    const signal = AbortSignal.timeout(settings.timeoutMs);
    let response: Awaited<ReturnType<Pool['request']>>;
    try {
      response = await pool.dispatcher.request({ path, method, headers, signal });
    } catch (error) {
      const failure = signal.aborted ? 'timeout' : 'unreachable';
      observe('error', failure);
      return unavailable(request, failure, errorDetail(error));
    }
    const status = response.statusCode;
    span?.responded(status);
    try {
      if (status >= 200 && status < 300) {
        await response.body.dump({ limit: MAX_RELAYED_BODY_BYTES, signal });
        accept(request, settings, response.headers);
        observe('allowed');
        recovered(request);
        return null;
      }
      if (status === 401 || status === 403 || (status >= 300 && status < 400 && status !== 304)) {
        const body = await readLimited(response.body, MAX_RELAYED_BODY_BYTES);
        observe('denied');
        recovered(request);
        if (body === null) return unavailable(request, 'body_too_large', `a ${status} answer over 64 KiB`);
        return denial(request, settings, status, response.headers, body);
      }
      await response.body.dump({ limit: MAX_RELAYED_BODY_BYTES, signal });
    } catch (error) {
      const failure = signal.aborted ? 'timeout' : 'unreachable';
      observe('error', failure);
      return unavailable(request, failure, errorDetail(error));
    }
    observe('error', 'bad_status');
    return unavailable(request, 'bad_status', `answered ${status}`);
  };
}

/** The check sent to the auth service: the chosen client headers and where the request was going. */
function checkHeaders(request: ProxyRequest, settings: ForwardAuthSettings): Record<string, string> {
  const { req } = request;
  const headers: Record<string, string> = {};
  for (const name of settings.authRequestHeaders) {
    const value = req.headers[name];
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  headers['x-forwarded-method'] = req.method ?? 'GET';
  headers['x-forwarded-proto'] = request.secure ? 'https' : 'http';
  headers['x-forwarded-host'] = request.rawHost;
  headers['x-forwarded-uri'] = requestTarget(request);
  headers['x-forwarded-for'] = request.forwardedFor;
  return headers;
}

type ResponseHeaders = Record<string, string | string[] | undefined>;

function accept(request: ProxyRequest, settings: ForwardAuthSettings, headers: ResponseHeaders): void {
  const upstream: string[] = [];
  for (const name of settings.authResponseHeaders) {
    const value = headers[name];
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) upstream.push(name, one);
  }
  if (upstream.length > 0) request.upstreamHeaders = upstream;
  if (settings.subjectHeader !== null) {
    const subject = headers[settings.subjectHeader];
    const first = Array.isArray(subject) ? subject[0] : subject;
    if (first !== undefined && first !== '') request.subject = subjectHeaderValue(first);
  }
}

function denial(
  request: ProxyRequest,
  settings: ForwardAuthSettings,
  status: number,
  headers: ResponseHeaders,
  body: Buffer,
): AuthDenial {
  const relayed: Record<string, string | string[]> = {};
  for (const name of RELAYED_HEADERS) {
    const value = headers[name];
    if (value !== undefined) relayed[name] = value;
  }
  // Never stored by a cache in between: the answer is about this client's credentials.
  relayed['cache-control'] = 'no-store';
  const sentCredentials = settings.authRequestHeaders.some((name) => request.req.headers[name] !== undefined);
  const reason =
    status >= 300 && status < 400
      ? 'login_redirect'
      : sentCredentials
        ? 'invalid_credentials'
        : 'missing_credentials';
  // A gRPC client cannot follow a redirect to a login page: it keeps the 401, which it reads as
  // 16 UNAUTHENTICATED (local-response.ts), where a 302 would be 2 UNKNOWN.
  if (status === 401 && settings.signinUrl !== null && !isGrpcRequest(request.req)) {
    const { location: _dropped, 'www-authenticate': _challenge, 'content-type': _type, ...kept } = relayed;
    return {
      denial: {
        status: 302,
        headers: { ...kept, location: signinLocation(request, settings.signinUrl) },
        body: Buffer.alloc(0),
      },
      reason,
    };
  }
  return { denial: { status, headers: relayed, body }, reason };
}

/**
 * `signin_url` expanded (auth/signin-url: `$host`, `$escaped_request_uri`…) with `rd=` the URL the
 * client asked for (token parameters removed) unless it passes `rd` itself, as ingress-nginx does.
 */
function signinLocation(request: ProxyRequest, signinUrl: string): string {
  return expandSignin(signinUrl, {
    secure: request.secure,
    host: request.host,
    rawHost: request.rawHost,
    requestUri: requestTarget(request),
  });
}

/** The whole body, or null when it is longer than `limit` bytes (then the rest is not read). */
async function readLimited(
  body: AsyncIterable<Buffer> & { destroy(): void },
  limit: number,
): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function errorDetail(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return String(code ?? (error as Error).message ?? error);
}
