import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { sendError } from '../errors.ts';
import type { RequestRecorder } from '../observe.ts';
import { normaliseHost, normaliseTarget } from '../routing/normalise.ts';
import type { Runtime } from '../runtime.ts';
import { plainIp, resolveClientAddress, type TrustTest } from '../upstream/client-address.ts';
import type { ProxyRequest, Stage } from './context.ts';

export interface ProxyHandlerDeps {
  runtime: Runtime;
  stages: readonly Stage[];
  forward: (request: ProxyRequest) => void;
  recorder: RequestRecorder;
  isTrustedProxy: TrustTest;
}

export type ResolvedRequest = { ok: true; request: ProxyRequest } | { ok: false; clientIp: string };

/**
 * Turns an incoming request into a ProxyRequest: normalised host and path, the matching route of the
 * table current at arrival, the client's address. Answers 400/404 itself (and returns ok: false).
 * Shared by plain requests and WebSocket upgrades.
 */
export function resolveRequest(
  req: IncomingMessage,
  res: ServerResponse,
  runtime: Runtime,
  isTrustedProxy: TrustTest,
  startedAt: number,
): ResolvedRequest {
  const table = runtime.table();
  const peerIp = plainIp(req.socket.remoteAddress);
  const forwardedFor = req.headers['x-forwarded-for'];
  const address = resolveClientAddress(
    peerIp,
    Array.isArray(forwardedFor) ? forwardedFor.join(', ') : forwardedFor,
    isTrustedProxy,
  );
  if (hasDuplicateHost(req.rawHeaders)) {
    // Two Host headers make "which site is this?" ambiguous between us and the upstream (nginx: 400).
    sendError(res, 'bad_request', undefined, 'more than one Host header');
    return { ok: false, clientIp: address.clientIp };
  }
  const host = normaliseHost(req.headers.host);
  if (host === null) {
    sendError(res, 'bad_request', undefined, 'the Host header is missing or malformed');
    return { ok: false, clientIp: address.clientIp };
  }
  const target = normaliseTarget(req.url ?? '');
  if (!target.ok) {
    sendError(res, 'bad_path');
    return { ok: false, clientIp: address.clientIp };
  }
  const route = table.match(host, target.path);
  if (route === null) {
    sendError(res, 'not_found');
    return { ok: false, clientIp: address.clientIp };
  }
  if (target.path.indexOf(';') !== -1 && table.match(host, withoutPathParameters(target.path)) !== route) {
    // `/admin;x` and `/;x/admin` route to `/` here, but servlet containers (Tomcat, Jetty, Spring)
    // drop `;parameters` and serve `/admin`: a bypass of /admin's policy. When the two readings pick
    // different routes we cannot know which one the upstream uses, so we refuse, like `..;`.
    sendError(res, 'bad_path');
    return { ok: false, clientIp: address.clientIp };
  }
  const tls = (req.socket as TLSSocket).encrypted === true;
  const secure = tls || (address.peerTrusted && req.headers['x-forwarded-proto'] === 'https');
  return {
    ok: true,
    request: {
      req,
      res,
      table,
      route,
      host,
      rawHost: req.headers.host ?? '',
      path: target.path,
      query: target.query,
      secure,
      peerIp,
      clientIp: address.clientIp,
      forwardedFor: address.forwardedFor,
      peerTrusted: address.peerTrusted,
      startedAt,
      subject: null,
      forwardQuery: target.query,
      consumedHeaders: [],
      responseCookies: [],
      responseHeaders: null,
      candidates: route.servers,
      upstream: null,
      responseBytes: 0,
      completed: null,
    },
  };
}

/**
 * The path as servlet containers route it: `;parameters` removed from every segment and the empty
 * segments that leaves merged (`/a;x/b` → `/a/b`, `/;x/a` → `/a`).
 */
function withoutPathParameters(path: string): string {
  const names: string[] = [];
  for (const segment of path.split('/')) {
    const semicolon = segment.indexOf(';');
    const name = semicolon === -1 ? segment : segment.slice(0, semicolon);
    if (name !== '') names.push(name);
  }
  return `/${names.join('/')}`;
}

function hasDuplicateHost(rawHeaders: readonly string[]): boolean {
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length !== 4 || name.toLowerCase() !== 'host') continue;
    if (seen) return true;
    seen = true;
  }
  return false;
}

/** Runs the stages in order; each either answers (false) or passes on (true). */
export async function runStages(stages: readonly Stage[], request: ProxyRequest): Promise<boolean> {
  for (const stage of stages) {
    let pass = stage(request);
    if (typeof pass !== 'boolean') pass = await pass;
    if (!pass) return false;
  }
  return true;
}

/** Like runStages, but stays synchronous while every stage is (the common case on the hot path). */
function runStagesFast(stages: readonly Stage[], request: ProxyRequest): boolean | Promise<boolean> {
  for (let i = 0; i < stages.length; i++) {
    const pass = (stages[i] as Stage)(request);
    if (pass === true) continue;
    if (pass === false) return false;
    return pass.then((ok) => (ok ? runStages(stages.slice(i + 1), request) : false));
  }
  return true;
}

export function createProxyHandler(
  deps: ProxyHandlerDeps,
): (req: IncomingMessage, res: ServerResponse) => void {
  const { runtime, stages, forward, recorder, isTrustedProxy } = deps;
  const fail = (res: ServerResponse, error: unknown) => {
    runtime.logger.error({ err: error }, 'request failed inside the proxy');
    sendError(res, 'internal_error');
  };
  return (req, res) => {
    const startedAt = performance.now();
    const resolved = resolveRequest(req, res, runtime, isTrustedProxy, startedAt);
    if (!resolved.ok) {
      recorder.unrouted(req, res, startedAt, resolved.clientIp);
      return;
    }
    const { request } = resolved;
    res.once('close', () => recorder.routed(request));
    try {
      const pass = runStagesFast(stages, request);
      if (pass === true) forward(request);
      else if (pass !== false)
        pass.then(
          (ok) => {
            if (ok) forward(request);
          },
          (error: unknown) => fail(res, error),
        );
    } catch (error) {
      fail(res, error);
    }
  };
}
