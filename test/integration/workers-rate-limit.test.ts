import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { request } from '../helpers/tollgate.ts';
import { accessLinesByWorker, PROCESS_START_MS, sumOf } from '../helpers/workers.ts';

describe('workers: a rate limit (and the auth failure guard) is one budget for the whole set', () => {
  const scope = testScope();

  it('rate_limit: 5 admits at most 5 per one-second window over both workers, not 5 each', async () => {
    const upstream = await scope.upstream();
    const tollgate = await scope.tollgate({
      upstreams: `upstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["${upstream.address}"]\n        rate_limit: 5\n`,
      main: { workers: 2 },
      readyTimeoutMs: PROCESS_START_MS,
    });

    // Bursts of requests on fresh connections for a little over two seconds, all from 127.0.0.1.
    const started = performance.now();
    const statuses: number[] = [];
    while (performance.now() - started < 2_200) {
      const burst = await Promise.all(
        Array.from({ length: 10 }, () =>
          request(`${tollgate.proxyUrl}/`, { headers: { host: 'app.test', connection: 'close' } }),
        ),
      );
      statuses.push(...burst.map((answer) => answer.status));
    }
    const elapsedMs = performance.now() - started;
    const admitted = statuses.filter((status) => status === 200).length;
    const refused = statuses.filter((status) => status === 429).length;
    assert.equal(admitted + refused, statuses.length, 'only 200 and 429');

    // The window opens at the first request; the client saw at least the whole span the proxy saw.
    const windows = Math.floor(elapsedMs / 1000) + 1;
    const unanswered = tollgate
      .logs()
      .filter((line) => line.msg === 'rate limiter failed; request let through');
    assert.ok(
      admitted <= 5 * windows,
      `${admitted} admitted in ${windows} windows of 5 (${unanswered.length} let through unanswered)`,
    );
    assert.ok(admitted >= 5, `a full budget was used at least once (${admitted})`);
    const byWorker = accessLinesByWorker(tollgate);
    assert.equal(byWorker.size, 2, 'both workers took requests, so a per-worker budget would have shown');

    const metrics = await tollgate.metrics();
    assert.equal(sumOf(metrics, 'tollgate_rate_limited_total', 'route="app.test/"'), refused);
    assert.equal(upstream.requests.length, admitted);
  });

  it('auth_failure_limit: N failures over both workers block the client, not N per worker', async () => {
    const upstream = await scope.upstream();
    const tollgate = await scope.tollgate({
      upstreams:
        `auth_failure_limit: 4\nupstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["${upstream.address}"]\n` +
        '        authorization: { type: apikey, creds: right-key }\n',
      main: { workers: 2 },
      readyTimeoutMs: PROCESS_START_MS,
    });
    const send = (key: string) =>
      request(`${tollgate.proxyUrl}/`, {
        headers: { host: 'app.test', connection: 'close', 'x-api-key': key },
      });
    // Fresh connections: the kernel spreads them over both workers.
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await send(`wrong-${i}`)).status);
    assert.deepEqual(statuses.slice(0, 4), [401, 401, 401, 401]);
    assert.deepEqual(statuses.slice(4), [429, 429, 429, 429], `one budget for the set: ${statuses}`);
    const blocked = await send('right-key');
    assert.equal(blocked.status, 429);
    assert.equal(blocked.json().error, 'auth_failures');
    const byWorker = accessLinesByWorker(tollgate);
    assert.equal(byWorker.size, 2, 'both workers took requests, so a per-worker budget would have shown');
    assert.equal(upstream.requests.length, 0);
  });
});
