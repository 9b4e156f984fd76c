import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { hashPassword } from '../../src/auth/password.ts';
import { request, startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const HOST = 'app.example.com';
const basic = (user: string, password: string) => ({
  host: HOST,
  authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
});

/**
 * Random Basic passwords against a hashed user used to fill libuv's thread pool with scrypt: other
 * routes' password checks waited seconds, and connects to upstreams named by host (DNS shares the
 * pool) failed. The flood is bounded in count and time and sent to loopback only.
 */
describe('a flood of wrong Basic passwords', () => {
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    upstream = await startUpstream({ name: 'app' });
    // The production default cost, so each check really occupies a thread for a while.
    const [floodedHash, otherHash] = await Promise.all([
      hashPassword('flooded-pw'),
      hashPassword('other-pw'),
    ]);
    tollgate = await startTollgate({
      main: { access_log: false },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/flooded': {
                servers: [upstream.address],
                authorization: { type: 'basic', users: [{ username: 'victim', password_hash: floodedHash }] },
              },
              '/other': {
                servers: [upstream.address],
                authorization: { type: 'basic', users: [{ username: 'carol', password_hash: otherHash }] },
              },
              // Named by host: every new connection needs a DNS lookup on the thread pool.
              '/named': { servers: [`localhost:${upstream.port}`] },
            },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
  });

  it('is answered 503 past the queue, while other routes, DNS and /healthz keep answering', {
    timeout: 60_000,
  }, async () => {
    const FLOODERS = 24;
    const MAX_REQUESTS = 400;
    const deadline = Date.now() + 6_000;
    const statuses = new Map<number, number>();
    let sent = 0;
    let overloadedWithRetryAfter = 0;
    let flooding = true;
    let firstOverload: () => void = () => {};
    const overloaded = new Promise<void>((resolve) => {
      firstOverload = resolve;
    });
    const flooder = async () => {
      while (flooding && sent < MAX_REQUESTS && Date.now() < deadline) {
        sent++;
        const response = await request(`${tollgate.proxyUrl}/flooded`, {
          headers: basic('victim', randomBytes(9).toString('base64')),
        });
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        if (response.status === 503) {
          assert.equal(response.json<{ error: string }>().error, 'auth_overloaded');
          assert.equal(response.headers['www-authenticate'], undefined);
          if (response.headers['retry-after'] === '1') overloadedWithRetryAfter++;
          firstOverload();
        }
      }
    };
    const flood = Promise.all(Array.from({ length: FLOODERS }, flooder));
    try {
      // Only measure once the flood has filled the queue: that is the state under test.
      await Promise.race([overloaded, flood]);
      assert.ok(
        (statuses.get(503) ?? 0) > 0,
        `the flood never filled the queue: ${JSON.stringify([...statuses])}`,
      );
      const timed = async (path: string, headers: Record<string, string>) => {
        const started = performance.now();
        const response = await request(`${tollgate.proxyUrl}${path}`, { headers });
        return { status: response.status, ms: performance.now() - started };
      };
      const other = await timed('/other', basic('carol', 'other-pw'));
      const named = await timed('/named', { host: HOST, connection: 'close' });
      const health = await request(`${tollgate.adminUrl}/healthz`);
      assert.equal(other.status, 200);
      assert.ok(other.ms < 2_000, `another route's password check took ${Math.round(other.ms)} ms`);
      assert.equal(named.status, 200);
      assert.ok(named.ms < 2_000, `a route named by host took ${Math.round(named.ms)} ms`);
      assert.equal(health.status, 200);
    } finally {
      flooding = false;
      await flood;
    }
    assert.ok((statuses.get(503) ?? 0) > 0, `no request was refused: ${JSON.stringify([...statuses])}`);
    assert.equal(overloadedWithRetryAfter, statuses.get(503));
    assert.deepEqual(
      [...statuses.keys()].sort(),
      [401, 503],
      `every guess is either checked (401) or refused (503): ${JSON.stringify([...statuses])}`,
    );
    const metrics = await tollgate.metrics();
    assert.match(metrics, /tollgate_auth_failures_total\{[^}]*reason="auth_overloaded"[^}]*\} [1-9]/);
  });
});
