/**
 * GET /drain on the admin listener: the preStop helper for an app container behind a Tollgate sidecar.
 * It answers only after the requested seconds, so the kubelet holds the app's SIGTERM that long.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request, startTollgate, type Tollgate } from '../helpers/tollgate.ts';

describe('admin /drain', () => {
  let tollgate: Tollgate;
  before(async () => {
    tollgate = await startTollgate({
      // Start-up is sub-second; the margin is for a machine under heavy parallel load.
      readyTimeoutMs: 30_000,
      upstreams: { upstreams: { DEFAULT: { paths: { '/': { servers: ['127.0.0.1:9'] } } } } },
    });
  });
  after(async () => {
    await tollgate?.stop();
  });

  it('answers after the requested seconds, and the proxy keeps serving meanwhile', async () => {
    const started = performance.now();
    const draining = request(`${tollgate.adminUrl}/drain?seconds=1`);
    // Readiness is untouched: the pod is already leaving the endpoints when the kubelet calls this.
    assert.equal((await request(`${tollgate.adminUrl}/readyz`)).status, 200);
    const res = await draining;
    const elapsed = performance.now() - started;
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { status: 'drained', waited_seconds: 1 });
    // Timers never fire early by more than a rounding millisecond.
    assert.ok(elapsed >= 990, `answered after ${elapsed.toFixed(0)} ms`);
  });

  it('answers at once for seconds=0', async () => {
    const res = await request(`${tollgate.adminUrl}/drain?seconds=0`);
    assert.deepEqual(res.json(), { status: 'drained', waited_seconds: 0 });
  });

  it('refuses a wait that is not a whole number up to 300 seconds', async () => {
    for (const bad of ['-1', '1.5', 'abc', '301', '99999']) {
      const res = await request(`${tollgate.adminUrl}/drain?seconds=${bad}`);
      assert.equal(res.status, 400, bad);
      assert.equal(res.json<{ error: string }>().error, 'bad_request');
    }
  });

  it('unknown paths, including inherited object keys, are 404', async () => {
    for (const path of ['/constructor', '/__proto__', '/toString', '/drainx']) {
      assert.equal((await request(`${tollgate.adminUrl}${path}`)).status, 404, path);
    }
  });
});
