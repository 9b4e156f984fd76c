import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Route, RoutingTable, UpstreamServer } from '../routing/types.ts';
import type { Answer, Verdict } from './verdict.ts';

/**
 * The request record: one object per proxied request, made by the route stage and read by the
 * stages, auth, the cache, the upstream layer, the WebSocket path and the request recorder. It is a
 * leaf (docs/architecture.md): it imports only node types, routing's types and the verdict shapes,
 * so every layer may name it without an import circle.
 *
 * Its fields are grouped by who writes them. They stay on one flat object (no nested record per
 * writer: the hot path allocates nothing more per request); the groups and the views below
 * (`StageRequest`, `ForwardingRequest`) are what make each writer's share visible to the compiler.
 */

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
 * Fixed when the route stage matched the request (pipeline/1-route.ts); nobody writes these after.
 * The table reference taken at arrival is the only one this request uses.
 */
export interface RoutedRequest {
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
}

/** Who is asking: written by the auth stage and its methods (auth/) only. */
export interface AuthOutcome {
  /** Set on some refusals: why, in more detail than the answer (log only). */
  authDetail?: string;
  /** Basic user, key name or token owner; sent as X-Tollgate-Subject. */
  subject: string | null;
  /** Set by jwt and oidc: email, groups and claims, for the allow rules (auth/allow-rules). */
  identity: Identity | null;
}

/**
 * What is sent upstream and added to the answer: written by the stages before forwarding (CORS,
 * auth and its methods, body limit, rewrite, cache, server choice), read by the upstream layer.
 */
export interface ForwardPlan {
  /** The path sent upstream: `path`, unless the rewrite stage changed it (docs/policies.md#rewrite). */
  upstreamPath: string;
  /** The body to send upstream in place of `req` (a counted one, docs/policies.md#max_body_bytes); null = `req`. */
  body: Readable | null;
  /** Set by the auth stage: the query to forward (without the token parameter), without `?`. */
  forwardQuery: string;
  /**
   * Normalised request header names the forwarder must not send: credentials the proxy consumed, and
   * the names a forward-auth service answers for (so a client can never supply them itself).
   */
  consumedHeaders: string[];
  /** Set by forward auth on 2xx: `[name, value, …]` copied from the auth service's answer, sent upstream. */
  upstreamHeaders: string[] | null;
  /** Set-Cookie values to add to the response (sticky sessions, an oidc session). */
  responseCookies: string[];
  /** Response headers the proxy sets, replacing the upstream's (lower-case names). */
  responseHeaders: Record<string, string> | null;
  /** Servers in the order the forwarder should try them; set by server choice (upstream/server-choice.ts). */
  candidates: readonly UpstreamServer[];
  /** Set by the cache stage: sees the upstream's answer (to store it), and may answer for it. */
  cacheTap: ResponseTap | null;
}

/**
 * What happened, for the access log: written by the upstream layer (upstream/forward.ts,
 * client-send-timeout.ts) and the WebSocket path (proxy/websocket.ts), read by observe/requests.ts.
 */
export interface RequestOutcome {
  /** The server that answered (or was tried last). */
  upstream: UpstreamServer | null;
  /** Response body bytes relayed from the upstream. */
  responseBytes: number;
  /**
   * When the response object cannot say (a WebSocket: true once the closing handshake went both
   * ways); null means "the response was written to its end".
   */
  completed: boolean | null;
  /** Set when Tollgate reset the response itself (upstream/client-send-timeout.ts). */
  cutShort: CutReason | null;
}

/** The request's spans: set once by the pipeline right after routing, when tracing is on. */
export interface TracedRequest {
  /** The request's spans when tracing is on (docs/observability.md#tracing), else null. */
  trace: RequestTrace | null;
}

/** The whole record, as the route stage makes it and the entry points (proxy/) hold it. */
export interface ProxyRequest
  extends RoutedRequest,
    AuthOutcome,
    ForwardPlan,
    RequestOutcome,
    TracedRequest {}

/** The record as a pipeline stage sees it: it may plan the forward, never write the outcome. */
export type StageRequest = RoutedRequest &
  AuthOutcome &
  ForwardPlan &
  Readonly<RequestOutcome> &
  Readonly<TracedRequest>;

/** The record as the upstream layer sees it: the plan is read only, the outcome is its to write. */
export type ForwardingRequest = RoutedRequest &
  Readonly<AuthOutcome> &
  Readonly<ForwardPlan> &
  RequestOutcome &
  Readonly<TracedRequest>;

/** Why Tollgate cut a response short: the access log's `reason` (docs/errors.md "Responses cut short"). */
export type CutReason = 'client_send_timeout';

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
export type Stage = (request: StageRequest) => Verdict | Promise<Verdict>;

/** A request refused before routing, with what the access log may say about it. */
export interface Unrouted {
  ok: false;
  verdict: Answer;
  clientIp: string;
  /** The TCP peer is one of trusted_proxies (only then is its `traceparent` sampled flag followed). */
  peerTrusted: boolean;
  /** The normalised path, or null when the target could not be normalised (it is never logged raw). */
  path: string | null;
  /** The raw query without `?` ('' when none), to be logged only with credentials removed. */
  query: string;
}

/** The route stage's result: the record for the matching route, or the refusal to answer. */
export type Routed = { ok: true; request: ProxyRequest } | Unrouted;

/**
 * The spans of one routed request (docs/observability.md#tracing), as the request path sees them:
 * created right after routing (observe/tracing.ts loads the SDK that makes them), ended by the
 * request recorder.
 */
export interface RequestTrace {
  /** The trace id, for the access log, when this request is sampled (exported); else null. */
  readonly traceId: string | null;
  /** The auth stage's verdict on this request (the stage's answer, or PASS). */
  authOutcome(request: StageRequest, verdict: Verdict): void;
  /**
   * A CLIENT span for one attempt to `server`; its `traceparent` (and `tracestate`) replace any in
   * `headers`, the flat `[name, value, …]` list sent upstream.
   */
  upstreamAttempt(request: ForwardingRequest, server: UpstreamServer, headers: string[]): ClientSpan;
  /** A CLIENT span for a forward-auth check; its `traceparent` is set in `headers`. */
  authCall(origin: string, method: string, headers: Record<string, string>): ClientSpan;
  /** Ends the SERVER span with the status the client got. */
  end(status: number): void;
}

/** One outgoing call's span. */
export interface ClientSpan {
  /** The answer's status, once it arrived. */
  responded(status: number): void;
  /** Adds what the caller knows of the call's meaning (`tollgate.auth.result`). */
  attribute(name: string, value: string): void;
  /**
   * Ends the span. `errorType` says why the call failed (a failure class, `timeout`…); without it a
   * 4xx or 5xx answer is the error, and `null` says the answer, whatever it was, is no failure.
   */
  end(errorType?: string | null): void;
}
