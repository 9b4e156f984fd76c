import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { hasOpenssl, SecretVolume, type SelfSigned, selfSigned } from '../helpers/certs.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { freePort, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/** A keep-alive TLS connection to the proxy that can send several requests in turn. */
async function connect(port: number): Promise<tls.TLSSocket> {
  const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, servername: 'app.test' });
  // A handshake that never completes fails the test instead of hanging it (once() rejects on 'error').
  socket.setTimeout(10_000, () => socket.destroy(new Error('TLS handshake timed out')));
  await once(socket, 'secureConnect');
  socket.setTimeout(0);
  return socket;
}

/** Sends one GET on an open connection and resolves with the status line and body. */
function get(socket: tls.TLSSocket, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let raw = '';
    const onData = (chunk: Buffer) => {
      raw += chunk.toString('utf8');
      const end = raw.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/content-length: (\d+)/i.exec(raw.slice(0, end))?.[1] ?? 0);
      if (raw.length < end + 4 + length) return;
      socket.off('data', onData);
      resolve({ status: Number(raw.slice(9, 12)), body: raw.slice(end + 4, end + 4 + length) });
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: app.test\r\n\r\n`);
  });
}

async function servedFingerprint(port: number): Promise<string> {
  const socket = await connect(port);
  const fingerprint = socket.getPeerCertificate().fingerprint256;
  socket.destroy();
  return fingerprint;
}

describe('TLS listener: certificate replaced on disk', { skip: hasOpenssl() ? false : 'no openssl' }, () => {
  let upstream: Upstream;
  let tollgate: Tollgate;
  let volume: SecretVolume;
  let tlsPort: number;
  let first: SelfSigned;
  let second: SelfSigned;

  before(async () => {
    first = selfSigned('app.test');
    second = selfSigned('app.test');
    volume = new SecretVolume({ 'tls.crt': first.cert, 'tls.key': first.key });
    upstream = await startUpstream();
    // Port 0: the process binds a free port and reports it (a port chosen here could be taken).
    tollgate = await startTollgate({
      main: {
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
      },
      upstreams: { upstreams: { 'app.test': { paths: { '/': { servers: [upstream.address] } } } } },
    });
    tlsPort = tollgate.tlsPort as number;
  });
  after(async () => {
    await tollgate.stop();
    await upstream.close();
    volume.remove();
  });

  it('serves the certificate from the mounted Secret', async () => {
    assert.equal(await servedFingerprint(tlsPort), first.fingerprint256);
  });

  it('serves the new certificate on the next handshake without dropping open connections', async () => {
    const open = await connect(tlsPort);
    assert.equal((await get(open, '/before')).status, 200);

    const swappedAt = Date.now();
    volume.swap({ 'tls.crt': second.cert, 'tls.key': second.key }); // the kubelet's ..data swap
    await waitFor(async () => (await servedFingerprint(tlsPort)) === second.fingerprint256, 10_000);
    // Within a second, by the process's own clock: the reload line's time against the swap's.
    const reloaded = tollgate.logs().find((line) => line.msg === 'TLS certificate reloaded');
    const delay = Date.parse(String(reloaded?.time)) - swappedAt;
    assert.ok(delay <= 1_000, `the new certificate was applied after ${delay} ms`);
    assert.equal(
      reloaded?.certificate && (reloaded.certificate as { fingerprint256: string }).fingerprint256,
      second.fingerprint256,
    );

    // The connection opened before the swap keeps its session and keeps serving requests.
    const after = await get(open, '/after');
    assert.equal(after.status, 200);
    assert.equal(JSON.parse(after.body).url, '/after');
    assert.equal(open.getPeerCertificate().fingerprint256, first.fingerprint256);
    open.destroy();
    assert.equal(reloadCount(await tollgate.metrics(), 'tls_certificate', 'success'), 1);
  });

  it('keeps serving the current certificate when the new files are broken, and logs it', async () => {
    volume.swap({ 'tls.crt': 'garbage', 'tls.key': second.key });
    await waitFor(
      () => tollgate.logs().some((line) => String(line.msg).startsWith('TLS certificate not reloaded')),
      10_000,
    );
    assert.equal(await servedFingerprint(tlsPort), second.fingerprint256);
    const socket = await connect(tlsPort);
    const res = await get(socket, '/still-up');
    socket.destroy();
    assert.equal(res.status, 200);
    assert.ok(!tollgate.stdout().includes('PRIVATE KEY'), 'key material never reaches the logs');
    assert.equal(reloadCount(await tollgate.metrics(), 'tls_certificate', 'failure'), 1, 'counted');
  });
});

describe('TLS listener at start', { skip: hasOpenssl() ? false : 'no openssl' }, () => {
  it('refuses to start when the key does not match the certificate', async () => {
    const a = selfSigned('a.test');
    const b = selfSigned('b.test');
    const volume = new SecretVolume({ 'tls.crt': a.cert, 'tls.key': b.key });
    const tollgate = await startTollgate({
      main: {
        proxy_address_tls: `127.0.0.1:${await freePort()}`,
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
      },
      upstreams: { upstreams: { DEFAULT: { paths: { '/': { servers: ['127.0.0.1:9'] } } } } },
      waitReady: false,
    });
    try {
      assert.equal(await tollgate.exited, 1);
      assert.match(
        tollgate.stderr(),
        /tls_key_file: the private key in .*tls\.key does not match the certificate in .*tls\.crt/,
      );
    } finally {
      await tollgate.stop();
      volume.remove();
    }
  });
});
