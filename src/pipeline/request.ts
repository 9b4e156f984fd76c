import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { RequestTrace } from '../observe/tracing.ts';
import type { Route, RoutingTable, UpstreamServer } from '../routing/types.ts';
import type { CutReason } from '../upstream/client-send-timeout.ts';
import type { Verdict } from './verdict.ts';

/**
 * What a method knows about who is asking beyond the subject (jwt and oidc): set by the
 * authenticator, read by the allow rules (auth/allow-rules) and, for oidc, sent upstream.
 */
export interface Identity {
  /** The subject as issued (`subject` below holds it encoded for the header). */
  readonly subject: string;
  /** null when the provider gave none, or said it is not verified. */
  readonly email: string | null;
  readonly groups: readonly string[];
  readonly claims: Readonly<Record<string, unknown>>;
}

/**
 * The state of one proxied request as it goes through the pipeline
 * (route → to_https → rate limit → auth → pick server → forward). Created by the route stage once
 * the request matched a route; the table reference taken at arrival is the only one this request uses.
 */
export interface ProxyRequest {
  readonly req: IncomingMessage;
  /** For the upstream layer only: stages decide with a Verdict and never write to it. */
  readonly res: ServerResponse;
  readonly table: RoutingTable;
  readonly route: Route;
  /** Normalised host (lower case, no port, no trailing dot, IPv6 without brackets). */
  readonly host: string;
  /** The Host header's (HTTP/2: `:authority`'s) value as received, for Host upstream, X-Forwarded-Host and redirects. */
  readonly rawHost: string;
  /** Normalised path: what is authorised is exactly what the upstream receives. */
  readonly path: string;
  /** The raw query string without its `?`, or '' when absent. */
  readonly query: string;
  /** True when the request arrived over the TLS listener, or from a trusted proxy that says https. */
  readonly secure: boolean;
  /** The TCP peer's address. */
  readonly peerIp: string;
  /** The client IP: the peer, or the last untrusted X-Forwarded-For hop when the peer is trusted. */
  readonly clientIp: string;
  /** The X-Forwarded-For value to send upstream. */
  readonly forwardedFor: string;
  /** The TCP peer is one of trusted_proxies: its forwarding headers (Forwarded, X-Real-IP…) are kept. */
  readonly peerTrusted: boolean;
  /** performance.now() at arrival. */
  readonly startedAt: number;

  /** The path sent upstream: `path`, unless the rewrite stage changed it (docs/policies.md#rewrite). */
  upstreamPath: string;
  /** The body to send upstream in place of `req` (a counted one, docs/policies.md#max_body_bytes); null = `req`. */
  body: Readable | null;

  /** Set by the auth stage on some refusals: why, in more detail than the answer (log only). */
  authDetail?: string;
  /** Set by the auth stage: basic user, key name or token owner; sent as X-Tollgate-Subject. */
  subject: string | null;
  /** Set by jwt and oidc: email, groups and claims, for the allow rules (auth/allow-rules). */
  identity: Identity | null;
  /** Set by the auth stage: the query to forward (without the token parameter), without `?`. */
  forwardQuery: string;
  /**
   * Normalised request header names the forwarder must not send: credentials the proxy consumed, and
   * the names a forward-auth service answers for (so a client can never supply them itself).
   */
  consumedHeaders: string[];
  /** Set by forward auth on 2xx: `[name, value, …]` copied from the auth service's answer, sent upstream. */
  upstreamHeaders: string[] | null;
  /** Set-Cookie values to add to the response (sticky sessions). */
  responseCookies: string[];
  /** Response headers the proxy sets, replacing the upstream's (lower-case names). */
  responseHeaders: Record<string, string> | null;
  /** Servers in the order the forwarder should try them; set by the balance stage. */
  candidates: readonly UpstreamServer[];
  /** The server that answered (or was tried last); for the access log. */
  upstream: UpstreamServer | null;
  /** Response body bytes relayed from the upstream; for the access log. */
  responseBytes: number;
  /**
   * For the access log when the response object cannot say (a WebSocket: true once the closing
   * handshake went both ways); null means "the response was written to its end".
   */
  completed: boolean | null;
  /** Set when Tollgate reset the response itself (upstream/client-send-timeout.ts); for the access log. */
  cutShort: CutReason | null;
  /** The request's spans when tracing is on (docs/observability.md#tracing), else null. */
  trace: RequestTrace | null;
  /** Set by the cache stage: sees the upstream's answer (to store it), and may answer for it. */
  cacheTap: ResponseTap | null;
}

/**
 * What the forwarder tells the response cache (docs/traffic.md#response-cache) about the upstream's
 * answer. The cache may take the answer over (a 304 to its revalidation, a stale copy when the
 * upstream fails): the forwarder then writes nothing to the client itself.
 */
export interface ResponseTap {
  /** The final status and headers; true when the tap has answered the client in their place. */
  head(status: number, headers: Record<string, string | string[] | undefined>): boolean;
  data(chunk: Buffer): void;
  /** The body arrived whole. */
  end(): void;
  /**
   * The exchange failed. `canAnswer`: nothing was written to the client yet, and nothing else will
   * be tried; true when the tap answered the client (stale-if-error), so no error is sent.
   */
  error(canAnswer: boolean): boolean;
}

/**
 * A pipeline stage: decides whether the request goes on (PASS) or is answered here (an error, a
 * redirect). It may record what later steps need on the request (subject, candidates, cookies), but
 * never writes the response. Async only when it must be (a Redis rate limit, a first JWT check).
 */
export type Stage = (request: ProxyRequest) => Verdict | Promise<Verdict>;
