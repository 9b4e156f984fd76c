import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { request, waitFor } from '../helpers/tollgate.ts';
import { PROCESS_START_MS } from '../helpers/workers.ts';

/**
 * The response cache with workers (docs/traffic.md#response-cache): each worker keeps its own
 * store, and the admin port's purge, answered by the primary, reaches every one of them.
 */
describe('workers: the response cache', () => {
  const scope = testScope();

  it('each worker stores its own copy; DELETE /cache purges both and counts both', async () => {
    let answered = 0;
    const upstream = await scope.upstream({
      name: 'origin',
      handler: (_req, res) => {
        answered++;
        const body = JSON.stringify({ n: answered });
        res.writeHead(200, {
          'content-type': 'application/json',
          'cache-control': 'max-age=600',
          'content-length': Buffer.byteLength(body),
        });
        res.end(body);
      },
    });
    const tollgate = await scope.tollgate({
      main: { workers: 2, access_log: false },
      upstreams: {
        upstreams: {
          'cache.test': {
            paths: { '/': { servers: [upstream.address], cache: { max_bytes: '1m' } } },
          },
        },
      },
      readyTimeoutMs: PROCESS_START_MS,
    });
    // Each request on a connection of its own: the kernel spreads them over both workers, and each
    // worker asks the upstream once, the first time it sees the URL.
    const fetchOnce = () =>
      request(`${tollgate.proxyUrl}/page`, { headers: { host: 'cache.test', connection: 'close' } });
    await waitFor(async () => {
      await Promise.all(Array.from({ length: 8 }, fetchOnce));
      return answered === 2;
    }, PROCESS_START_MS);
    const hit = await fetchOnce();
    assert.equal(hit.headers['x-cache'], 'HIT');
    assert.equal(answered, 2, 'one fetch per worker, never more');

    const purged = await request(`${tollgate.adminUrl}/cache?host=cache.test&prefix=/`, { method: 'DELETE' });
    assert.equal(purged.status, 200, purged.body);
    assert.deepEqual(purged.json(), { purged: 2 });
    // Both stores are empty: each worker asks again.
    await waitFor(async () => {
      await Promise.all(Array.from({ length: 8 }, fetchOnce));
      return answered === 4;
    }, PROCESS_START_MS);
    assert.deepEqual(
      (
        await request(`${tollgate.adminUrl}/cache?host=cache.test&prefix=/nothing`, { method: 'DELETE' })
      ).json(),
      { purged: 0 },
    );
  });
});
