/**
 * The Gateway API retry cases (kubernetes-sigs/gateway-api v1.6, conformance/tests/httproute-retry*),
 * their manifests as written, through the built process and the fake API server, every request of
 * each `.go` file's table; infra-backend-v3 answers as the suite's echo backend does for
 * `responseCode`, `succeedAfter` and `delayRetry` (per `uuid`), so each attempt it saw is counted.
 * Beside them, what docs/gateway-api.md#retries promises: a request with a body is never retried,
 * the backoff is waited, each retry is counted in `tollgate_upstream_retries_total`.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  gatewayClassObject,
  hasCondition,
  namespaceObject,
  routeParentConditions,
} from '../helpers/fake-gateway-api.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import {
  applyBackendService,
  CONFORMANCE_INFRA,
  manifests,
  SAME_NAMESPACE_GATEWAY,
  startGatewayTollgate,
  waitRouteAccepted,
} from '../helpers/gateway-conformance.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const INFRA = CONFORMANCE_INFRA;
const SETTLE_MS = 15_000;

// conformance/tests/httproute-retry.yaml
const RETRY = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: retries
  namespace: gateway-conformance-infra
spec:
  parentRefs:
    - name: same-namespace
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /retry/code-500-attempts-3
      retry:
        codes:
          - 500
        attempts: 3
      backendRefs:
        - name: infra-backend-v3
          port: 8080
    - matches:
        - path:
            type: PathPrefix
            value: /retry/code-all-attempts-2
      retry:
        codes:
          - 500
          - 502
          - 503
          - 504
        attempts: 2
      backendRefs:
        - name: infra-backend-v3
          port: 8080
`;
// conformance/tests/httproute-retry-connection-error.yaml
const CONNECTION_ERROR = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: retries-connection-error
  namespace: gateway-conformance-infra
spec:
  parentRefs:
    - name: same-namespace
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /retry/no-status-code-attempts-3
      retry:
        attempts: 3
      backendRefs:
        - name: infra-backend-v3
          port: 8080
`;
// conformance/tests/httproute-retry-with-timeouts.yaml
const WITH_TIMEOUTS = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: retries-with-timeouts
  namespace: gateway-conformance-infra
spec:
  parentRefs:
    - name: same-namespace
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /retry/backend-request-timeout-200ms
      retry:
        attempts: 2
      timeouts:
        backendRequest: 200ms
      backendRefs:
        - name: infra-backend-v3
          port: 8080
    - matches:
        - path:
            type: PathPrefix
            value: /retry/request-timeout-200ms
      retry:
        codes:
          - 500
        attempts: 5
      timeouts:
        backendRequest: 200ms
        request: 400ms
      backendRefs:
        - name: infra-backend-v3
          port: 8080
`;
// Not the suite's: a backoff long enough to tell from none, and a code Tollgate refuses.
const BACKOFF = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: retries-backoff
  namespace: gateway-conformance-infra
spec:
  parentRefs:
    - name: same-namespace
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /retry/backoff-1s
      retry:
        codes: [500]
        attempts: 1
        backoff: 1s
      backendRefs:
        - name: infra-backend-v3
          port: 8080
`;
const BAD_CODE = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: retries-bad-code
  namespace: gateway-conformance-infra
spec:
  parentRefs:
    - name: same-namespace
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /retry/bad
      retry:
        codes: [200]
      backendRefs:
        - name: infra-backend-v3
          port: 8080
`;

/** One row of a case's table: the simulation asked of the backend, the status the client must get. */
interface Row {
  path: string;
  responseCode?: number;
  succeedAfter: number;
  delayRetry?: string;
  want: number | readonly number[];
  /** The attempts the backend must have seen for that request. */
  attempts: number;
}

/** Attempts and their times, per `uuid`, as the suite's echo backend keeps them. */
const seen = new Map<string, number[]>();

/** The suite's echo backend for a retry simulation: fail the first `succeedAfter` attempts. */
function simulate(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) {
  const query = new URL(req.url ?? '/', 'http://backend').searchParams;
  const uuid = query.get('uuid');
  if (uuid === null) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"server":"infra-backend-v3"}');
    return;
  }
  const times = seen.get(uuid) ?? [];
  times.push(Date.now());
  seen.set(uuid, times);
  const fail = times.length <= Number(query.get('succeedAfter') ?? 0);
  const code = query.get('responseCode');
  const delay = Number(/^(\d+)ms$/.exec(query.get('delayRetry') ?? '')?.[1] ?? 0);
  const answer = () => {
    if (res.destroyed) return;
    if (!fail) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"server":"infra-backend-v3"}');
    } else if (code === null) req.socket.destroy();
    else {
      res.writeHead(Number(code), { 'content-type': 'text/plain' });
      res.end('simulated failure');
    }
  };
  if (fail && delay > 0) setTimeout(answer, delay);
  else answer();
}

describe('Gateway API retry cases with the suite’s manifests and tables, through the built process', () => {
  let backend: Upstream;
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;

  const accepted = (route: string) =>
    waitRouteAccepted(api, {
      namespace: INFRA,
      route,
      gateway: 'same-namespace',
      timeoutMs: SETTLE_MS,
    });
  /** The suite's assertConsistentRetryBehaviour: a fresh uuid per try, until the row's answer comes. */
  const expectRows = async (rows: readonly Row[]) => {
    // The routes are live once a plain request reaches the backend.
    for (const path of new Set(rows.map((row) => row.path)))
      await waitFor(async () => {
        const res = await request(`${tollgate.proxyUrl}${path}`, { headers: { host: 'example.test' } });
        return res.status === 200;
      }, SETTLE_MS);
    for (const row of rows) {
      let last = '';
      try {
        await waitFor(async () => {
          const uuid = randomUUID();
          const query = new URLSearchParams({ succeedAfter: String(row.succeedAfter), uuid });
          if (row.responseCode !== undefined) query.set('responseCode', String(row.responseCode));
          if (row.delayRetry !== undefined) query.set('delayRetry', row.delayRetry);
          const res = await request(`${tollgate.proxyUrl}${row.path}?${query}`, {
            headers: { host: 'example.test' },
          });
          const attempts = seen.get(uuid)?.length ?? 0;
          last = `status ${res.status} after ${attempts} attempts`;
          const wanted = typeof row.want === 'number' ? [row.want] : row.want;
          return wanted.includes(res.status) && attempts === row.attempts;
        }, SETTLE_MS);
      } catch {
        assert.fail(`${JSON.stringify(row)}: got ${last}`);
      }
    }
  };
  const retries = async (reason: string) => {
    const text = await tollgate.metrics();
    let sum = 0;
    for (const match of text.matchAll(
      new RegExp(`^tollgate_upstream_retries_total\\{[^}]*reason="${reason}"[^}]*\\} (\\d+)`, 'gm'),
    ))
      sum += Number(match[1]);
    return sum;
  };

  before(async () => {
    backend = await startUpstream({ name: 'infra-backend-v3', handler: simulate });
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(INFRA, { 'gateway-conformance': 'infra' }));
    api.applyRaw(gatewayClassObject());
    applyBackendService(api, { name: 'infra-backend-v3', namespace: INFRA, port: backend.port });
    for (const object of manifests(SAME_NAMESPACE_GATEWAY)) api.applyRaw(object);
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-retry-'));
    tollgate = await startGatewayTollgate(api, { dir, namespace: INFRA });
  });
  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await backend?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('HTTPRouteRetry: listed codes retried up to attempts, the last answer relayed when they run out, other codes never', async () => {
    for (const object of manifests(RETRY)) api.applyRaw(object);
    try {
      await accepted('retries');
      const before = await retries('status');
      const three = '/retry/code-500-attempts-3';
      const all = '/retry/code-all-attempts-2';
      await expectRows([
        { path: three, responseCode: 500, succeedAfter: 2, want: 200, attempts: 3 },
        { path: three, responseCode: 500, succeedAfter: 4, want: 500, attempts: 4 },
        { path: three, responseCode: 503, succeedAfter: 2, want: 503, attempts: 1 },
        ...[500, 502, 503, 504].flatMap((code) => [
          { path: all, responseCode: code, succeedAfter: 1, want: 200, attempts: 2 },
          { path: all, responseCode: code, succeedAfter: 3, want: code, attempts: 3 },
        ]),
      ]);
      // 2 + 3 retries on the first route, 1 + 2 per code on the second (more if a row was tried again).
      assert.ok((await retries('status')) - before >= 5 + 4 * 3);
    } finally {
      api.delete('httproutes', INFRA, 'retries');
    }
  });

  it('HTTPRouteRetry: a request with a body is never retried; the backoff is waited; a code out of 400-599 is refused', async () => {
    for (const object of [...manifests(RETRY), ...manifests(BACKOFF), ...manifests(BAD_CODE)])
      api.applyRaw(object);
    try {
      await accepted('retries');
      await accepted('retries-backoff');
      await waitFor(async () => {
        const res = await request(`${tollgate.proxyUrl}/retry/code-500-attempts-3`, {
          headers: { host: 'example.test' },
        });
        return res.status === 200;
      }, SETTLE_MS);
      const uuid = randomUUID();
      const res = await request(
        `${tollgate.proxyUrl}/retry/code-500-attempts-3?responseCode=500&succeedAfter=1&uuid=${uuid}`,
        { method: 'POST', headers: { host: 'example.test', 'content-type': 'text/plain' }, body: 'payload' },
      );
      assert.equal(res.status, 500);
      assert.equal(seen.get(uuid)?.length, 1);

      await expectRows([
        { path: '/retry/backoff-1s', responseCode: 500, succeedAfter: 1, want: 200, attempts: 2 },
      ]);
      const timed = [...seen.values()].at(-1) as number[];
      // Never before the backoff (timers fire late, never early); no upper bound on a loaded machine.
      assert.ok((timed[1] as number) - (timed[0] as number) >= 990, JSON.stringify(timed));

      await api.waitFor(
        () => {
          const conditions = routeParentConditions(
            api.get('httproutes', INFRA, 'retries-bad-code'),
            'same-namespace',
          );
          return hasCondition(conditions, 'Accepted', 'False');
        },
        'retries-bad-code refused',
        SETTLE_MS,
      );
      const status = JSON.stringify(api.get('httproutes', INFRA, 'retries-bad-code')?.status);
      assert.match(status, /UnsupportedValue/);
      assert.match(status, /retry\.codes 200/);
    } finally {
      for (const name of ['retries', 'retries-backoff', 'retries-bad-code'])
        api.delete('httproutes', INFRA, name);
    }
  });

  it('HTTPRouteRetryConnectionError: a connection reset before any answer is retried up to attempts, then 503', async () => {
    for (const object of manifests(CONNECTION_ERROR)) api.applyRaw(object);
    try {
      await accepted('retries-connection-error');
      const path = '/retry/no-status-code-attempts-3';
      await expectRows([
        { path, succeedAfter: 2, want: 200, attempts: 3 },
        { path, succeedAfter: 4, want: [500, 503], attempts: 4 },
      ]);
      assert.ok((await retries('reset')) >= 5);
    } finally {
      api.delete('httproutes', INFRA, 'retries-connection-error');
    }
  });

  it('HTTPRouteRetryWithTimeouts: a backend timeout is retried; the request timeout bounds every attempt together (504)', async () => {
    for (const object of manifests(WITH_TIMEOUTS)) api.applyRaw(object);
    try {
      await accepted('retries-with-timeouts');
      const backendTimeout = '/retry/backend-request-timeout-200ms';
      const requestTimeout = '/retry/request-timeout-200ms';
      await expectRows([
        {
          path: backendTimeout,
          responseCode: 500,
          succeedAfter: 2,
          delayRetry: '300ms',
          want: 200,
          attempts: 3,
        },
        {
          path: backendTimeout,
          responseCode: 500,
          succeedAfter: 3,
          delayRetry: '300ms',
          want: 504,
          attempts: 3,
        },
        { path: requestTimeout, responseCode: 500, succeedAfter: 1, want: 200, attempts: 2 },
        // 4 attempts of 100ms and their backoffs pass the 400ms: the 5th is never sent.
        {
          path: requestTimeout,
          responseCode: 500,
          succeedAfter: 4,
          delayRetry: '100ms',
          want: 504,
          attempts: 4,
        },
      ]);
    } finally {
      api.delete('httproutes', INFRA, 'retries-with-timeouts');
    }
  });
});
