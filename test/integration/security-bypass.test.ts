import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request, startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Adversarial requests against the built proxy: none may reach a protected path's upstream without
 * credentials. One upstream serves every route, as when a single application has an open site and a
 * protected /admin: a request routed to the open route but served by the application as /admin is a
 * bypass.
 */

const HOST = 'app.example.com';
const ADMIN = `Basic ${Buffer.from('admin:s3cret-pw').toString('base64')}`;

/** Sends raw bytes on one connection and collects everything the proxy answers until it closes. */
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      answer += chunk;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
    socket.setTimeout(5000, () => socket.destroy());
    socket.write(text);
  });
}

const statusesOf = (answer: string) =>
  [...answer.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));

describe('no unauthenticated request reaches a protected path', () => {
  let app: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    app = await startUpstream({ name: 'app' });
    const basic = { type: 'basic', creds: 'admin:s3cret-pw' };
    tollgate = await startTollgate({
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers: [app.address] },
              '/admin': { servers: [app.address], authorization: basic },
              '/api/admin': { servers: [app.address], authorization: basic },
            },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await app?.close();
  });

  /** The request must be refused, and the upstream must not have seen it. */
  async function assertNotForwarded(target: string, expected: number[], method = 'GET'): Promise<void> {
    const before = app.requests.length;
    const answer = await rawExchange(
      tollgate.proxyPort,
      `${method} ${target} HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
    );
    const [status] = statusesOf(answer);
    assert.ok(status !== undefined && expected.includes(status), `${method} ${target} → ${status}`);
    assert.deepEqual(
      app.requests.slice(before).map((r) => r.url),
      [],
      `${method} ${target} reached the upstream`,
    );
  }

  it('path parameters cannot move a protected path onto an open route (servlet containers drop them)', async () => {
    // Tomcat, Jetty and Spring serve `/admin;x/secret` as `/admin/secret` and `/;x/admin` as `/admin`.
    for (const target of [
      '/admin;x',
      '/admin;jsessionid=1/secret',
      '/;x/admin',
      '/;/admin/users',
      '/api;a/admin',
      '/api/admin;',
    ]) {
      await assertNotForwarded(target, [400, 401]);
    }
  });

  it('path parameters that do not change the route still work', async () => {
    const open = await request(tollgate.proxyUrl, {
      path: '/shop;jsessionid=1/cart',
      headers: { host: HOST },
    });
    assert.equal(open.status, 200);
    assert.equal(open.json<{ url: string }>().url, '/shop;jsessionid=1/cart');
    assert.equal(
      (await request(tollgate.proxyUrl, { path: '/admin/page;jsessionid=1', headers: { host: HOST } }))
        .status,
      401,
    );
    const authorised = await request(tollgate.proxyUrl, {
      path: '/admin/page;jsessionid=1',
      headers: { host: HOST, authorization: ADMIN },
    });
    assert.equal(authorised.status, 200);
    assert.equal(authorised.json<{ url: string }>().url, '/admin/page;jsessionid=1');
  });

  it('encodings, dot-segments, repeated slashes and absolute-form targets are routed as the upstream sees them', async () => {
    for (const target of [
      '//admin',
      '/%61dmin',
      '/adm%69n/x',
      '/%2e/admin',
      '/x/%2E%2E/admin',
      '/x/../admin',
    ]) {
      await assertNotForwarded(target, [401]);
    }
    for (const target of ['/x/..%2fadmin', '/x%5c..%5cadmin', '/x\\..\\admin', `http://${HOST}/admin`, '*']) {
      await assertNotForwarded(target, [400]);
    }
  });

  it('every method is authenticated, HEAD, OPTIONS and TRACE included; CONNECT is never tunnelled', async () => {
    for (const method of ['HEAD', 'OPTIONS', 'TRACE', 'DELETE', 'PROPFIND']) {
      await assertNotForwarded('/admin', [401], method);
    }
    const before = app.requests.length;
    const answer = await rawExchange(
      tollgate.proxyPort,
      `CONNECT ${app.address} HTTP/1.1\r\nHost: ${app.address}\r\n\r\n`,
    );
    assert.ok(!/^HTTP\/1\.[01] 2/.test(answer), answer);
    assert.equal(app.requests.length, before);
  });

  it('credentials belong to one request: a pipelined or kept-alive request after an authenticated one is refused', async () => {
    const before = app.requests.length;
    const answer = await rawExchange(
      tollgate.proxyPort,
      `GET /admin/a HTTP/1.1\r\nHost: ${HOST}\r\nAuthorization: ${ADMIN}\r\n\r\n` +
        `GET /admin/b HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
    );
    assert.deepEqual(statusesOf(answer), [200, 401]);
    assert.deepEqual(
      app.requests.slice(before).map((r) => r.url),
      ['/admin/a'],
    );
    const http10 = await rawExchange(
      tollgate.proxyPort,
      `GET /admin/c HTTP/1.0\r\nHost: ${HOST}\r\nConnection: keep-alive\r\nAuthorization: ${ADMIN}\r\n\r\n` +
        `GET /admin/d HTTP/1.0\r\nHost: ${HOST}\r\n\r\n`,
    );
    assert.deepEqual(statusesOf(http10), [200, 401]);
  });

  it('with repeated Authorization headers the first is checked and none is forwarded; X-Tollgate-Subject in any case is dropped', async () => {
    const before = app.requests.length;
    const answer = await rawExchange(
      tollgate.proxyPort,
      `GET /admin/dup HTTP/1.1\r\nHost: ${HOST}\r\nAuthorization: ${ADMIN}\r\nauthorization: Bearer second\r\n` +
        'X-Tollgate-Subject: root\r\nx-TOLLGATE-subject: root\r\nConnection: close\r\n\r\n',
    );
    assert.deepEqual(statusesOf(answer), [200]);
    const seen = app.requests.slice(before);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.headers.authorization, undefined);
    assert.equal(seen[0]?.headers['x-tollgate-subject'], 'admin');

    const wrongFirst = await rawExchange(
      tollgate.proxyPort,
      `GET /admin/dup HTTP/1.1\r\nHost: ${HOST}\r\nAuthorization: Basic eDp5\r\nAuthorization: ${ADMIN}\r\n` +
        'Connection: close\r\n\r\n',
    );
    assert.deepEqual(statusesOf(wrongFirst), [401]);
    assert.equal(app.requests.length, before + 1);
  });

  it('Host tricks: case, port and a trailing dot reach the same policy; a second Host header is refused', async () => {
    for (const host of [HOST.toUpperCase(), `${HOST}.`, `${HOST}:1234`, `${HOST}.:80`]) {
      const res = await request(tollgate.proxyUrl, { path: '/admin', headers: { host } });
      assert.equal(res.status, 401, host);
    }
    const before = app.requests.length;
    const answer = await rawExchange(
      tollgate.proxyPort,
      `GET /admin HTTP/1.1\r\nHost: other.example\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
    );
    assert.deepEqual(statusesOf(answer), [400]);
    assert.equal(app.requests.length, before);
  });
});
