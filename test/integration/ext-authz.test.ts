import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { hasOpenssl, type IssuedCertificate, selfSigned, TestCa } from '../helpers/certs.ts';
import { allow, deny, type ExtAuthzServer, startExtAuthzServer } from '../helpers/ext-authz-server.ts';
import { h2Request } from '../helpers/h2-client.ts';
import { testScope } from '../helpers/scope.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Echo } from '../helpers/upstream.ts';

/**
 * External authorization (docs/authentication.md#external-authorization) through the built process,
 * against a real grpc-js server speaking Envoy's Authorization/Check from .proto files.
 */

describe('ext_authz: Envoy Authorization/Check over gRPC', () => {
  const scope = testScope();
  let tollgate: Tollgate;
  let authz: ExtAuthzServer;
  let secureAuthz: ExtAuthzServer | null = null;
  const held: Array<() => void> = [];
  let active = 0;
  let mostActive = 0;
  let caFile = '';
  let upstreamRequests: () => Array<{ url: string; headers: Record<string, unknown>; bodyBytes: number }>;

  before(async () => {
    authz = scope.keep(
      await startExtAuthzServer((check) => {
        const path: string = check.attributes.request.http.path;
        if (path.startsWith('/deny-split'))
          return deny(403, { 'x-ok': 'fine', 'x-split': 'a\r\nset-cookie: evil=1', 'bad name': 'x' }, 'no');
        if (path.startsWith('/allow-split'))
          return allow({ set: { 'x-user': 'alice\r\nx-admin: yes', 'x-fine': 'yes' } });
        if (path.startsWith('/allow') || path.startsWith('/body') || path.startsWith('/open'))
          return allow({
            set: { 'x-user': 'alice', 'x-tollgate-subject': 'admin' },
            append: { 'x-extra': 'from-authz' },
            remove: ['x-remove-me'],
            responseHeaders: { 'x-authz': 'yes' },
          });
        if (path.startsWith('/deny-bare')) return { status: { code: grpc.status.PERMISSION_DENIED } };
        if (path.startsWith('/deny'))
          return deny(401, { 'www-authenticate': 'Bearer realm="opa"', 'x-reason': 'no token' }, 'nope');
        if (path.startsWith('/hang')) return 'hang';
        if (path.startsWith('/slow')) {
          active++;
          mostActive = Math.max(mostActive, active);
          return new Promise((resolve) =>
            held.push(() => {
              active--;
              resolve(allow());
            }),
          );
        }
        if (path.startsWith('/garbage')) return Buffer.from([0xff, 0xff, 0xff, 0x07, 0x01]);
        if (path.startsWith('/empty')) return Buffer.alloc(0);
        return { error: grpc.status.INTERNAL, message: 'policy engine broke' };
      }),
    );
    if (hasOpenssl()) {
      const serving = selfSigned('authz.test', { ip: false });
      const dir = mkdtempSync(join(tmpdir(), 'tollgate-extauthz-ca-'));
      writeFileSync(join(dir, 'authz-ca.pem'), serving.cert);
      caFile = join(dir, 'authz-ca.pem');
      secureAuthz = scope.keep(
        await startExtAuthzServer(() => allow({ set: { 'x-via': 'tls' } }), { tls: serving }),
      );
    }
    const dead = await scope.deadServer();
    const upstream = await scope.upstream();
    upstreamRequests = () => upstream.requests as never;
    const route = (extra: Record<string, unknown> = {}) => ({
      servers: [upstream.address],
      // Generous on a loaded test machine; /hang and /down keep the default-sized 300 ms.
      authorization: { type: 'ext_authz', grpc: { address: authz.address }, timeout_ms: 5_000, ...extra },
    });
    tollgate = await scope.tollgate({
      upstreams: {
        upstreams: {
          'app.test': {
            paths: {
              '/': route(),
              '/body': route({ include_body_bytes: 16 }),
              '/hang': route({ timeout_ms: 300 }),
              '/down': route({ grpc: { address: dead }, timeout_ms: 300 }),
              '/open': route({ grpc: { address: dead }, fail_open: true }),
              '/slow': route({ timeout_ms: 30_000 }),
              ...(secureAuthz === null
                ? {}
                : {
                    '/tls': route({
                      grpc: {
                        address: secureAuthz.address,
                        tls: { ca_file: caFile, server_name: 'authz.test' },
                      },
                    }),
                    '/tls-untrusted': route({ grpc: { address: secureAuthz.address, tls: true } }),
                  }),
            },
          },
        },
      },
    });
  });

  const get = (path: string, headers: Record<string, string> = {}, body?: string) =>
    request(`${tollgate.proxyUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { host: 'app.test', ...headers },
      ...(body === undefined ? {} : { body }),
    });

  it('OK: the answer sets, appends and removes headers upstream, and adds response headers', async () => {
    const answer = await get('/allow/x?tollgatetoken=secret&q=1', {
      'x-user': 'mallory',
      'x-extra': 'client',
      'x-remove-me': 'please',
      authorization: 'Bearer abc',
    });
    assert.equal(answer.status, 200, answer.body);
    assert.equal(answer.headers['x-authz'], 'yes');
    const echo = answer.json<Echo>();
    assert.equal(echo.headers['x-user'], 'alice');
    assert.equal(echo.headers['x-extra'], 'client, from-authz');
    assert.equal(echo.headers['x-remove-me'], undefined);
    // A header Tollgate writes itself is not the authorization service's to set.
    assert.equal(echo.headers['x-tollgate-subject'], undefined);
    const check = authz.checks.at(-1);
    const http = check.attributes.request.http;
    assert.equal(http.method, 'GET');
    assert.equal(http.host, 'app.test');
    // The token parameter never leaves Tollgate, not even to the authorization service.
    assert.equal(http.path, '/allow/x?q=1');
    assert.equal(http.scheme, 'http');
    assert.equal(http.protocol, 'HTTP/1.1');
    assert.equal(http.headers.authorization, 'Bearer abc');
    assert.equal(http.headers['x-user'], 'mallory');
    assert.equal(check.attributes.source.address.socket_address.address, '127.0.0.1');
    assert.ok(check.attributes.request.time.seconds > 0);
  });

  it('DENIED: the denied response is relayed (status, headers, body); without one, 403', async () => {
    const denied = await get('/deny');
    assert.equal(denied.status, 401);
    assert.equal(denied.headers['www-authenticate'], 'Bearer realm="opa"');
    assert.equal(denied.headers['x-reason'], 'no token');
    assert.equal(denied.body, 'nope');
    const bare = await get('/deny-bare');
    assert.equal(bare.status, 403);
    // Header values that are not field values (CR LF) are dropped, never written.
    const split = await get('/deny-split');
    assert.equal(split.status, 403);
    assert.equal(split.headers['x-ok'], 'fine');
    assert.equal(split.headers['x-split'], undefined);
    assert.equal(split.headers['set-cookie'], undefined);
    const passed = await get('/allow-split');
    assert.equal(passed.status, 200);
    assert.equal(passed.json<Echo>().headers['x-user'], undefined);
    assert.equal(passed.json<Echo>().headers['x-admin'], undefined);
    assert.equal(passed.json<Echo>().headers['x-fine'], 'yes');
    const before = upstreamRequests().length;
    await get('/deny');
    assert.equal(upstreamRequests().length, before, 'a denied request never reaches the upstream');
  });

  it('an error, garbage, an empty answer, a hang or no service: 503 auth_unavailable within the timeout', async () => {
    for (const path of ['/error', '/garbage', '/empty', '/down']) {
      const answer = await get(path);
      assert.equal(answer.status, 503, path);
      assert.equal(answer.json<{ error: string }>().error, 'auth_unavailable', path);
    }
    const started = performance.now();
    const hung = await get('/hang');
    const elapsed = performance.now() - started;
    assert.equal(hung.status, 503);
    assert.ok(elapsed < 2_000, `answered after ${Math.round(elapsed)} ms`);
    // fail_open: the same unreachable service lets the request through, untouched.
    const open = await get('/open');
    assert.equal(open.status, 200);
    assert.equal(open.json<Echo>().headers['x-user'], undefined);
  });

  it('include_body_bytes: the check carries the first bytes; the upstream still gets the whole body', async () => {
    const body = 'hello authorization service, here is more than sixteen bytes';
    const answer = await get('/body', { 'content-type': 'text/plain' }, body);
    assert.equal(answer.status, 200);
    assert.equal(answer.json<{ bodyBytes: number }>().bodyBytes, Buffer.byteLength(body));
    const http = authz.checks.at(-1).attributes.request.http;
    assert.equal(http.body, body.slice(0, 16));
    assert.equal(Number(http.size), Buffer.byteLength(body));
  });

  it('at most 128 checks are in flight to one service; the rest wait for a slot', async () => {
    const requests = Array.from({ length: 160 }, (_, i) => get(`/slow/${i}`));
    await waitFor(() => active === 128, 30_000);
    for (const release of held.splice(0)) release();
    // The waiting ones get slots as these end; release them as they come.
    const releasing = setInterval(() => {
      for (const release of held.splice(0)) release();
    }, 20);
    const answers = await Promise.all(requests);
    clearInterval(releasing);
    assert.deepEqual([...new Set(answers.map((answer) => answer.status))], [200]);
    assert.equal(mostActive, 128);
  });

  it('grpc.tls: a TLS channel trusting ca_file, with server_name; an untrusted service is unavailable', {
    skip: hasOpenssl() ? false : 'no openssl',
  }, async () => {
    const answer = await get('/tls/x');
    assert.equal(answer.status, 200, answer.body);
    assert.equal(answer.json<Echo>().headers['x-via'], 'tls');
    assert.equal((await get('/tls-untrusted/x')).status, 503);
  });

  it('one gRPC channel, reused, carries every check of every route naming the service', async () => {
    await Promise.all(Array.from({ length: 20 }, (_, i) => get(`/allow/${i}`)));
    assert.ok(authz.checks.length > 20);
    assert.equal(authz.peers.size, 1, [...authz.peers].join(' '));
  });
});

describe('ext_authz with client certificates: the principal is the certificate URI SAN', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let tollgate: Tollgate;
  let authz: ExtAuthzServer;
  let client: IssuedCertificate;

  before(async () => {
    const ca = new TestCa('Clients CA');
    scope.keep({ close: async () => ca.remove() });
    client = ca.issue('svc', { uris: ['spiffe://cluster.local/ns/payments/sa/api'] });
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-extauthz-'));
    const serving = selfSigned('app.test');
    writeFileSync(join(dir, 'tls.crt'), serving.cert);
    writeFileSync(join(dir, 'tls.key'), serving.key);
    writeFileSync(join(dir, 'ca.crt'), ca.cert);
    authz = scope.keep(await startExtAuthzServer(() => allow()));
    const upstream = await scope.upstream();
    tollgate = await scope.tollgate({
      main: {
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: join(dir, 'tls.crt'),
        tls_key_file: join(dir, 'tls.key'),
        tls_client_certificates: { ca_file: join(dir, 'ca.crt'), mode: 'optional' },
      },
      upstreams: {
        upstreams: {
          'app.test': {
            paths: {
              '/': {
                servers: [upstream.address],
                authorization: { type: 'ext_authz', grpc: { address: authz.address }, timeout_ms: 5_000 },
              },
            },
          },
        },
      },
    });
  });

  it('source.principal and source.certificate come from the verified certificate; HTTP/2 protocol', async () => {
    const session = http2.connect(`https://127.0.0.1:${tollgate.tlsPort}`, {
      servername: 'app.test',
      rejectUnauthorized: false,
      cert: client.cert,
      key: client.key,
    });
    try {
      const answer = await h2Request(session, { ':path': '/x', ':authority': 'app.test' });
      assert.equal(answer.status, 200);
    } finally {
      session.close();
    }
    const check = authz.checks.at(-1);
    assert.equal(check.attributes.source.principal, 'spiffe://cluster.local/ns/payments/sa/api');
    assert.equal(decodeURIComponent(check.attributes.source.certificate), client.pem);
    assert.equal(check.attributes.request.http.protocol, 'HTTP/2');
    assert.equal(check.attributes.request.http.scheme, 'https');
    assert.equal(check.attributes.tls_session.sni, 'app.test');
    // Without a certificate: no principal.
    await new Promise<void>((resolve, reject) => {
      https
        .get(
          {
            host: '127.0.0.1',
            port: tollgate.tlsPort as number,
            servername: 'app.test',
            path: '/y',
            headers: { host: 'app.test' },
            rejectUnauthorized: false,
            agent: false,
          },
          (res) => {
            res.resume();
            res.on('end', resolve);
          },
        )
        .on('error', reject);
    });
    assert.equal(authz.checks.at(-1).attributes.source.principal, '');
  });
});
