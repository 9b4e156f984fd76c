import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type CachePolicy from 'http-cache-semantics';
import type { CacheConfig } from '../config/policy-types.ts';
import { isGrpcRequest, writeLocalResponse } from '../local-response.ts';
import { cacheCoalescedTotal, cacheHitsTotal, cacheMissesTotal } from '../observe/metrics.ts';
import type { ProxyRequest, ResponseTap, Stage } from '../request/record.ts';
import { requestTarget } from '../request/targets.ts';
import { changeFrom } from '../routing/table-change.ts';
import type { RoutingTable } from '../routing/types.ts';
import { addVary, clientResponseHeaders } from '../upstream/headers.ts';
import { detachedResponse } from './detached.ts';
import {
  type Asker,
  askerOf,
  plainHeaders,
  policyRequest,
  revalidated,
  SHARED,
  staleIfErrorAllows,
  storageFor,
  subjectPartition,
  varyNames,
} from './rules.ts';
import { type CachedResponse, entrySize, ResponseStore } from './store.ts';

/** What the cache makes of a request: go on to the upstream, or this answer from the store. */
export type CacheOutcome =
  | { readonly kind: 'pass' }
  | {
      readonly kind: 'answer';
      readonly status: number;
      readonly headers: Readonly<Record<string, string | string[]>>;
      readonly body: Buffer;
    };

/** `X-Cache` (docs/traffic.md#response-cache): HIT only for a body served without asking the upstream. */
type CacheResult = 'HIT' | 'MISS' | 'STALE';

const PASS_ON: CacheOutcome = Object.freeze({ kind: 'pass' });
const EMPTY = Buffer.alloc(0);
/** RFC 9111 §4.4: a successful unsafe request invalidates the stored responses of its URL. */
const UNSAFE_METHODS = new Set(['POST', 'PUT', 'DELETE', 'PATCH']);
/** The client's validators: the upstream is asked with the cache's own, and the client answered from them. */
const CLIENT_VALIDATORS = ['if-none-match', 'if-modified-since'];
/**
 * How long requests for a URL wait for another request's fetch of it before asking the upstream
 * themselves (nginx's proxy_cache_lock_timeout): a slow upstream must not hold them forever.
 */
const COALESCE_TIMEOUT_MS = 5_000;

export interface ResponseCacheDeps {
  /** main.yaml's `cache.max_bytes`; null = only each path's own budget. */
  globalMaxBytes: number | null;
  /** The forwarder: a background revalidation goes upstream through it like any request. */
  forward: (request: ProxyRequest) => void;
}

/**
 * The response cache (docs/traffic.md#response-cache), one per process. Its stage runs after
 * authentication and the allow rules, so nothing is ever served from it to a request that would be
 * refused; what is stored, and for whom, is rules.ts's business; the store is store.ts's.
 */
export class ResponseCache {
  readonly store: ResponseStore;
  readonly #forward: (request: ProxyRequest) => void;
  /** Fetches under way for a URL and identity: later misses wait for them (request coalescing). */
  readonly #inflight = new Map<string, Promise<void>>();
  /** Entries being revalidated in the background (stale-while-revalidate): one fetch each. */
  readonly #revalidating = new Set<string>();

  constructor(deps: ResponseCacheDeps) {
    this.store = new ResponseStore(deps.globalMaxBytes);
    this.#forward = deps.forward;
  }

  /** Drops the stores of routes that are gone or whose cache settings changed (a reload). */
  retainOnly(table: RoutingTable): void {
    const change = this.#retained === null ? null : changeFrom(table, this.#retained);
    this.#retained = table;
    const cached = this.#cached;
    // Made from the table retained last: only the routes that left or arrived change the cached
    // routes (route ids are unique in a compiled table, and the ids that left go first).
    if (change === null) cached.clear();
    for (const route of change?.gone ?? []) cached.delete(route.id);
    for (const route of change?.arrived ?? table.routes) {
      const config = route.policy?.cache;
      if (config != null) cached.set(route.id, { hostKey: route.hostKey, config });
    }
    // Swept whole (few stores): a request on an older table may have stored for a gone route since.
    this.store.retainOnly(cached);
  }

  /** The table retainOnly kept last, and its routes with a cache: route id → host key and settings. */
  #retained: RoutingTable | null = null;
  readonly #cached = new Map<string, { hostKey: string; config: Readonly<CacheConfig> }>();

  /** `DELETE /cache?host=&prefix=` on the admin port: how many entries went. */
  purge(hostKey: string, prefix: string): number {
    return this.store.purge(hostKey, prefix);
  }

  /**
   * The cache's part in a request on a cached route. `pick` is the pipeline's server choice, run
   * for a background revalidation (the request itself stops here when answered from the store).
   */
  handle(
    request: ProxyRequest,
    config: Readonly<CacheConfig>,
    pick: Stage,
    coalesce = true,
  ): CacheOutcome | Promise<CacheOutcome> {
    const { req, route } = request;
    const method = req.method ?? 'GET';
    const url = requestTarget(request);
    const urlKey = `${request.host}\u0000${url}`;
    if (method !== 'GET' && method !== 'HEAD') {
      if (UNSAFE_METHODS.has(method)) request.cacheTap = new Invalidation(this.store, route.id, urlKey);
      return PASS_ON;
    }
    // Not for the cache: a WebSocket upgrade, a range (partial answers are not stored), gRPC.
    if (req.headers.upgrade !== undefined || req.headers.range !== undefined || isGrpcRequest(req))
      return PASS_ON;
    const asker = askerOf(request);
    const own = subjectPartition(asker);
    const libraryRequest = policyRequest(request, url);
    const found = this.#find(route.id, urlKey, own, libraryRequest);
    // A HEAD is answered from a GET's copy but never stored; a URL that carried the token never is
    // (its answer is private, no-store: docs/tokens.md#links-in-a-browser).
    const storing = method === 'GET' && request.forwardQuery === request.query;
    const context: FillContext = {
      cache: this,
      request,
      config,
      asker,
      libraryRequest,
      urlKey,
      previous: found,
      storing,
      answersClient: true,
      settled: null,
    };

    const evaluation = found?.policy.evaluateRequest(libraryRequest);
    if (found !== null && evaluation?.revalidation === undefined)
      return this.#serve(request, found, 'HIT', evaluation?.response?.headers);
    // Only a request whose answer may be stored refreshes a copy (not a HEAD, not a token URL).
    if (found !== null && evaluation?.revalidation !== undefined && storing) {
      const validators = plainHeaders(
        found.policy.revalidationHeaders(withoutClientValidators(libraryRequest)),
      );
      if (!evaluation.revalidation.synchronous) {
        this.#revalidateInBackground(context, found, validators, pick);
        return this.#serve(request, found, 'STALE', evaluation.response?.headers);
      }
      // Stale, or the client asked for a fresh answer: the upstream is asked, with our validators.
      cacheMissesTotal.inc({ route: route.id });
      markResult(request, 'MISS');
      askWithValidators(request, validators);
      request.cacheTap = new Fill(context);
      return PASS_ON;
    }

    const lock = `${route.id}\u0000${urlKey}\u0000${own ?? SHARED}`;
    const running = storing && coalesce ? this.#inflight.get(lock) : undefined;
    if (running !== undefined) {
      cacheCoalescedTotal.inc({ route: route.id });
      return running.then(() => this.handle(request, config, pick, false));
    }
    cacheMissesTotal.inc({ route: route.id });
    markResult(request, 'MISS');
    if (!storing) return PASS_ON;
    // The upstream answers in full (never a 304 to the client's own validators), so the copy can be stored.
    request.consumedHeaders.push(...CLIENT_VALIDATORS);
    if (coalesce) this.#lock(lock, context);
    request.cacheTap = new Fill(context);
    return PASS_ON;
  }

  /** Makes later misses of `lock` wait until this fetch is settled (or its client left, or a timeout). */
  #lock(lock: string, context: FillContext): void {
    let release!: () => void;
    const done = new Promise<void>((resolve) => {
      release = resolve;
    });
    const timer = setTimeout(() => settle(), COALESCE_TIMEOUT_MS);
    timer.unref();
    const settle = () => {
      if (this.#inflight.get(lock) !== done) return;
      clearTimeout(timer);
      this.#inflight.delete(lock);
      context.request.res.off('close', settle);
      release();
    };
    this.#inflight.set(lock, done);
    context.settled = settle;
    // Whatever happens to the fetch (a refusal after this stage, a client that left), waiters go on.
    context.request.res.on('close', settle);
  }

  /** The entry for this request: the asker's own first, then the shared one, whose Vary values match. */
  #find(
    routeId: string,
    urlKey: string,
    own: string | null,
    request: CachePolicy.Request,
  ): CachedResponse | null {
    const entries = this.store.entriesFor(routeId, urlKey);
    if (entries.length === 0) return null;
    let shared: CachedResponse | null = null;
    for (const entry of entries) {
      if (entry.partition !== own && entry.partition !== SHARED) continue;
      if (varyKeyOf(entry.vary, request.headers) !== entry.varyKey) continue;
      // Past every use (stale-while-revalidate, stale-if-error) with nothing to revalidate it by.
      if (entry.policy.timeToLive() <= 0 && !hasValidator(entry)) {
        this.store.delete(routeId, entry.key);
        continue;
      }
      if (entry.partition === own) return entry;
      shared = entry;
    }
    return shared;
  }

  #serve(
    request: ProxyRequest,
    entry: CachedResponse,
    result: CacheResult,
    headers?: CachePolicy.Headers,
  ): CacheOutcome {
    this.store.touch(request.route.id, entry);
    cacheHitsTotal.inc({ route: request.route.id, result: result === 'HIT' ? 'hit' : 'stale' });
    return answerFromEntry(request, entry, result, headers);
  }

  /** stale-while-revalidate: the stale copy is served now, and refreshed by one detached fetch. */
  #revalidateInBackground(
    context: FillContext,
    entry: CachedResponse,
    validators: Record<string, string>,
    pick: Stage,
  ): void {
    const lock = `${context.request.route.id}\u0000${entry.key}`;
    if (this.#revalidating.has(lock)) return;
    const { request } = context;
    const copy: ProxyRequest = {
      ...request,
      res: detachedResponse(),
      consumedHeaders: [...request.consumedHeaders],
      upstreamHeaders: request.upstreamHeaders === null ? null : [...request.upstreamHeaders],
      responseCookies: [],
      responseHeaders: null,
      candidates: request.route.servers,
      upstream: null,
      responseBytes: 0,
      completed: null,
      cutShort: null,
      trace: null,
      cacheTap: null,
    };
    askWithValidators(copy, validators);
    this.#revalidating.add(lock);
    const settled = () => this.#revalidating.delete(lock);
    copy.cacheTap = new Fill({ ...context, request: copy, storing: true, answersClient: false, settled });
    const go = (verdict: Awaited<ReturnType<Stage>>) => {
      if (verdict.kind !== 'pass') return settled();
      try {
        this.#forward(copy);
      } catch {
        settled();
      }
    };
    const verdict = pick(copy);
    if (verdict instanceof Promise) verdict.then(go, settled);
    else go(verdict);
  }
}

/** What a Fill stores once the body arrived whole. */
interface Storing {
  partition: string;
  policy: CachePolicy;
  status: number;
  headers: Record<string, string>;
}

interface FillContext {
  readonly cache: ResponseCache;
  readonly request: ProxyRequest;
  readonly config: Readonly<CacheConfig>;
  readonly asker: Asker;
  readonly libraryRequest: CachePolicy.Request;
  readonly urlKey: string;
  /** The stored copy this fetch revalidates, or null for a plain miss. */
  readonly previous: CachedResponse | null;
  /** Whether the answer may be stored at all (see handle). */
  readonly storing: boolean;
  /** False for a background revalidation: nobody waits for the answer, the forwarder writes nothing. */
  readonly answersClient: boolean;
  /** Called once the fetch is known to store nothing more (coalesced waiters go on). */
  settled: (() => void) | null;
}

/**
 * What the forwarder shows the cache: the upstream's answer is relayed to the client as usual and,
 * when the rules allow, copied into the store as it passes (at most max_object_bytes, and only once
 * it arrived whole). A 304 to the cache's revalidation, or a failure while a stale copy may still be
 * used (stale-if-error), is answered from the store instead.
 */
class Fill implements ResponseTap {
  readonly #context: FillContext;
  #storage: Storing | null = null;
  #chunks: Buffer[] = [];
  #bytes = 0;

  constructor(context: FillContext) {
    this.#context = context;
  }

  head(status: number, raw: Record<string, string | string[] | undefined>): boolean {
    const context = this.#context;
    const { previous, request, cache } = context;
    const headers = plainHeaders(raw);
    const routeId = request.route.id;
    if (previous !== null && status === 304) {
      this.#settle();
      const refreshed = revalidated(previous.policy, context.libraryRequest, headers);
      let entry = previous;
      if (refreshed.matches) {
        entry = {
          ...previous,
          policy: refreshed.policy,
          cacheControl: headers['cache-control'] ?? previous.cacheControl,
        };
        cache.store.put(request.route, context.config, entry);
      } else cache.store.delete(routeId, previous.key);
      if (context.answersClient) writeAnswer(request.res, answerFromEntry(request, entry, 'MISS'));
      return true;
    }
    if (previous !== null && status >= 500 && staleIfErrorAllows(previous.policy, previous.cacheControl)) {
      this.#settle();
      if (context.answersClient) this.#answerStale(previous);
      return true;
    }
    // A full answer replaces the stored copy, stored or not.
    if (previous !== null && status < 500) cache.store.delete(routeId, previous.key);
    if (context.storing) {
      const storage = storageFor(context.asker, context.libraryRequest, status, headers, context.config);
      if (storage.store) this.#storage = { ...storage, status, headers };
    }
    if (this.#storage === null) this.#settle();
    return !context.answersClient;
  }

  data(chunk: Buffer): void {
    if (this.#storage === null) return;
    this.#bytes += chunk.length;
    if (this.#bytes > this.#context.config.maxObjectBytes) {
      // Served in full all the same; only the copy is given up.
      this.#storage = null;
      this.#chunks = [];
      this.#settle();
      return;
    }
    this.#chunks.push(chunk);
  }

  end(): void {
    const storage = this.#storage;
    this.#storage = null;
    if (storage !== null) this.#store(storage);
    this.#chunks = [];
    this.#settle();
  }

  error(canAnswer: boolean): boolean {
    // An answer cut short is never stored.
    this.#storage = null;
    this.#chunks = [];
    this.#settle();
    const { previous, answersClient } = this.#context;
    if (!answersClient) return true;
    if (!canAnswer || previous === null || !staleIfErrorAllows(previous.policy, previous.cacheControl))
      return false;
    this.#answerStale(previous);
    return true;
  }

  #answerStale(entry: CachedResponse): void {
    const { request } = this.#context;
    cacheHitsTotal.inc({ route: request.route.id, result: 'stale' });
    writeAnswer(request.res, answerFromEntry(request, entry, 'STALE'));
  }

  #store(storage: Storing): void {
    const { request, urlKey, config, cache } = this.#context;
    const body = ownCopy(this.#chunks, this.#bytes);
    const declared = storage.headers['content-length'];
    // A body shorter than announced is one the upstream cut (undici reports most, not every case).
    if (declared !== undefined && Number(declared) !== body.length) return;
    const vary = varyNames(storage.headers.vary);
    const varyKey = varyKeyOf(vary, this.#context.libraryRequest.headers);
    const key = `${urlKey}\u0000${storage.partition}\u0000${varyKey}`;
    cache.store.put(request.route, config, {
      key,
      urlKey,
      path: request.path,
      partition: storage.partition,
      vary,
      varyKey,
      policy: storage.policy,
      cacheControl: storage.headers['cache-control'],
      status: storage.status,
      body,
      // The policy keeps the request's headers too when the response varies (to match them later).
      size: entrySize(
        key,
        vary.length > 0 ? [storage.headers, this.#context.libraryRequest.headers] : [storage.headers],
        body,
      ),
    });
  }

  #settle(): void {
    const settled = this.#context.settled;
    this.#context.settled = null;
    settled?.();
  }
}

/**
 * The body in memory of its own: a chunk from the socket (or Buffer.concat's pooled result) is a
 * view of a larger buffer, which a stored copy would keep alive whole, past what the budget counts.
 */
function ownCopy(chunks: readonly Buffer[], bytes: number): Buffer {
  const body = Buffer.allocUnsafeSlow(bytes);
  let at = 0;
  for (const chunk of chunks) at += chunk.copy(body, at);
  return body;
}

/** An unsafe request's tap: when it succeeds, the stored responses of its URL go. */
class Invalidation implements ResponseTap {
  readonly store: ResponseStore;
  readonly routeId: string;
  readonly urlKey: string;

  constructor(store: ResponseStore, routeId: string, urlKey: string) {
    this.store = store;
    this.routeId = routeId;
    this.urlKey = urlKey;
  }

  head(status: number): boolean {
    if (status >= 200 && status < 400) this.store.invalidate(this.routeId, this.urlKey);
    return false;
  }
  data(): void {}
  end(): void {}
  error(): boolean {
    return false;
  }
}

/** The request header values a response's Vary names, as one string (part of the entry's key). */
function varyKeyOf(names: readonly string[], headers: CachePolicy.Headers): string {
  if (names.length === 0) return '';
  return names.map((name) => `${name}:${headers[name] ?? ''}`).join('\n');
}

function hasValidator(entry: CachedResponse): boolean {
  const headers = entry.policy.responseHeaders();
  return headers.etag !== undefined || headers['last-modified'] !== undefined;
}

function withoutClientValidators(request: CachePolicy.Request): CachePolicy.Request {
  const headers = { ...request.headers };
  for (const name of CLIENT_VALIDATORS) delete headers[name];
  return { ...request, headers };
}

/** The upstream is asked with the cache's validators, never the client's (see Fill.head's 304). */
function askWithValidators(request: ProxyRequest, validators: Record<string, string>): void {
  request.consumedHeaders.push(...CLIENT_VALIDATORS);
  const extra: string[] = [];
  for (const name of CLIENT_VALIDATORS) {
    const value = validators[name];
    if (value !== undefined) extra.push(name, value);
  }
  if (extra.length > 0)
    request.upstreamHeaders =
      request.upstreamHeaders === null ? extra : [...request.upstreamHeaders, ...extra];
}

function markResult(request: ProxyRequest, result: CacheResult): void {
  request.responseHeaders = { ...request.responseHeaders, 'x-cache': result };
}

/**
 * A stored response as this request gets it: the library's headers (Age, Date; hop-by-hop gone)
 * with the upstream's own Cache-Control, then what the forwarder would add (the route's response
 * header rules, CORS, the token-URL marks of docs/tokens.md) and X-Cache. A 304 when the client's
 * own validators match.
 */
function answerFromEntry(
  request: ProxyRequest,
  entry: CachedResponse,
  result: CacheResult,
  /** The policy's headers when the caller has them already (evaluateRequest made them). */
  fromPolicy: CachePolicy.Headers = entry.policy.responseHeaders(),
): CacheOutcome {
  const base = fromPolicy as Record<string, string>;
  if (entry.cacheControl === undefined) delete base['cache-control'];
  else base['cache-control'] = entry.cacheControl;
  delete base['content-length'];
  delete base['transfer-encoding'];
  const headers = clientResponseHeaders(
    base,
    request.responseCookies,
    { ...request.responseHeaders, 'x-cache': result },
    request.route.responseHeaders,
  );
  if (request.route.policy?.cors != null) addVary(headers, 'Origin');
  const notModified = entry.status === 200 && clientHasIt(request.req.headers, headers);
  return {
    kind: 'answer',
    status: notModified ? 304 : entry.status,
    headers: headers as Record<string, string | string[]>,
    body: notModified ? EMPTY : entry.body,
  };
}

/** RFC 9110 §13.1.2 and §13.1.3: If-None-Match (weak comparison) wins over If-Modified-Since. */
function clientHasIt(request: IncomingHttpHeaders, response: IncomingHttpHeaders): boolean {
  const noneMatch = request['if-none-match'];
  const etag = response.etag;
  if (noneMatch !== undefined) {
    if (typeof etag !== 'string') return false;
    const weak = (tag: string) => tag.trim().replace(/^W\//, '');
    return noneMatch.trim() === '*' || noneMatch.split(',').some((tag) => weak(tag) === weak(etag));
  }
  const since = request['if-modified-since'];
  const modified = response['last-modified'];
  if (since === undefined || typeof modified !== 'string') return false;
  const sinceTime = Date.parse(since);
  const modifiedTime = Date.parse(modified);
  return Number.isFinite(sinceTime) && Number.isFinite(modifiedTime) && modifiedTime <= sinceTime;
}

function writeAnswer(res: ServerResponse, outcome: CacheOutcome): void {
  if (outcome.kind !== 'answer' || res.headersSent || res.destroyed) return;
  writeLocalResponse(res, outcome.status, outcome.headers, outcome.body, true);
}
