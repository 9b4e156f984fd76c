import assert from 'node:assert/strict';
import { once } from 'node:events';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { createLogger } from '../../src/log.ts';
import { configReloadsTotal } from '../../src/observe/metrics.ts';
import { createFileWatcher, type FileWatcher } from '../../src/sources/files.ts';
import { createTlsContextProvider, type TlsContextProvider } from '../../src/sources/tls-certificate.ts';
import { hasOpenssl, SecretVolume, type SelfSigned, selfSigned } from '../helpers/certs.ts';
import { waitFor } from '../helpers/tollgate.ts';

const skip = hasOpenssl() ? false : 'openssl is not installed';

function capturingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', {
    write(line: string) {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    },
  });
  return { logger, lines };
}

/** Opens a TLS connection and resolves with it once the handshake is done. */
async function handshake(port: number): Promise<tls.TLSSocket> {
  const socket = tls.connect({
    host: '127.0.0.1',
    port,
    rejectUnauthorized: false,
    servername: 'tollgate.test',
  });
  await once(socket, 'secureConnect');
  return socket;
}

async function tlsReloads(result: 'success' | 'failure'): Promise<number> {
  const { values } = await configReloadsTotal.get();
  return values.find((v) => v.labels.file === 'tls_certificate' && v.labels.result === result)?.value ?? 0;
}

async function servedFingerprint(port: number): Promise<string> {
  const socket = await handshake(port);
  const fingerprint = socket.getPeerCertificate().fingerprint256;
  socket.destroy();
  return fingerprint;
}

describe('TLS certificate provider', { skip }, () => {
  let first: SelfSigned;
  let second: SelfSigned;
  let third: SelfSigned;
  before(() => {
    first = selfSigned('first.test');
    second = selfSigned('second.test');
    third = selfSigned('third.test');
  });

  it('refuses to start with unusable files (fail closed)', () => {
    const volume = new SecretVolume({ 'tls.crt': first.cert, 'tls.key': second.key });
    try {
      const { logger } = capturingLogger();
      assert.throws(
        () =>
          createTlsContextProvider({
            certFile: volume.path('tls.crt'),
            keyFile: volume.path('tls.key'),
            logger,
          }),
        /does not match|mismatch/,
      );
    } finally {
      volume.remove();
    }
  });

  describe('serving through an https server', () => {
    let volume: SecretVolume;
    let provider: TlsContextProvider;
    let files: FileWatcher;
    let server: https.Server;
    let port: number;
    let logs: ReturnType<typeof capturingLogger>;

    before(async () => {
      volume = new SecretVolume({ 'tls.crt': first.cert, 'tls.key': first.key });
      logs = capturingLogger();
      provider = createTlsContextProvider({
        certFile: volume.path('tls.crt'),
        keyFile: volume.path('tls.key'),
        logger: logs.logger,
      });
      // No poll during the test: it proves the directory watch alone picks up the swap.
      files = await createFileWatcher({ logger: logs.logger, quietMs: 50, pollIntervalMs: 600_000 });
      await provider.watch(files);
      server = https.createServer({ ...provider.current() }, (_req, res) => res.end('ok'));
      provider.attach(server);
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      port = (server.address() as AddressInfo).port;
    });

    after(async () => {
      await files.close();
      provider.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      volume.remove();
    });

    it('serves the certificate from the files', async () => {
      assert.equal(await servedFingerprint(port), first.fingerprint256);
    });

    it('serves a swapped Secret on the next handshake, keeping open connections', async () => {
      const open = await handshake(port);
      volume.swap({ 'tls.crt': second.cert, 'tls.key': second.key });
      await waitFor(async () => (await servedFingerprint(port)) === second.fingerprint256, 5_000);
      // The connection made before the swap still works and still shows the old certificate.
      assert.equal(open.getPeerCertificate().fingerprint256, first.fingerprint256);
      open.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      let reply = '';
      open.setEncoding('utf8').on('data', (d: string) => {
        reply += d;
      });
      await once(open, 'end');
      assert.match(reply, /^HTTP\/1\.1 200/);
      assert.ok(logs.lines.some((l) => l.msg === 'TLS certificate reloaded'));
    });

    it('keeps the old certificate when the new files are bad, and logs it once', async () => {
      volume.swap({ 'tls.crt': third.cert, 'tls.key': first.key }); // key of another certificate
      await waitFor(
        () => logs.lines.some((l) => String(l.msg).startsWith('TLS certificate not reloaded')),
        5_000,
      );
      assert.equal(await servedFingerprint(port), second.fingerprint256);
      assert.equal(await tlsReloads('failure'), 1, 'a rejected certificate is counted');
      volume.swap({ 'tls.crt': 'not a certificate', 'tls.key': '' });
      await waitFor(
        () => logs.lines.filter((l) => String(l.msg).startsWith('TLS certificate not reloaded')).length === 2,
        5_000,
      );
      assert.equal(await servedFingerprint(port), second.fingerprint256);
      // No key material in any log line.
      const text = JSON.stringify(logs.lines);
      assert.ok(!text.includes('PRIVATE KEY'));
    });

    it('recovers when good files come back', async () => {
      volume.swap({ 'tls.crt': third.cert, 'tls.key': third.key });
      await waitFor(async () => (await servedFingerprint(port)) === third.fingerprint256, 5_000);
    });
  });

  it('picks up a change by polling, which reads the files itself rather than waiting for events', async () => {
    const volume = new SecretVolume({ 'tls.crt': first.cert, 'tls.key': first.key });
    const { logger } = capturingLogger();
    const provider = createTlsContextProvider({
      certFile: volume.path('tls.crt'),
      keyFile: volume.path('tls.key'),
      logger,
    });
    // A watch event would only lead to a check after the test ends.
    const files = await createFileWatcher({
      logger,
      quietMs: 60_000,
      maxWaitMs: 60_000,
      pollIntervalMs: 100,
    });
    await provider.watch(files);
    try {
      volume.swap({ 'tls.crt': second.cert, 'tls.key': second.key });
      await waitFor(() => provider.current().cert.equals(second.cert), 5_000);
    } finally {
      await files.close();
      provider.close();
      volume.remove();
    }
  });
});
