import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { WebSocketServer } from 'ws';
import { hasOpenssl, type SelfSigned, selfSigned } from '../helpers/certs.ts';
import { testScope } from '../helpers/scope.ts';
import {
  type ProtocolUpstreamOptions,
  type SeenRequest,
  startProtocolUpstream,
} from '../helpers/tls-upstream.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { mustOpen, nextMessage } from '../helpers/websocket.ts';

const scope = testScope();
const skip = hasOpenssl() ? false : 'openssl is not available';
const files = mkdtempSync(join(tmpdir(), 'tollgate-upstream-tls-'));
let fileCount = 0;

/** Writes `content` to a fresh file and returns its absolute path. */
function pemFile(content: Buffer | string): string {
  const path = join(files, `file-${++fileCount}.pem`);
  writeFileSync(path, content);
  return path;
}

const upstream = async (options: ProtocolUpstreamOptions) => scope.keep(await startProtocolUpstream(options));

function proxyFor(path: Record<string, unknown>, main: Record<string, unknown> = {}): Promise<Tollgate> {
  return scope.tollgate({ upstreams: { upstreams: { 'app.test': { paths: { '/': path } } } }, main });
}

const get = (tollgate: Tollgate, headers: Record<string, string> = {}) =>
  request(tollgate.proxyUrl, { path: '/x', headers: { host: 'app.test', ...headers } });

async function seen(tollgate: Tollgate): Promise<SeenRequest> {
  const res = await get(tollgate);
  assert.equal(res.status, 200, res.body);
  return res.json<SeenRequest>();
}

async function refused(tollgate: Tollgate): Promise<void> {
  const res = await get(tollgate);
  assert.equal(res.status, 502, res.body);
  assert.equal(res.json<{ error: string }>().error, 'bad_gateway');
}

describe('TLS to upstreams', { skip }, () => {
  let backend: SelfSigned;
  let named: SelfSigned;
  it('prepares certificates', () => {
    backend = selfSigned('backend.test');
    named = selfSigned('backend.internal', { ip: false });
  });

  it('verifies an https:// server against upstream_ca_file and keeps plain servers plain', async () => {
    const secure = await upstream({ tls: backend, name: 'secure' });
    const tollgate = await proxyFor(
      { servers: [secure.address] },
      { upstream_ca_file: pemFile(backend.cert) },
    );
    const answer = await seen(tollgate);
    assert.equal(answer.server, 'secure');
    assert.equal(answer.alpn, 'http/1.1', 'TLS with ALPN, the server only offers HTTP/1.1');
    assert.equal(answer.sni, null, 'no SNI for an IP address (RFC 6066)');
    assert.equal(answer.headers.host, 'app.test', "the client's Host still reaches the upstream");
    assert.equal(answer.headers['x-forwarded-proto'], 'http');
  });

  it('refuses (502) a server whose certificate no trusted CA signed, counted as kind="tls"', async () => {
    const secure = await upstream({ tls: backend });
    const other = selfSigned('other.test');
    const tollgate = await proxyFor({ servers: [secure.address] }, { upstream_ca_file: pemFile(other.cert) });
    await refused(tollgate);
    assert.equal(secure.seen.length, 0);
    const metrics = await tollgate.metrics();
    assert.match(
      metrics,
      new RegExp(
        `tollgate_upstream_errors_total\\{route="app\\.test/",server="${secure.address}",kind="tls"\\} 1`,
      ),
    );
  });

  it('logs why TLS failed (one warn line per server and code, rate-limited), with no credential', async () => {
    const secure = await upstream({ tls: backend });
    const h1only = await upstream({ tls: named });
    const ca = pemFile(backend.cert);
    const tollgate = await scope.tollgate({
      upstreams: {
        upstreams: {
          'app.test': {
            paths: {
              '/unknown-ca': { servers: [secure.address], upstream_tls: { ca_file: pemFile(named.cert) } },
              // backend.test's certificate, checked against another name.
              '/wrong-name': {
                servers: [secure.address],
                upstream_tls: { ca_file: ca, server_name: 'x.test' },
              },
              '/no-h2': {
                servers: [h1only.address],
                upstream_tls: { ca_file: pemFile(named.cert), server_name: 'backend.internal' },
                upstream_protocol: 'h2',
              },
            },
          },
        },
      },
    });
    const secret = 'Basic c2VjcmV0LXVzZXI6c2VjcmV0LXBhc3N3b3Jk';
    for (const path of ['/unknown-ca/a?tollgatetoken=secret-token', '/wrong-name/b', '/no-h2/c']) {
      for (let i = 0; i < 3; i++) {
        const res = await request(tollgate.proxyUrl, {
          path,
          headers: { host: 'app.test', authorization: secret, cookie: 'session=secret-cookie' },
        });
        assert.equal(res.status, 502, `${path}: ${res.body}`);
      }
    }
    const failures = () => tollgate.logs().filter((line) => line.event === 'upstream_tls_failed');
    await waitFor(() => failures().length >= 3);
    const byRoute = new Map(failures().map((line) => [line.route, line]));
    assert.equal(failures().length, 3, 'three failures of one server and code: one line');
    const unknownCa = byRoute.get('app.test/unknown-ca');
    assert.equal(unknownCa?.level, 'warn');
    assert.equal(unknownCa?.server, secure.address);
    assert.match(String(unknownCa?.code), /SELF_SIGNED|UNABLE_TO_VERIFY/);
    const wrongName = byRoute.get('app.test/wrong-name');
    assert.equal(wrongName?.code, 'ERR_TLS_CERT_ALTNAME_INVALID');
    assert.equal(wrongName?.server_name, 'x.test');
    assert.match(String(wrongName?.reason), /x\.test/);
    const noH2 = byRoute.get('app.test/no-h2');
    assert.equal(noH2?.code, 'TOLLGATE_NO_H2');
    assert.equal(noH2?.server, h1only.address);
    assert.match(String(noH2?.reason), /ALPN/);
    const text = JSON.stringify(failures());
    for (const secretPart of ['secret-token', 'c2VjcmV0', 'secret-cookie', '/unknown-ca/a']) {
      assert.ok(!text.includes(secretPart), `${secretPart} in a TLS failure line`);
    }
  });

  it('fails over to the next server when a TLS handshake fails (nothing was sent)', async () => {
    const untrusted = await upstream({ tls: selfSigned('untrusted.test'), name: 'untrusted' });
    const trusted = await upstream({ tls: backend, name: 'trusted' });
    const tollgate = await proxyFor({
      servers: [untrusted.address, trusted.address],
      upstream_tls: { ca_file: pemFile(backend.cert) },
    });
    for (let i = 0; i < 3; i++) assert.equal((await seen(tollgate)).server, 'trusted');
  });

  it('takes a per-path ca_file, and verify: false only when written out (logged at start)', async () => {
    const secure = await upstream({ tls: backend });
    const byPath = await proxyFor({
      servers: [secure.address],
      upstream_tls: { ca_file: pemFile(backend.cert) },
    });
    assert.equal((await seen(byPath)).alpn, 'http/1.1');

    const unchecked = await proxyFor({ servers: [secure.address], upstream_tls: { verify: false } });
    assert.equal((await seen(unchecked)).alpn, 'http/1.1');
    const warning = unchecked.logs().find((line) => String(line.msg).includes('verify: false'));
    assert.ok(warning, 'verify: false is logged at start');
    assert.deepEqual(warning.routes, ['app.test/']);

    const defaults = await proxyFor({ servers: [secure.address] });
    await refused(defaults);
  });

  it('sends server_name as SNI and checks the certificate against it', async () => {
    const secure = await upstream({ tls: named });
    const ca = pemFile(named.cert);
    const withName = await proxyFor({
      servers: [secure.address],
      upstream_tls: { ca_file: ca, server_name: 'backend.internal' },
    });
    const answer = await seen(withName);
    assert.equal(answer.sni, 'backend.internal');
    assert.equal(answer.headers.host, 'app.test');
    // The certificate names backend.internal only, not 127.0.0.1.
    const withoutName = await proxyFor({ servers: [secure.address], upstream_tls: { ca_file: ca } });
    await refused(withoutName);
  });

  it('presents a client certificate to an upstream that requires one (mTLS)', async () => {
    const client = selfSigned('tollgate-client');
    const secure = await upstream({ tls: backend, clientCa: client.cert });
    const ca = pemFile(backend.cert);
    const withCert = await proxyFor({
      servers: [secure.address],
      upstream_tls: { ca_file: ca, certificate: pemFile(client.cert), key: pemFile(client.key) },
    });
    assert.equal((await seen(withCert)).clientCn, 'tollgate-client');
    const withoutCert = await proxyFor({ servers: [secure.address], upstream_tls: { ca_file: ca } });
    await refused(withoutCert);
  });

  it('speaks HTTP/2 to a TLS server that offers h2 by ALPN, and HTTP/1.1 when told to', async () => {
    const h2 = await upstream({ tls: backend, h2: true });
    const ca = pemFile(backend.cert);
    const auto = await proxyFor({ servers: [h2.address], upstream_tls: { ca_file: ca } });
    const viaAuto = await seen(auto);
    assert.equal(viaAuto.httpVersion, '2.0');
    assert.equal(viaAuto.alpn, 'h2');
    assert.equal(viaAuto.headers[':authority'], 'app.test', 'the Host becomes :authority');
    // Several requests at once share the HTTP/2 connection's streams.
    const answers = await Promise.all(Array.from({ length: 5 }, () => get(auto)));
    assert.deepEqual(
      answers.map((res) => res.status),
      [200, 200, 200, 200, 200],
    );

    const http1 = await proxyFor({
      servers: [h2.address],
      upstream_tls: { ca_file: ca },
      upstream_protocol: 'http1',
    });
    assert.equal((await seen(http1)).httpVersion, '1.1');
  });

  it('upstream_protocol h2 refuses a TLS server that does not agree to HTTP/2 (502)', async () => {
    const h1only = await upstream({ tls: backend });
    const tollgate = await proxyFor({
      servers: [h1only.address],
      upstream_tls: { ca_file: pemFile(backend.cert) },
      upstream_protocol: 'h2',
    });
    await refused(tollgate);
    assert.match(await tollgate.metrics(), /tollgate_upstream_errors_total\{[^}]*kind="tls"\} 1/);
  });

  it('speaks h2c with prior knowledge to a plain server (upstream_protocol h2c, and gRPC under auto)', async () => {
    const h2c = await upstream({ h2: true });
    const forced = await proxyFor({ servers: [h2c.address], upstream_protocol: 'h2c' });
    assert.equal((await seen(forced)).httpVersion, '2.0');

    const auto = await proxyFor({ servers: [h2c.address] });
    const grpc = await get(auto, { 'content-type': 'application/grpc+proto', te: 'trailers' });
    assert.equal(grpc.status, 200, grpc.body);
    const answer = grpc.json<SeenRequest>();
    assert.equal(answer.httpVersion, '2.0');
    assert.equal(answer.headers.te, 'trailers', 'TE: trailers reaches a gRPC upstream');
    // Anything else under auto stays HTTP/1.1, which an h2c-only server cannot answer.
    const plain = await get(auto);
    assert.equal(plain.status, 502);
  });

  it('relays response trailers to an HTTP/1.1 client', async () => {
    const h2c = await upstream({
      h2: true,
      handler: (_req, res) => {
        const h2res = res as import('node:http2').Http2ServerResponse;
        h2res.writeHead(200, { 'content-type': 'application/grpc' });
        h2res.write('message');
        h2res.addTrailers({ 'grpc-status': '0', 'grpc-message': 'ok' });
        h2res.end();
      },
    });
    const tollgate = await proxyFor({ servers: [h2c.address], upstream_protocol: 'h2c' });
    const { default: http } = await import('node:http');
    const trailers = await new Promise<NodeJS.Dict<string>>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: tollgate.proxyPort,
          path: '/',
          headers: { host: 'app.test', te: 'trailers' },
          agent: false,
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.trailers));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end();
    });
    assert.equal(trailers['grpc-status'], '0');
    assert.equal(trailers['grpc-message'], 'ok');
  });

  it('opens WebSockets to a TLS server over HTTP/1.1, even on a path that speaks h2 to it', async () => {
    const server = https.createServer({ cert: backend.cert, key: backend.key });
    const wss = new WebSocketServer({ server });
    wss.on('connection', (socket) => socket.on('message', (data) => socket.send(`tls:${data}`)));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    scope.keep({
      close: async () => {
        for (const client of wss.clients) client.terminate();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      },
    });
    const { port } = server.address() as AddressInfo;
    const tollgate = await proxyFor({
      servers: [`https://127.0.0.1:${port}`],
      upstream_tls: { ca_file: pemFile(backend.cert) },
      upstream_protocol: 'h2',
    });
    const socket = await mustOpen(`ws://127.0.0.1:${tollgate.proxyPort}/ws`, { host: 'app.test' });
    const reply = nextMessage(socket);
    socket.send('hello');
    assert.equal((await reply).data.toString(), 'tls:hello');
    socket.terminate();
  });

  it('runs active health checks over TLS, with the same settings as the traffic', async () => {
    const secure = await upstream({ tls: named, h2: true });
    const tollgate = await proxyFor({
      servers: [secure.address],
      upstream_tls: { ca_file: pemFile(named.cert), server_name: 'backend.internal' },
      health_check: { path: '/healthz', interval_seconds: 0.2 },
    });
    await waitFor(() => secure.seen.some((r) => r.url === '/healthz'), 15_000);
    const check = secure.seen.find((r) => r.url === '/healthz') as SeenRequest;
    assert.equal(check.sni, 'backend.internal');
    assert.match(
      await tollgate.metrics(),
      /tollgate_upstream_up\{route="app\.test\/",server="https:\/\/127\.0\.0\.1:\d+"\} 1/,
    );
  });

  it('reloads upstream_ca_file: a broken change keeps the last good copy, a good one applies', async () => {
    const secure = await upstream({ tls: backend });
    const caPath = pemFile(backend.cert);
    const tollgate = await proxyFor({ servers: [secure.address] }, { upstream_ca_file: caPath });
    await seen(tollgate);
    writeFileSync(caPath, 'not a certificate\n');
    await waitFor(
      async () =>
        /tollgate_config_reloads_total\{file="upstream_tls",result="failure"\} 1/.test(
          await tollgate.metrics(),
        ),
      15_000,
    );
    await seen(tollgate);
    writeFileSync(caPath, selfSigned('someone-else.test').cert);
    await waitFor(
      async () =>
        /tollgate_config_reloads_total\{file="upstream_tls",result="success"\} 1/.test(
          await tollgate.metrics(),
        ),
      15_000,
    );
    await refused(tollgate);
  });
});
