import type { KeyObject } from 'node:crypto';
import http from 'node:http';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { type Clock, systemClock } from '../auth/clock.ts';
import { safeEqual } from '../auth/compare.ts';
import { deriveSigningKey, issueToken } from '../auth/tokens.ts';
import type { MainConfig } from '../config/types.ts';
import { type ErrorCode, sendError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { tokenRequestsRefusedTotal, tokensIssuedTotal } from '../observe/metrics.ts';
import { parseTokenRequest } from './token-request.ts';

/** Bodies over this are answered 413 (docs/tokens.md). */
export const MAX_BODY_BYTES = 16 * 1024;

export interface TokenApiDeps {
  main: Pick<MainConfig, 'maxTokenMinutes' | 'timeouts'>;
  /** The current masterkey (may change on reload), or null: issuance disabled (503). */
  masterkey: () => string | null;
  logger: Logger;
  /** Token clock; defaults to the process clock (see auth/clock). */
  now?: Clock;
  /** Wrong master keys one client IP may send per window before it is answered 429. */
  failureLimit?: { attempts: number; windowSeconds: number };
  /**
   * Wrong master keys all clients together may send per window: the ceiling that many source
   * addresses (a botnet, a pod network) cannot get around. Reaching it pauses issuance for everyone
   * until the window ends; that is the price of bounding the guesses (docs/security.md).
   */
  globalFailureLimit?: { attempts: number; windowSeconds: number };
}

const DEFAULT_FAILURE_LIMIT = { attempts: 10, windowSeconds: 300 };
const DEFAULT_GLOBAL_FAILURE_LIMIT = { attempts: 60, windowSeconds: 60 };
/** The single key of the global limiter. */
const EVERYONE = 'all clients';

/**
 * The token API (`config_address`): `POST /jwt` issues tokens, `GET /healthz` says the listener is up.
 * Returned not listening; main.ts listens. Guessing the master key is slowed down per client IP (the
 * TCP peer: this listener is meant to be a cluster-internal Service, not behind a proxy).
 */
export function createTokenApiServer(deps: TokenApiDeps): http.Server {
  const now = deps.now ?? systemClock;
  const limit = deps.failureLimit ?? DEFAULT_FAILURE_LIMIT;
  const wrongKeys = new RateLimiterMemory({ points: limit.attempts, duration: limit.windowSeconds });
  const globalLimit = deps.globalFailureLimit ?? DEFAULT_GLOBAL_FAILURE_LIMIT;
  const allWrongKeys = new RateLimiterMemory({
    points: globalLimit.attempts,
    duration: globalLimit.windowSeconds,
  });
  let signing: { masterkey: string; key: KeyObject } | null = null;
  const signingKey = (masterkey: string): KeyObject => {
    if (signing?.masterkey !== masterkey) signing = { masterkey, key: deriveSigningKey(masterkey) };
    return signing.key;
  };

  const refuseToken = (
    res: http.ServerResponse,
    client: string,
    code: ErrorCode,
    headers?: Record<string, string | number>,
    message?: string,
  ): void => {
    tokenRequestsRefusedTotal.inc({ reason: code });
    deps.logger.info({ event: 'token_refused', reason: code, client }, 'token request refused');
    sendError(res, code, headers, message);
  };

  async function issue(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const client = req.socket.remoteAddress ?? 'unknown';
    const masterkey = deps.masterkey();
    if (masterkey === null) return refuseToken(res, client, 'token_issuance_disabled');

    const tooManyGuesses = (msBeforeNext: number): void =>
      refuseToken(
        res,
        client,
        'rate_limited',
        { 'retry-after': Math.max(1, Math.ceil(msBeforeNext / 1000)) },
        'too many wrong master keys',
      );
    // Early check, so a blocked client is told 429 before it sends a body (the order in docs/tokens.md).
    const blocked = await wrongKeys.get(client);
    if (blocked !== null && blocked.remainingPoints <= 0) return tooManyGuesses(blocked.msBeforeNext);
    const allBlocked = await allWrongKeys.get(EVERYONE);
    if (allBlocked !== null && allBlocked.remainingPoints <= 0)
      return tooManyGuesses(allBlocked.msBeforeNext);

    const mediaType = (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim().toLowerCase();
    if (mediaType !== 'application/json') return refuseToken(res, client, 'unsupported_media_type');

    const body = await readBody(req, MAX_BODY_BYTES);
    // Closing stops a client streaming an endless body into a connection we would otherwise drain.
    if (body === null) return refuseToken(res, client, 'payload_too_large', { connection: 'close' });

    const parsed = parseTokenRequest(body, deps.main.maxTokenMinutes);
    if (!parsed.ok) return refuseToken(res, client, 'bad_request', undefined, parsed.message);

    // The early check alone lets any number of requests whose bodies were in flight together be
    // compared. consume() counts synchronously, so reserving a guess before comparing caps them at
    // the limit however many arrive at once; a right key gives its reservation back.
    try {
      await wrongKeys.consume(client);
    } catch (refusal) {
      if (!(refusal instanceof RateLimiterRes)) throw refusal;
      return tooManyGuesses(refusal.msBeforeNext);
    }
    try {
      await allWrongKeys.consume(EVERYONE);
    } catch (refusal) {
      if (!(refusal instanceof RateLimiterRes)) throw refusal;
      await wrongKeys.reward(client); // this one was never compared
      return tooManyGuesses(refusal.msBeforeNext);
    }
    if (!safeEqual(parsed.request.masterKey, masterkey)) return refuseToken(res, client, 'forbidden');
    await wrongKeys.reward(client);
    await allWrongKeys.reward(EVERYONE);

    const issued = await issueToken(signingKey(masterkey), {
      owner: parsed.request.owner,
      validMinutes: parsed.request.validMinutes,
      scope: parsed.request.scope,
      now,
    });
    tokensIssuedTotal.inc();
    const expiresAt = new Date(issued.expiresAt * 1000).toISOString();
    deps.logger.info(
      {
        event: 'token_issued',
        owner: issued.owner,
        jti: issued.jti,
        expires_at: expiresAt,
        scope: issued.scope,
        client,
      },
      'token issued',
    );
    // `token` first: seed clients take the first member's value as the token.
    const answer = JSON.stringify({
      token: issued.token,
      owner: issued.owner,
      expires_at: expiresAt,
      jti: issued.jti,
      ...(issued.scope === null ? {} : { scope: issued.scope }),
    });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(answer),
      'cache-control': 'no-store',
    });
    res.end(answer);
  }

  const server = http.createServer(
    {
      requestTimeout: 30_000,
      headersTimeout: Math.min(deps.main.timeouts.clientHeadersMs, 30_000),
      keepAliveTimeout: deps.main.timeouts.clientKeepAliveMs,
    },
    (req, res) => {
      const url = req.url ?? '/';
      const question = url.indexOf('?');
      const path = question === -1 ? url : url.slice(0, question);
      if (path === '/jwt') {
        if (req.method !== 'POST') {
          tokenRequestsRefusedTotal.inc({ reason: 'method_not_allowed' });
          return sendError(res, 'method_not_allowed', { allow: 'POST' });
        }
        issue(req, res).catch((error: unknown) => {
          deps.logger.error({ event: 'token_api_error', err: error }, 'token request failed');
          sendError(res, 'internal_error');
        });
        return;
      }
      if (path === '/healthz') {
        if (req.method !== 'GET' && req.method !== 'HEAD') {
          return sendError(res, 'method_not_allowed', { allow: 'GET, HEAD' });
        }
        const body = '{"status":"ok"}';
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(req.method === 'HEAD' ? undefined : body);
        return;
      }
      sendError(res, 'not_found', undefined, 'the token API serves POST /jwt and GET /healthz only');
    },
  );
  return server;
}

/**
 * The request body as UTF-8 text, or null as soon as it exceeds `limit` bytes. Event-based rather than
 * `for await`: leaving an async iterator early destroys the socket, and the 413 would never be sent.
 */
function readBody(req: http.IncomingMessage, limit: number): Promise<string | null> {
  if (Number(req.headers['content-length']) > limit) return Promise.resolve(null);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      req.off('data', onData).off('end', onEnd);
      resolve(null);
    };
    const onEnd = () => resolve(Buffer.concat(chunks).toString('utf8'));
    req.on('data', onData).on('end', onEnd).on('error', reject);
  });
}
