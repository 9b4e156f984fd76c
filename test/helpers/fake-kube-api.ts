/**
 * A small Kubernetes API server for tests, speaking the real list/watch protocol for the resources
 * Tollgate reads: discovery.k8s.io/v1 EndpointSlices, v1 ConfigMaps, Services and Secrets,
 * networking.k8s.io/v1 Ingresses (with their status subresource) and IngressClasses, v1 Namespaces,
 * the Gateway API kinds (GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant) and Tollgate's
 * TollgatePolicy, with their status subresources and `metadata.generation` (bumped when anything but
 * metadata and status changes); it also takes the v1 Events Tollgate records. A status PUT carrying a
 * stale `metadata.resourceVersion` is refused with 409 Conflict, as the API server does.
 *
 * What is faithful to the API server (so the client library runs its real code path):
 * - namespaced list endpoints answering `…List` objects with `metadata.resourceVersion`, items
 *   without apiVersion/kind, label selectors (equality and existence) and field selectors
 *   (`metadata.name`, `metadata.namespace`) honoured;
 * - `?watch=true&resourceVersion=N`: a chunked `application/json` stream, one event per line,
 *   replaying what happened after N and then following live; `resourceVersion` unset or "0" starts
 *   with synthetic ADDED events; `allowWatchBookmarks` and `timeoutSeconds` honoured;
 * - a resourceVersion older than the compaction point gets an `ERROR` event carrying a 410 `Status`
 *   (reason `Expired`) and the stream ends, as etcd compaction makes the real server do;
 * - errors as `Status` objects (401 without the right bearer token, 403/500 on demand);
 * - TLS with a CA the kubeconfig carries, bearer-token auth.
 *
 * Faults on demand: drop every open watch, expire them with 410, compact history, answer 403/500,
 * hold watches silent, stop and restart the listener on the same port.
 */
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { join } from 'node:path';
import { EndpointSlice } from 'kubernetes-models/discovery.k8s.io/v1';
import { Ingress, IngressClass } from 'kubernetes-models/networking.k8s.io/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { stringify } from 'yaml';
import { hasOpenssl, selfSigned } from './certs.ts';

export type ResourceKind =
  | 'endpointslices'
  | 'configmaps'
  | 'services'
  | 'secrets'
  | 'ingresses'
  | 'ingressclasses'
  | 'namespaces'
  | 'gatewayclasses'
  | 'gateways'
  | 'httproutes'
  | 'grpcroutes'
  | 'referencegrants'
  | 'tollgatepolicies';

/** The objects the fake stores, as kubernetes-models builds them. */
export type KubeModel = EndpointSlice | ConfigMap | Service | Secret | Ingress | IngressClass;

export interface StoredObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; resourceVersion?: string; [key: string]: unknown };
  [key: string]: unknown;
}

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  resource: ResourceKind;
  object: StoredObject;
  resourceVersion: number;
}

interface OpenWatch {
  resource: ResourceKind;
  namespace: string | null;
  matches: (object: StoredObject) => boolean;
  response: http.ServerResponse;
  bookmarks: boolean;
  silent: boolean;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  authorization: string | undefined;
}

const RESOURCES: Record<
  ResourceKind,
  { prefix: string; apiVersion: string; kind: string; listKind: string; clusterScoped?: boolean }
> = {
  endpointslices: {
    prefix: '/apis/discovery.k8s.io/v1',
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    listKind: 'EndpointSliceList',
  },
  configmaps: { prefix: '/api/v1', apiVersion: 'v1', kind: 'ConfigMap', listKind: 'ConfigMapList' },
  services: { prefix: '/api/v1', apiVersion: 'v1', kind: 'Service', listKind: 'ServiceList' },
  secrets: { prefix: '/api/v1', apiVersion: 'v1', kind: 'Secret', listKind: 'SecretList' },
  ingresses: {
    prefix: '/apis/networking.k8s.io/v1',
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    listKind: 'IngressList',
  },
  ingressclasses: {
    prefix: '/apis/networking.k8s.io/v1',
    apiVersion: 'networking.k8s.io/v1',
    kind: 'IngressClass',
    listKind: 'IngressClassList',
    clusterScoped: true,
  },
  namespaces: {
    prefix: '/api/v1',
    apiVersion: 'v1',
    kind: 'Namespace',
    listKind: 'NamespaceList',
    clusterScoped: true,
  },
  gatewayclasses: {
    prefix: '/apis/gateway.networking.k8s.io/v1',
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'GatewayClass',
    listKind: 'GatewayClassList',
    clusterScoped: true,
  },
  gateways: {
    prefix: '/apis/gateway.networking.k8s.io/v1',
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'Gateway',
    listKind: 'GatewayList',
  },
  httproutes: {
    prefix: '/apis/gateway.networking.k8s.io/v1',
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    listKind: 'HTTPRouteList',
  },
  grpcroutes: {
    prefix: '/apis/gateway.networking.k8s.io/v1',
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'GRPCRoute',
    listKind: 'GRPCRouteList',
  },
  referencegrants: {
    prefix: '/apis/gateway.networking.k8s.io/v1beta1',
    apiVersion: 'gateway.networking.k8s.io/v1beta1',
    kind: 'ReferenceGrant',
    listKind: 'ReferenceGrantList',
  },
  tollgatepolicies: {
    prefix: '/apis/tollgate.io/v1alpha1',
    apiVersion: 'tollgate.io/v1alpha1',
    kind: 'TollgatePolicy',
    listKind: 'TollgatePolicyList',
  },
};

const KIND_RESOURCE = new Map(
  Object.entries(RESOURCES).map(([resource, { kind }]) => [kind, resource as ResourceKind]),
);

// Namespaced collections, and the all-namespaces (or cluster-scoped) ones. Each resource is then
// checked to live under the group/version prefix it was given.
const PATH = /^(\/api\/v1|\/apis\/[a-z0-9.-]+\/v[0-9a-z]+)(?:\/namespaces\/([a-z0-9-]+))?\/([a-z]+)$/;
// One object, or its status subresource (namespaced, or cluster-scoped without the namespace part).
const OBJECT_PATH =
  /^(\/api\/v1|\/apis\/[a-z0-9.-]+\/v[0-9a-z]+)(?:\/namespaces\/([a-z0-9-]+))?\/([a-z]+)\/([a-z0-9.-]+)(\/status)?$/;
const EVENTS_PATH = /^\/api\/v1\/namespaces\/([a-z0-9-]+)\/events$/;

/** An Event as Tollgate posted it. */
export interface RecordedEvent {
  namespace: string;
  involvedObject: { kind?: string; name?: string; namespace?: string };
  type: string;
  reason: string;
  message: string;
}

export interface FakeKubeApiOptions {
  /** Serve TLS with a self-signed CA written into the kubeconfig (default: when openssl exists). */
  tls?: boolean;
  /** The bearer token the server accepts (default "test-token"). */
  token?: string;
}

export class FakeKubeApi {
  readonly token: string;
  /** Every request received, in order: lets a test check scope (namespaces, selectors). */
  readonly requests: RecordedRequest[] = [];
  /** Every Event posted, in order. */
  readonly events: RecordedEvent[] = [];
  /** Every status write a client made (PATCH or PUT of a status subresource), in order. */
  readonly statusWrites: Array<{ resource: ResourceKind; namespace: string; name: string }> = [];
  #server: http.Server | https.Server;
  #tls: { cert: Buffer; key: Buffer } | null;
  #port = 0;
  #resourceVersion = 100;
  #compactedBelow = 0;
  #objects = new Map<string, StoredObject>();
  #history: WatchEvent[] = [];
  #watches = new Set<OpenWatch>();
  #sockets = new Set<net.Socket>();
  #connectionsOpened = 0;
  #failures = new Map<ResourceKind | 'events' | '*', number>();
  #silent = false;
  #missing = new Set<ResourceKind>();
  #hung: http.ServerResponse[] | null = null;
  #listDelays = new Map<ResourceKind, number>();
  #acceptedTokens: Set<string>;

  constructor(options: FakeKubeApiOptions = {}) {
    this.token = options.token ?? 'test-token';
    this.#acceptedTokens = new Set([this.token]);
    const useTls = options.tls ?? hasOpenssl();
    this.#tls = useTls ? selfSigned('127.0.0.1') : null;
    this.#server = this.#createServer();
  }

  get url(): string {
    return `${this.#tls ? 'https' : 'http'}://127.0.0.1:${this.#port}`;
  }

  /** Connections clients opened so far (TLS: handshakes completed). */
  get connectionsOpened(): number {
    return this.#connectionsOpened;
  }

  get caCertificate(): Buffer | null {
    return this.#tls?.cert ?? null;
  }

  async start(): Promise<void> {
    this.#server.listen(this.#port, '127.0.0.1');
    await once(this.#server, 'listening');
    this.#port = (this.#server.address() as net.AddressInfo).port;
  }

  /** Stops listening and cuts every connection (the API server went away). */
  async stop(): Promise<void> {
    for (const watch of this.#watches) watch.response.destroy();
    this.#watches.clear();
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server.close(resolve));
    this.#server = this.#createServer();
  }

  /** Listens again on the same port (start() after stop()). */
  async restart(): Promise<void> {
    await this.start();
  }

  /**
   * Writes a kubeconfig pointing at this server (CA, bearer token, namespace) and returns its path:
   * the client reaches the fake exactly as it reaches a cluster from a laptop.
   */
  writeKubeconfig(dir: string, namespace = 'default'): string {
    const cluster: Record<string, unknown> = { server: this.url };
    if (this.#tls) cluster['certificate-authority-data'] = this.#tls.cert.toString('base64');
    // The client library refuses plain http unless told to skip TLS verification.
    else cluster['insecure-skip-tls-verify'] = true;
    const path = join(dir, 'kubeconfig');
    writeFileSync(
      path,
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'fake', cluster }],
        users: [{ name: 'tester', user: { token: this.token } }],
        contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'tester', namespace } }],
        'current-context': 'fake',
      }),
    );
    return path;
  }

  /** Replaces the set of accepted bearer tokens (a rotated service-account token). */
  acceptTokens(tokens: string[]): void {
    this.#acceptedTokens = new Set(tokens);
  }

  /** Creates or replaces an object; open watches get ADDED or MODIFIED. */
  apply(model: KubeModel): StoredObject {
    model.validate();
    return this.applyRaw(model.toJSON() as unknown as StoredObject);
  }

  /**
   * Creates or replaces an object exactly as given, without the schema check: what a buggy or
   * hostile controller, or an older API server, may store (`endpoints: [null]`, port 70000, ...).
   */
  applyRaw(raw: StoredObject): StoredObject {
    const object = structuredClone(raw);
    const resource = KIND_RESOURCE.get(object.kind) as ResourceKind;
    if (RESOURCES[resource].clusterScoped) object.metadata.namespace = '';
    const key = objectKey(resource, object.metadata.namespace, object.metadata.name);
    const existing = this.#objects.get(key);
    const resourceVersion = ++this.#resourceVersion;
    // Like the API server: a write of the main resource never changes the status subresource (a
    // test may create an object with a status, e.g. a LoadBalancer Service's address).
    if (existing && 'status' in existing) object.status = existing.status;
    // metadata.generation counts changes of the desired state (everything but metadata and status).
    const desired = (item: StoredObject) => {
      const { metadata: _metadata, status: _status, ...rest } = item;
      return JSON.stringify(rest);
    };
    const previousGeneration = Number(existing?.metadata.generation ?? 0);
    const generation =
      existing === undefined
        ? 1
        : desired(existing) === desired(object)
          ? previousGeneration
          : previousGeneration + 1;
    object.metadata = {
      ...object.metadata,
      generation,
      resourceVersion: String(resourceVersion),
      uid: (existing?.metadata.uid as string | undefined) ?? `uid-${key.replaceAll('/', '-')}`,
      creationTimestamp:
        (existing?.metadata.creationTimestamp as string | undefined) ?? new Date().toISOString(),
    };
    this.#objects.set(key, object);
    this.#publish({ type: existing ? 'MODIFIED' : 'ADDED', resource, object, resourceVersion });
    return object;
  }

  /** The stored object, as a client would GET it (status included), or undefined. */
  get(resource: ResourceKind, namespace: string, name: string): StoredObject | undefined {
    const object = this.#objects.get(
      objectKey(resource, RESOURCES[resource].clusterScoped ? '' : namespace, name),
    );
    return object === undefined ? undefined : structuredClone(object);
  }

  /**
   * A write of a status subresource (what a controller does): a merge patch, or a replacement (PUT)
   * that must carry the current resourceVersion. 'conflict': that resourceVersion is stale.
   */
  #writeStatus(
    resource: ResourceKind,
    namespace: string,
    name: string,
    body: { status?: unknown; metadata?: { resourceVersion?: string } },
    replace: boolean,
  ): StoredObject | null | 'conflict' {
    const key = objectKey(resource, RESOURCES[resource].clusterScoped ? '' : namespace, name);
    const existing = this.#objects.get(key);
    if (!existing) return null;
    const precondition = body.metadata?.resourceVersion;
    if ((replace || precondition !== undefined) && precondition !== existing.metadata.resourceVersion)
      return 'conflict';
    this.statusWrites.push({ resource, namespace, name });
    const resourceVersion = ++this.#resourceVersion;
    const object: StoredObject = {
      ...existing,
      status: replace ? (body.status ?? {}) : mergePatch(existing.status ?? {}, body.status ?? {}),
      metadata: { ...existing.metadata, resourceVersion: String(resourceVersion) },
    };
    this.#objects.set(key, object);
    this.#publish({ type: 'MODIFIED', resource, object, resourceVersion });
    return object;
  }

  /**
   * Sets an object's status as another controller would (no precondition): e.g. another
   * controller's entry in an HTTPRoute's status.parents, which Tollgate must keep.
   */
  setStatus(resource: ResourceKind, namespace: string, name: string, status: unknown): StoredObject {
    const written = this.#writeStatus(resource, namespace, name, { status }, false);
    if (written === null || written === 'conflict') throw new Error(`no ${resource} ${namespace}/${name}`);
    this.statusWrites.pop();
    return written;
  }

  /** Deletes an object; open watches get DELETED with its last state. */
  delete(resource: ResourceKind, namespace: string, name: string): void {
    const key = objectKey(resource, RESOURCES[resource].clusterScoped ? '' : namespace, name);
    const existing = this.#objects.get(key);
    if (!existing) throw new Error(`no ${resource} ${namespace}/${name}`);
    this.#objects.delete(key);
    const resourceVersion = ++this.#resourceVersion;
    const object = {
      ...existing,
      metadata: { ...existing.metadata, resourceVersion: String(resourceVersion) },
    };
    this.#publish({ type: 'DELETED', resource, object, resourceVersion });
  }

  /** Forgets history: a watch resumed from any earlier resourceVersion gets 410 Gone. */
  compact(): void {
    this.#compactedBelow = this.#resourceVersion;
    this.#history = [];
  }

  /** Compacts, then ends every open watch with an ERROR event carrying a 410 Status. */
  expireWatches(): void {
    this.compact();
    for (const watch of [...this.#watches]) {
      writeEvent(watch.response, { type: 'ERROR', object: goneStatus(this.#compactedBelow) });
      this.#closeWatch(watch);
    }
  }

  /** Cuts every open watch connection without a word (a load balancer or API server restart). */
  dropWatches(): void {
    for (const watch of [...this.#watches]) {
      watch.response.socket?.destroy();
      this.#closeWatch(watch);
    }
  }

  /** Sends a BOOKMARK at the current resourceVersion to every watch that asked for bookmarks. */
  bookmark(): void {
    for (const watch of this.#watches) {
      if (!watch.bookmarks || watch.silent) continue;
      const { apiVersion, kind } = RESOURCES[watch.resource];
      writeEvent(watch.response, {
        type: 'BOOKMARK',
        object: { apiVersion, kind, metadata: { resourceVersion: String(this.#resourceVersion) } },
      });
    }
  }

  /** Serves `resource` no more (its CRD is not installed): lists and watches of it get 404. */
  withoutResource(resource: ResourceKind): void {
    this.#missing.add(resource);
  }

  /** Answers every later request (for one resource, or all) with this status; null clears them all. */
  failWith(status: 403 | 500 | null, resource: ResourceKind | 'events' | '*' = '*'): void {
    if (status === null) this.#failures.clear();
    else this.#failures.set(resource, status);
  }

  /**
   * While true, every new request is accepted and never answered (an overloaded API server); when
   * set back to false the held requests are cut, as a server restart would.
   */
  hangRequests(hang: boolean): void {
    if (hang) {
      this.#hung ??= [];
      return;
    }
    for (const res of this.#hung ?? []) res.socket?.destroy();
    this.#hung = null;
  }

  /**
   * Answers every later list of `resource` only after `ms` (0 clears it): a slow API server, so a
   * client's other watches deliver their objects before this one's arrive. Watches are not delayed.
   */
  delayLists(resource: ResourceKind, ms: number): void {
    if (ms > 0) this.#listDelays.set(resource, ms);
    else this.#listDelays.delete(resource);
  }

  /** While true, watches opened or already open receive nothing: the stream stays up but is silent. */
  silenceWatches(silent: boolean): void {
    this.#silent = silent;
    for (const watch of this.#watches) watch.silent = silent;
  }

  openWatches(resource?: ResourceKind): number {
    return [...this.#watches].filter((watch) => resource === undefined || watch.resource === resource).length;
  }

  /** Resolves once `predicate` holds, checked after every request and watch change. */
  async waitFor(predicate: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`fake kube API: timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  #createServer(): http.Server | https.Server {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.#handle(req, res);
    const server = this.#tls ? https.createServer({ ...this.#tls }, handler) : http.createServer(handler);
    server.on(this.#tls ? 'secureConnection' : 'connection', (socket: net.Socket) => {
      this.#sockets.add(socket);
      this.#connectionsOpened++;
      socket.on('close', () => this.#sockets.delete(socket));
    });
    return server;
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://fake');
    const query = Object.fromEntries(url.searchParams);
    this.requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query,
      authorization: req.headers.authorization,
    });
    if (this.#hung) {
      this.#hung.push(res);
      return;
    }
    if (req.method === 'PATCH' || req.method === 'POST') {
      this.#write(req, res, url);
      return;
    }
    if (req.method === 'PUT') {
      this.#write(req, res, url);
      return;
    }
    const single = req.method === 'GET' ? OBJECT_PATH.exec(url.pathname) : null;
    if (single) {
      this.#getObject(
        req,
        res,
        single as unknown as [string, string, string | undefined, ResourceKind, string],
      );
      return;
    }
    const route = this.#route(req, url, query);
    if ('refusal' in route) {
      sendStatus(res, ...route.refusal);
    } else if (query.watch === 'true' || query.watch === '1') {
      this.#watch(route.resource, route.namespace, route.matches, query, res);
    } else {
      // The list is taken when answered, as a slow server would read it.
      const answer = () => {
        const items = [...this.#objects.entries()]
          .filter(([key, object]) => key.startsWith(`${route.resource}/`) && route.matches(object))
          .map(([, object]) => {
            const { apiVersion: _apiVersion, kind: _kind, ...item } = object;
            return item;
          });
        const { apiVersion, listKind } = RESOURCES[route.resource];
        sendJson(res, 200, {
          apiVersion,
          kind: listKind,
          metadata: { resourceVersion: String(this.#resourceVersion) },
          items,
        });
      };
      const delay = this.#listDelays.get(route.resource);
      if (delay === undefined) answer();
      else
        setTimeout(() => {
          if (!res.destroyed) answer();
        }, delay).unref();
    }
  }

  /** GET of one object (`read` in the client library). */
  #getObject(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    [, prefix, namespaceText, resource, name]: [string, string, string | undefined, ResourceKind, string],
  ): void {
    const namespace = namespaceText ?? '';
    const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (presented === undefined || !this.#acceptedTokens.has(presented)) {
      sendStatus(res, 401, 'Unauthorized', 'Unauthorized');
      return;
    }
    const failure = this.#failures.get(resource) ?? this.#failures.get('*');
    if (failure) {
      sendStatus(res, failure, failure === 403 ? 'Forbidden' : 'InternalError', 'refused on demand');
      return;
    }
    const object =
      RESOURCES[resource]?.prefix === prefix
        ? this.#objects.get(objectKey(resource, namespace, name))
        : undefined;
    if (object === undefined) sendStatus(res, 404, 'NotFound', `${resource} "${name}" not found`);
    else sendJson(res, 200, object);
  }

  /** PATCH or PUT of a status subresource, POST of an Event; anything else written is refused. */
  #write(req: http.IncomingMessage, res: http.ServerResponse, url: URL): void {
    const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (presented === undefined || !this.#acceptedTokens.has(presented)) {
      sendStatus(res, 401, 'Unauthorized', 'Unauthorized');
      return;
    }
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(body);
      } catch {
        sendStatus(res, 400, 'BadRequest', 'body is not JSON');
        return;
      }
      const object = OBJECT_PATH.exec(url.pathname);
      const target = object?.[5] === '/status' ? (object[3] as ResourceKind) : null;
      const failure =
        this.#failures.get(req.method === 'POST' ? 'events' : (target ?? 'ingresses')) ??
        this.#failures.get('*');
      if (failure) {
        sendStatus(res, failure, failure === 403 ? 'Forbidden' : 'InternalError', 'refused on demand');
        return;
      }
      const known = target !== null && RESOURCES[target]?.prefix === object?.[1];
      if ((req.method === 'PATCH' || req.method === 'PUT') && known) {
        if (req.method === 'PATCH' && req.headers['content-type'] !== 'application/merge-patch+json') {
          sendStatus(
            res,
            415,
            'UnsupportedMediaType',
            `unsupported patch type ${req.headers['content-type']}`,
          );
          return;
        }
        const written = this.#writeStatus(
          target,
          object?.[2] ?? '',
          object?.[4] as string,
          parsed,
          req.method === 'PUT',
        );
        if (written === null) sendStatus(res, 404, 'NotFound', `${target} not found`);
        else if (written === 'conflict')
          sendStatus(
            res,
            409,
            'Conflict',
            'Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again',
          );
        else sendJson(res, 200, written);
        return;
      }
      const events = EVENTS_PATH.exec(url.pathname);
      if (req.method === 'POST' && events) {
        const event = parsed as unknown as Omit<RecordedEvent, 'namespace'>;
        this.events.push({
          namespace: events[1] as string,
          involvedObject: event.involvedObject,
          type: event.type,
          reason: event.reason,
          message: event.message,
        });
        sendJson(res, 201, { ...parsed, metadata: { name: `event-${this.events.length}` } });
        return;
      }
      sendStatus(res, 404, 'NotFound', 'the server could not find the requested resource');
    });
  }

  /** What the request is for, or the Status the API server would refuse it with. */
  #route(
    req: http.IncomingMessage,
    url: URL,
    query: Record<string, string>,
  ):
    | { refusal: [number, string, string] }
    | { resource: ResourceKind; namespace: string | null; matches: (object: StoredObject) => boolean } {
    const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (presented === undefined || !this.#acceptedTokens.has(presented)) {
      return { refusal: [401, 'Unauthorized', 'Unauthorized'] };
    }
    const match = PATH.exec(url.pathname);
    if (req.method !== 'GET' || !match) {
      return { refusal: [404, 'NotFound', 'the server could not find the requested resource'] };
    }
    const [, prefix, namespaceText, resource] = match as unknown as [
      string,
      string,
      string | undefined,
      ResourceKind,
    ];
    const namespace = namespaceText ?? null;
    if (RESOURCES[resource]?.prefix !== prefix || (RESOURCES[resource].clusterScoped && namespace !== null)) {
      return { refusal: [404, 'NotFound', 'no such resource in this group'] };
    }
    if (this.#missing.has(resource))
      return { refusal: [404, 'NotFound', 'the server could not find the requested resource'] };
    const failure = this.#failures.get(resource) ?? this.#failures.get('*');
    if (failure === 403) {
      const verb = query.watch ? 'watch' : 'list';
      return {
        refusal: [
          403,
          'Forbidden',
          `${resource} is forbidden: User "system:serviceaccount:apps:tollgate" cannot ${verb} resource "${resource}" ${namespace === null ? 'at the cluster scope' : `in the namespace "${namespace}"`}`,
        ],
      };
    }
    if (failure === 500)
      return { refusal: [500, 'InternalError', 'Internal error occurred: etcd unavailable'] };
    try {
      return {
        resource,
        namespace,
        matches: selectorMatcher(namespace, query.labelSelector, query.fieldSelector),
      };
    } catch (error) {
      return { refusal: [400, 'BadRequest', (error as Error).message] };
    }
  }

  #watch(
    resource: ResourceKind,
    namespace: string | null,
    matches: (object: StoredObject) => boolean,
    query: Record<string, string>,
    res: http.ServerResponse,
  ): void {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    res.flushHeaders();
    const watch: OpenWatch = {
      resource,
      namespace,
      matches,
      response: res,
      bookmarks: query.allowWatchBookmarks === 'true',
      silent: this.#silent,
    };
    const from = query.resourceVersion;
    if (from === undefined || from === '' || from === '0') {
      for (const [key, object] of this.#objects) {
        if (key.startsWith(`${resource}/`) && matches(object)) writeEvent(res, { type: 'ADDED', object });
      }
    } else {
      const since = Number(from);
      if (!Number.isInteger(since) || since < this.#compactedBelow) {
        writeEvent(res, { type: 'ERROR', object: goneStatus(this.#compactedBelow) });
        res.end();
        return;
      }
      for (const event of this.#history) {
        if (event.resourceVersion > since && event.resource === resource && matches(event.object)) {
          writeEvent(res, { type: event.type, object: event.object });
        }
      }
    }
    this.#watches.add(watch);
    res.on('close', () => this.#watches.delete(watch));
    const timeoutSeconds = Number(query.timeoutSeconds);
    if (timeoutSeconds > 0) {
      const timer = setTimeout(() => this.#closeWatch(watch), timeoutSeconds * 1000);
      timer.unref();
      res.on('close', () => clearTimeout(timer));
    }
  }

  #publish(event: WatchEvent): void {
    this.#history.push(event);
    for (const watch of this.#watches) {
      if (watch.resource !== event.resource || watch.silent || !watch.matches(event.object)) continue;
      writeEvent(watch.response, { type: event.type, object: event.object });
    }
  }

  #closeWatch(watch: OpenWatch): void {
    this.#watches.delete(watch);
    watch.response.end();
  }
}

/** Starts a fake API server (TLS when openssl exists). */
export async function startFakeKubeApi(options: FakeKubeApiOptions = {}): Promise<FakeKubeApi> {
  const api = new FakeKubeApi(options);
  await api.start();
  return api;
}

function objectKey(resource: ResourceKind, namespace: string, name: string): string {
  return `${resource}/${namespace}/${name}`;
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const result: Record<string, unknown> =
    typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

function writeEvent(res: http.ServerResponse, event: { type: string; object: unknown }): void {
  if (!res.writableEnded) res.write(`${JSON.stringify(event)}\n`);
}

function goneStatus(compactedBelow: number) {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `too old resource version: requested (current ${compactedBelow})`,
    reason: 'Expired',
    code: 410,
  };
}

function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendStatus(res: http.ServerResponse, code: number, reason: string, message: string): void {
  sendJson(res, code, {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
  });
}

/**
 * Label selectors as the API server parses the equality/existence forms (`a=b`, `a==b`, `a!=b`,
 * `a`, `!a`, comma = and); field selectors on metadata.name and metadata.namespace.
 */
function selectorMatcher(
  namespace: string | null,
  labelSelector: string | undefined,
  fieldSelector: string | undefined,
): (object: StoredObject) => boolean {
  const labelTests = parseSelector(
    labelSelector,
    (object) => (object.metadata.labels ?? {}) as Record<string, string>,
  );
  const fieldTests = parseSelector(fieldSelector, (object) => ({
    'metadata.name': object.metadata.name,
    'metadata.namespace': object.metadata.namespace,
  }));
  for (const field of fieldTests.keys) {
    if (field !== 'metadata.name' && field !== 'metadata.namespace') {
      throw new Error(`field label not supported: ${field}`);
    }
  }
  return (object) =>
    (namespace === null || object.metadata.namespace === namespace) &&
    labelTests.test(object) &&
    fieldTests.test(object);
}

function parseSelector(
  selector: string | undefined,
  valuesOf: (object: StoredObject) => Record<string, string | undefined>,
): { keys: string[]; test: (object: StoredObject) => boolean } {
  const requirements = (selector ?? '')
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map((part) => {
      const m = /^(!?)([A-Za-z0-9._/-]+)(?:\s*(==|=|!=)\s*([A-Za-z0-9._-]*))?$/.exec(part);
      if (!m) throw new Error(`unable to parse requirement: ${part}`);
      const [, not, key, op, value] = m as unknown as [string, string, string, string | undefined, string];
      if (not && op) throw new Error(`unable to parse requirement: ${part}`);
      return {
        key,
        test: (values: Record<string, string | undefined>) => {
          const actual = values[key];
          if (!op) return not ? actual === undefined : actual !== undefined;
          return op === '!=' ? actual !== value : actual === value;
        },
      };
    });
  return {
    keys: requirements.map((r) => r.key),
    test: (object) => {
      const values = valuesOf(object);
      return requirements.every((r) => r.test(values));
    },
  };
}

export interface EndpointSpec {
  ip: string;
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  /** Pod name for targetRef (default derived from the IP). */
  pod?: string;
}

/**
 * An EndpointSlice the way the EndpointSlice controller writes one for a Service: labelled with the
 * service name, ports named after the Service's ports, one entry per pod with its conditions.
 */
export function endpointSlice(spec: {
  service: string;
  namespace?: string;
  name?: string;
  addressType?: 'IPv4' | 'IPv6';
  ports: Array<{ name?: string | undefined; port: number }>;
  endpoints: EndpointSpec[];
}): EndpointSlice {
  const namespace = spec.namespace ?? 'default';
  return new EndpointSlice({
    metadata: {
      name: spec.name ?? `${spec.service}-abcde`,
      namespace,
      labels: {
        'kubernetes.io/service-name': spec.service,
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
      },
    },
    addressType: spec.addressType ?? 'IPv4',
    ports: spec.ports.map((port) => ({ name: port.name ?? '', port: port.port, protocol: 'TCP' })),
    endpoints: spec.endpoints.map((endpoint) => ({
      addresses: [endpoint.ip],
      conditions: {
        ready: endpoint.ready ?? true,
        serving: endpoint.serving ?? endpoint.ready ?? true,
        terminating: endpoint.terminating ?? false,
      },
      nodeName: 'node-1',
      targetRef: {
        kind: 'Pod',
        namespace,
        name: endpoint.pod ?? `${spec.service}-${endpoint.ip.replaceAll(/[.:]/g, '-')}`,
      },
    })),
  });
}

/** A ConfigMap holding the given data keys. */
export function configMap(spec: {
  name: string;
  namespace?: string;
  data: Record<string, string>;
}): ConfigMap {
  return new ConfigMap({
    metadata: { name: spec.name, namespace: spec.namespace ?? 'default' },
    data: spec.data,
  });
}

/** The IngressClass the chart ships: Tollgate's controller, optionally the cluster's default class. */
export function ingressClass(
  spec: { name?: string; controller?: string; isDefault?: boolean } = {},
): IngressClass {
  return new IngressClass({
    metadata: {
      name: spec.name ?? 'tollgate',
      ...(spec.isDefault ? { annotations: { 'ingressclass.kubernetes.io/is-default-class': 'true' } } : {}),
    },
    spec: { controller: spec.controller ?? 'tollgate.io/ingress-controller' },
  });
}

/** A ClusterIP Service with the given ports (`port` in front of `targetPort`). */
export function service(spec: {
  name: string;
  namespace?: string;
  ports: Array<{ name?: string; port: number; targetPort?: number | string }>;
  clusterIP?: string;
  loadBalancer?: Array<{ ip?: string; hostname?: string }>;
}): Service {
  return new Service({
    metadata: { name: spec.name, namespace: spec.namespace ?? 'default' },
    spec: {
      type: spec.loadBalancer ? 'LoadBalancer' : 'ClusterIP',
      clusterIP: spec.clusterIP ?? '10.96.0.10',
      selector: { app: spec.name },
      ports: spec.ports.map((port) => ({
        ...(port.name ? { name: port.name } : {}),
        port: port.port,
        targetPort: port.targetPort ?? port.port,
        protocol: 'TCP',
      })),
    },
    ...(spec.loadBalancer ? { status: { loadBalancer: { ingress: spec.loadBalancer } } } : {}),
  });
}

/** A Secret with string data (stored base64, as the API server does). */
export function secret(spec: {
  name: string;
  namespace?: string;
  type?: string;
  data: Record<string, string>;
}): Secret {
  return new Secret({
    metadata: { name: spec.name, namespace: spec.namespace ?? 'default' },
    type: spec.type ?? 'Opaque',
    data: Object.fromEntries(
      Object.entries(spec.data).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
    ),
  });
}

export interface IngressPathSpec {
  path?: string;
  pathType?: 'Prefix' | 'Exact' | 'ImplementationSpecific' | undefined;
  service: string;
  port: number | string;
}

/** An Ingress: rules by host (empty host = no host), optional TLS and defaultBackend. */
export function ingress(spec: {
  name: string;
  namespace?: string;
  className?: string | null;
  annotations?: Record<string, string>;
  rules?: Array<{ host?: string; paths: IngressPathSpec[] }>;
  tls?: Array<{ hosts: string[]; secretName: string }>;
  defaultBackend?: { service: string; port: number | string };
}): Ingress {
  const backend = (target: { service: string; port: number | string }) => ({
    service: {
      name: target.service,
      port: typeof target.port === 'number' ? { number: target.port } : { name: target.port },
    },
  });
  return new Ingress({
    metadata: {
      name: spec.name,
      namespace: spec.namespace ?? 'default',
      ...(spec.annotations ? { annotations: spec.annotations } : {}),
    },
    spec: {
      ...(spec.className === null ? {} : { ingressClassName: spec.className ?? 'tollgate' }),
      ...(spec.tls ? { tls: spec.tls } : {}),
      ...(spec.defaultBackend ? { defaultBackend: backend(spec.defaultBackend) } : {}),
      rules: (spec.rules ?? []).map((rule) => ({
        ...(rule.host ? { host: rule.host } : {}),
        http: {
          paths: rule.paths.map((path) => ({
            path: path.path ?? '/',
            pathType: path.pathType ?? 'Prefix',
            backend: backend(path),
          })),
        },
      })),
    },
  });
}
