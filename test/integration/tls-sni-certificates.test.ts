import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { hasOpenssl, SecretVolume, type SelfSigned, selfSigned } from '../helpers/certs.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { testScope } from '../helpers/scope.ts';
import { type Tollgate, waitFor } from '../helpers/tollgate.ts';

/** The fingerprint and ALPN protocol a handshake with `servername` (none when undefined) gets. */
async function handshake(
  port: number,
  servername?: string,
): Promise<{ fingerprint: string; alpn: string | false | null }> {
  const socket = tls.connect({
    host: '127.0.0.1',
    port,
    rejectUnauthorized: false,
    ALPNProtocols: ['h2', 'http/1.1'],
    ...(servername ? { servername } : {}),
  });
  socket.setTimeout(10_000, () => socket.destroy(new Error('TLS handshake timed out')));
  await once(socket, 'secureConnect');
  const result = { fingerprint: socket.getPeerCertificate().fingerprint256, alpn: socket.alpnProtocol };
  socket.destroy();
  return result;
}

describe('several certificates chosen by SNI (tls_certificates)', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let tollgate: Tollgate;
  let port: number;
  const certs: Record<string, SelfSigned> = {};
  const volumes: Record<string, SecretVolume> = {};

  before(async () => {
    for (const name of ['default.test', 'a.test', '*.wild.test']) {
      certs[name] = selfSigned(name);
      const volume = new SecretVolume({ 'tls.crt': certs[name].cert, 'tls.key': certs[name].key });
      volumes[name] = volume;
      scope.keep({ close: async () => volume.remove() });
    }
    const upstream = await scope.upstream();
    tollgate = await scope.tollgate({
      main: {
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: (volumes['default.test'] as SecretVolume).path('tls.crt'),
        tls_key_file: (volumes['default.test'] as SecretVolume).path('tls.key'),
        tls_certificates: ['a.test', '*.wild.test'].map((name) => ({
          certificate: (volumes[name] as SecretVolume).path('tls.crt'),
          key: (volumes[name] as SecretVolume).path('tls.key'),
        })),
      },
      upstreams: { upstreams: { DEFAULT: { paths: { '/': { servers: [upstream.address] } } } } },
    });
    port = tollgate.tlsPort as number;
  });

  const fingerprint = (name: string) => (certs[name] as SelfSigned).fingerprint256;

  it('an exact name, then a one-label wildcard, else the first pair; ALPN h2 on each', async () => {
    assert.deepEqual(await handshake(port, 'a.test'), { fingerprint: fingerprint('a.test'), alpn: 'h2' });
    assert.deepEqual(await handshake(port, 'A.TEST'), { fingerprint: fingerprint('a.test'), alpn: 'h2' });
    assert.deepEqual(await handshake(port, 'x.wild.test'), {
      fingerprint: fingerprint('*.wild.test'),
      alpn: 'h2',
    });
    // A wildcard covers one label only.
    assert.equal((await handshake(port, 'a.b.wild.test')).fingerprint, fingerprint('default.test'));
    assert.equal((await handshake(port, 'wild.test')).fingerprint, fingerprint('default.test'));
    assert.equal((await handshake(port, 'other.test')).fingerprint, fingerprint('default.test'));
    assert.deepEqual(await handshake(port), { fingerprint: fingerprint('default.test'), alpn: 'h2' });
  });

  it('each pair reloads on its own, and a broken pair keeps its previous copy while the others rotate', async () => {
    const nextA = selfSigned('a.test');
    const swappedAt = Date.now();
    (volumes['a.test'] as SecretVolume).swap({ 'tls.crt': nextA.cert, 'tls.key': nextA.key });
    await waitFor(async () => (await handshake(port, 'a.test')).fingerprint === nextA.fingerprint256, 10_000);
    // The log pipe may lag the handshake: wait for the line rather than read it once.
    const reloadLine = () =>
      tollgate
        .logs()
        .find(
          (l) =>
            l.msg === 'TLS certificate reloaded' &&
            (l.certificate as { fingerprint256?: string })?.fingerprint256 === nextA.fingerprint256,
        );
    await waitFor(() => reloadLine() !== undefined, 10_000);
    const reloaded = reloadLine();
    const delay = Date.parse(String(reloaded?.time)) - swappedAt;
    assert.ok(delay <= 1_000, `applied after ${delay} ms`);
    // The others did not move.
    assert.equal((await handshake(port, 'x.wild.test')).fingerprint, fingerprint('*.wild.test'));
    assert.equal((await handshake(port)).fingerprint, fingerprint('default.test'));

    // The wildcard pair breaks: it keeps serving its previous copy…
    (volumes['*.wild.test'] as SecretVolume).swap({ 'tls.crt': 'garbage', 'tls.key': 'garbage' });
    await waitFor(
      () =>
        tollgate
          .logs()
          .some(
            (l) =>
              String(l.msg).startsWith('TLS certificate not reloaded') && l.file === 'tls_certificates[1]',
          ),
      10_000,
    );
    assert.equal((await handshake(port, 'x.wild.test')).fingerprint, fingerprint('*.wild.test'));
    // …while the default still rotates.
    const nextDefault = selfSigned('default.test');
    (volumes['default.test'] as SecretVolume).swap({
      'tls.crt': nextDefault.cert,
      'tls.key': nextDefault.key,
    });
    await waitFor(async () => (await handshake(port)).fingerprint === nextDefault.fingerprint256, 10_000);
    assert.equal((await handshake(port, 'other.test')).fingerprint, nextDefault.fingerprint256);
    const metrics = await tollgate.metrics();
    assert.equal(reloadCount(metrics, 'tls_certificates[0]', 'success'), 1);
    assert.equal(reloadCount(metrics, 'tls_certificates[1]', 'failure'), 1);
    assert.equal(reloadCount(metrics, 'tls_certificate', 'success'), 1);
  });
});
