/**
 * The admin port is reachable by whoever reaches the pod (docs/security.md, "The admin port"):
 * nothing on it may change readiness or start a drain, and connections held open on it must never
 * keep the kubelet's probes or Prometheus out.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_CONNECTIONS } from '../../src/client-limits.ts';
import { connectRaw, type RawConnection } from '../helpers/raw-connection.ts';
import { request, startTollgate, type Tollgate } from '../helpers/tollgate.ts';

describe('admin port: no state changes, probes answer while connections are held', () => {
  let tollgate: Tollgate;
  const held: RawConnection[] = [];
  before(async () => {
    tollgate = await startTollgate({
      readyTimeoutMs: 30_000,
      upstreams: { upstreams: { DEFAULT: { paths: { '/': { servers: ['127.0.0.1:9'] } } } } },
    });
  });
  after(async () => {
    for (const connection of held) connection.socket.destroy();
    await tollgate?.stop();
  });

  it('there is no /drain (nor any path) that changes state: it is 404 and readiness stays', async () => {
    for (const path of ['/drain', '/drain?seconds=300', '/drain?seconds=0', '/shutdown', '/ready']) {
      const started = performance.now();
      const res = await request(`${tollgate.adminUrl}${path}`);
      assert.equal(res.status, 404, path);
      assert.ok(performance.now() - started < 5_000, `${path} was held`);
    }
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await request(`${tollgate.adminUrl}/readyz`, { method });
      assert.equal(res.status, 405, method);
    }
    assert.equal((await request(`${tollgate.adminUrl}/readyz`)).status, 200);
    for (const path of ['/constructor', '/__proto__', '/toString', '/drainx']) {
      assert.equal((await request(`${tollgate.adminUrl}${path}`)).status, 404, path);
    }
  });

  it(`/healthz, /readyz and /metrics answer while ${ADMIN_CONNECTIONS * 2} connections are held open`, async () => {
    // Silent connections, ones trickling request headers, and keep-alive ones left idle after an answer.
    for (let i = 0; i < ADMIN_CONNECTIONS; i++) held.push(await connectRaw(tollgate.adminPort));
    for (let i = 0; i < ADMIN_CONNECTIONS / 2; i++) {
      const connection = await connectRaw(tollgate.adminPort);
      connection.socket.write('GET /metrics HTTP/1.1\r\nHost: admin\r\nX-Slow: ');
      held.push(connection);
    }
    for (let i = 0; i < ADMIN_CONNECTIONS / 2; i++) {
      const connection = await connectRaw(tollgate.adminPort);
      connection.socket.write('GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n');
      await connection.responses('"status":"ok"').catch(() => {});
      held.push(connection);
    }
    for (let round = 0; round < 3; round++) {
      for (const path of ['/healthz', '/readyz', '/metrics']) {
        const res = await request(`${tollgate.adminUrl}${path}`);
        assert.equal(res.status, 200, `${path} in round ${round}`);
      }
    }
    // The proxy is unaffected too, and the process still runs.
    assert.equal(tollgate.child.exitCode, null);
  });

  it('clients that do not read /metrics answers cannot hold the port either', async () => {
    for (let i = 0; i < ADMIN_CONNECTIONS + 8; i++) {
      const connection = await connectRaw(tollgate.adminPort);
      connection.socket.pause();
      connection.socket.write('GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n'.repeat(20));
      held.push(connection);
    }
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      assert.equal((await request(`${tollgate.adminUrl}${path}`)).status, 200, path);
    }
  });
});
