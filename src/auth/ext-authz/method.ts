import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { FifoGate } from '../../concurrency/fifo-gate.ts';
import type { ExtAuthzSettings } from '../../config/types.ts';
import { HOP_BY_HOP, normaliseHeaderName, unconfigurableHeaderReason } from '../../header-names.ts';
import { hasBody } from '../../local-response.ts';
import type { Logger } from '../../log.ts';
import type { ProxyRequest } from '../../request/record.ts';
import type { AuthDenial, Authenticator, AuthOutcome } from '../authenticator.ts';
import { MAX_RELAYED_BODY_BYTES } from '../forward.ts';
import { checkRequest } from './attributes.ts';
import {
  type AuthorizationClient,
  authorizationClientClass,
  type CheckResponse,
  type HeaderValueOption,
} from './protocol.ts';

/**
 * `type: ext_authz` (docs/authentication.md#external-authorization): before a request goes upstream,
 * Envoy's `Authorization/Check` is asked over gRPC (OPA-Envoy, Authorino…), and its answer decides,
 * failing closed:
 *
 * - status OK: pass; the OK response's headers are set on (or appended to) the upstream request,
 *   `headers_to_remove` removed from it, `response_headers_to_add` added to the client's response;
 * - any other status: refused with the denied response's HTTP status (403 without one), headers and
 *   body (at most 64 KiB);
 * - no answer within `timeout_ms`, an error, or an answer without a status: 503 `auth_unavailable`
 *   (or, with `fail_open`, the request passes untouched).
 *
 * One gRPC client (one channel) per service, shared by every policy naming it and kept across
 * reloads; each service has a bounded number of checks in flight, and a bounded queue behind them.
 */

/** Checks in flight to one service; more wait in the queue (within their timeout). */
const MAX_IN_FLIGHT = 128;
const MAX_WAITING = 1024;
/** RFC 9110 field-name and field-value: what node:http will write; anything else is dropped. */
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** Headers of a denied response that are this hop's business, never relayed. */
const NOT_RELAYED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade']);

export interface ExtAuthzMethod {
  create(settings: ExtAuthzSettings): Authenticator;
  close(): void;
}

interface Service {
  /** For logs: the address, never anything the service answered. */
  readonly address: string;
  readonly client: AuthorizationClient | null;
  /** Why no client could be made (an unreadable CA file): its routes fail closed. */
  readonly broken: string | null;
  /** Its checks in flight and the queue behind them. */
  readonly gate: FifoGate;
  /** The last check got no usable answer: logged once per outage, not once per request. */
  failing: boolean;
}

export function createExtAuthzMethod(deps: { logger: Logger }): ExtAuthzMethod {
  const services = new Map<string, Service>();

  const serviceFor = (settings: ExtAuthzSettings): Service => {
    const tls = settings.tls;
    const key = `${settings.address}|${tls === null ? 'plaintext' : `${tls.caFile ?? ''}|${tls.serverName ?? ''}`}`;
    let service = services.get(key);
    if (service === undefined) {
      let client: AuthorizationClient | null = null;
      let broken: string | null = null;
      try {
        const Client = authorizationClientClass();
        const credentials =
          tls === null
            ? grpc.credentials.createInsecure()
            : grpc.credentials.createSsl(tls.caFile === null ? null : readFileSync(tls.caFile));
        client = new Client(settings.address, credentials, {
          ...(tls?.serverName ? { 'grpc.ssl_target_name_override': tls.serverName } : {}),
          'grpc.keepalive_time_ms': 30_000,
        });
        // Connect now, while the routes are being built: the first check must not pay the handshake
        // out of its timeout (300 ms by default).
        client.getChannel().getConnectivityState(true);
      } catch (error) {
        broken = (error as Error).message;
      }
      service = {
        address: settings.address,
        client,
        broken,
        gate: new FifoGate(MAX_IN_FLIGHT, MAX_WAITING),
        failing: false,
      };
      services.set(key, service);
    }
    return service;
  };

  return {
    create: (settings) => createAuthenticator(settings, serviceFor(settings), deps.logger),
    close() {
      for (const service of services.values()) service.client?.close();
      services.clear();
    },
  };
}

type Failure = 'timeout' | 'unavailable' | 'error' | 'no_status' | 'overloaded' | 'misconfigured';

function createAuthenticator(settings: ExtAuthzSettings, service: Service, logger: Logger): Authenticator {
  const unusable = (request: ProxyRequest, failure: Failure, detail: string): AuthOutcome => {
    if (!service.failing) {
      service.failing = true;
      logger.warn(
        {
          event: 'ext_authz_unavailable',
          route: request.route.id,
          auth_service: service.address,
          failure,
          detail,
          fail_open: settings.failOpen,
        },
        settings.failOpen
          ? 'the authorization service gave no usable answer: fail_open lets its routes through until it does'
          : 'the authorization service gave no usable answer: its routes answer 503 until it does',
      );
    }
    request.authDetail = `ext_authz ${failure}`;
    return settings.failOpen ? null : 'auth_unavailable';
  };

  return async (request) => {
    if (service.client === null) return unusable(request, 'misconfigured', service.broken ?? '');
    const deadline = Date.now() + settings.timeoutMs;
    let body: Buffer | null = null;
    // A client waiting for `100 Continue` sends nothing before it: its check goes without the body.
    if (settings.includeBodyBytes > 0 && hasBody(request.req) && request.req.headers.expect === undefined) {
      const read = await readPrefix(request, settings.includeBodyBytes);
      if (read === null) return 'auth_unavailable';
      body = read;
    }
    if (!(await admitted(service.gate, deadline)))
      return unusable(request, 'overloaded', 'too many checks waiting');
    let response: CheckResponse;
    try {
      response = await call(service.client, checkRequest(request, body), deadline);
    } catch (error) {
      const code = (error as grpc.ServiceError).code;
      return unusable(
        request,
        code === grpc.status.DEADLINE_EXCEEDED
          ? 'timeout'
          : code === grpc.status.UNAVAILABLE
            ? 'unavailable'
            : 'error',
        (error as Error).message,
      );
    } finally {
      service.gate.leave();
    }
    if (response.status == null && response.http_response !== 'ok_response')
      return unusable(request, 'no_status', 'the answer has neither a status nor an OK response');
    if (service.failing) {
      service.failing = false;
      logger.info(
        { event: 'ext_authz_available', route: request.route.id, auth_service: service.address },
        'the authorization service answers again',
      );
    }
    const code = response.status?.code ?? 0;
    if (code !== 0) {
      request.authDetail = `ext_authz denied (gRPC status ${code})`;
      return denial(response.denied_response ?? null);
    }
    applyOk(request, response.ok_response ?? null);
    return null;
  };
}

function call(client: AuthorizationClient, message: unknown, deadline: number): Promise<CheckResponse> {
  return new Promise((resolve, reject) => {
    client.Check(message, new grpc.Metadata(), { deadline }, (error, response) => {
      if (error !== null) reject(error);
      else resolve(response ?? {});
    });
  });
}

/** Waits for a free slot until `deadline`; false when the queue is full or the wait too long. */
function admitted(gate: FifoGate, deadline: number): Promise<boolean> | boolean {
  if (gate.tryEnter()) return true;
  return new Promise((resolve) => gate.wait(resolve, Math.max(0, deadline - Date.now())));
}

/**
 * Reads up to `limit` bytes of the body for the check, and hands the pipeline a body that gives
 * them back first, then the rest as it arrives (docs/policies.md: request.body replaces req).
 * null when the client went away meanwhile.
 */
async function readPrefix(request: ProxyRequest, limit: number): Promise<Buffer | null> {
  const source = request.body ?? (request.req as IncomingMessage & AsyncIterable<Buffer>);
  const iterator = (source as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  const chunks: Buffer[] = [];
  let size = 0;
  let ended = false;
  try {
    while (size < limit) {
      const next = await iterator.next();
      if (next.done) {
        ended = true;
        break;
      }
      chunks.push(next.value);
      size += next.value.length;
    }
  } catch {
    return null;
  }
  const read = chunks.slice();
  request.body = Readable.from(
    (async function* () {
      yield* read;
      if (ended) return;
      for (;;) {
        const next = await iterator.next();
        if (next.done) return;
        yield next.value;
      }
    })(),
    { objectMode: false },
  );
  return Buffer.concat(chunks).subarray(0, limit);
}

/** The denied response relayed: its status (403 without one), headers and body. */
function denial(denied: CheckResponse['denied_response'] | null): AuthDenial {
  const wanted = denied?.status?.code ?? 0;
  const status = wanted >= 200 && wanted <= 599 ? wanted : 403;
  const headers: Record<string, string | string[]> = {};
  for (const option of denied?.headers ?? []) {
    const name = option.header?.key?.toLowerCase();
    const value = option.header?.value ?? '';
    if (!name || !FIELD_NAME.test(name) || !FIELD_VALUE.test(value)) continue;
    if (NOT_RELAYED.has(name) || HOP_BY_HOP.has(name)) continue;
    const previous = headers[name];
    // Several values of one name are all sent (Set-Cookie); `append: false` replaces.
    if (previous !== undefined && option.append?.value !== false)
      headers[name] = [...(Array.isArray(previous) ? previous : [previous]), value];
    else headers[name] = value;
  }
  const text = denied?.body ?? '';
  const body = Buffer.byteLength(text) <= MAX_RELAYED_BODY_BYTES ? Buffer.from(text) : Buffer.alloc(0);
  return { denial: { status, headers, body }, reason: 'forbidden' };
}

type Mutation = 'set' | 'append' | 'add_if_absent' | 'overwrite_if_exists';

/**
 * How an OK response's header applies: `append` when it says so, else by `append_action`; unset, a
 * header replaces the client's (Envoy: "append defaults to false" in ext_authz answers).
 */
function mutationOf(option: HeaderValueOption): Mutation {
  if (option.append != null) return option.append.value === true ? 'append' : 'set';
  switch (option.append_action ?? 0) {
    case 1:
      return 'add_if_absent';
    case 3:
      return 'overwrite_if_exists';
    default:
      return 'set';
  }
}

/**
 * The OK response's header changes, on the request sent upstream and the response to the client.
 * Names Tollgate writes or guards itself (X-Tollgate-*, X-Forwarded-*, Host, hop-by-hop) are left
 * alone, as header rules leave them (header-names.ts).
 */
function applyOk(request: ProxyRequest, ok: CheckResponse['ok_response'] | null): void {
  if (ok == null) return;
  const set = new Map<string, [string, string]>();
  const appended: string[] = [];
  const removed = new Set<string>();
  for (const name of ok.headers_to_remove ?? []) {
    if (typeof name === 'string' && unconfigurableHeaderReason(name) === null)
      removed.add(normaliseHeaderName(name));
  }
  for (const option of ok.headers ?? []) {
    const name = option.header?.key;
    const value = option.header?.value ?? '';
    if (!name || unconfigurableHeaderReason(name) !== null || !FIELD_VALUE.test(value)) continue;
    const normalised = normaliseHeaderName(name);
    const present = request.req.headers[name.toLowerCase()] !== undefined && !removed.has(normalised);
    switch (mutationOf(option)) {
      case 'append':
        appended.push(name, value);
        break;
      case 'add_if_absent':
        if (!present && !set.has(normalised)) appended.push(name, value);
        break;
      case 'overwrite_if_exists':
        if (present) set.set(normalised, [name, value]);
        break;
      default:
        set.set(normalised, [name, value]);
    }
  }
  request.consumedHeaders.push(...removed, ...set.keys());
  const upstream = [...[...set.values()].flat(), ...appended];
  if (upstream.length > 0) request.upstreamHeaders = [...(request.upstreamHeaders ?? []), ...upstream];
  for (const option of ok.response_headers_to_add ?? []) {
    const name = option.header?.key?.toLowerCase();
    const value = option.header?.value ?? '';
    if (!name || unconfigurableHeaderReason(name) !== null || !FIELD_VALUE.test(value)) continue;
    request.responseHeaders = { ...(request.responseHeaders ?? {}), [name]: value };
  }
}
