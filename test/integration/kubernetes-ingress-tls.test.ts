import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import tls from 'node:tls';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';
import {
  endpointSlice,
  ingress,
  ingressClass,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { request, waitFor } from '../helpers/tollgate.ts';
import { PROCESS_START_MS } from '../helpers/workers.ts';

/** The certificate a handshake naming `servername` gets. */
async function servedFingerprint(port: number, servername: string): Promise<string> {
  const socket = tls.connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false });
  socket.setTimeout(10_000, () => socket.destroy(new Error('TLS handshake timed out')));
  await once(socket, 'secureConnect');
  const fingerprint = socket.getPeerCertificate().fingerprint256;
  socket.destroy();
  return fingerprint;
}

function httpsGet(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        servername: host,
        headers: { host },
        rejectUnauthorized: false,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const tlsSecret = (name: string, pair: { cert: Buffer; key: Buffer }) =>
  secret({
    name,
    namespace: 'apps',
    type: 'kubernetes.io/tls',
    data: { 'tls.crt': pair.cert.toString(), 'tls.key': pair.key.toString() },
  });

describe('Ingress TLS from kubernetes.io/tls Secrets, by SNI', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();

  for (const workers of [1, 2]) {
    it(`served, redirected to, rotated live and withdrawn (workers: ${workers})`, async () => {
      const pod = await scope.upstream({ name: 'shop' });
      const api = scope.keep(await startFakeKubeApi());
      api.apply(ingressClass());
      api.apply(
        service({
          name: 'shop',
          namespace: 'apps',
          ports: [{ name: 'http', port: 80, targetPort: pod.port }],
        }),
      );
      api.apply(
        endpointSlice({
          service: 'shop',
          namespace: 'apps',
          ports: [{ name: 'http', port: pod.port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
      const fallback = selfSigned('default.test');
      const first = selfSigned('shop.test');
      const second = selfSigned('shop.test');
      api.apply(tlsSecret('shop-tls', first));
      api.apply(
        ingress({
          name: 'shop',
          namespace: 'apps',
          tls: [{ hosts: ['shop.test'], secretName: 'shop-tls' }],
          rules: [{ host: 'shop.test', paths: [{ service: 'shop', port: 80 }] }],
        }),
      );
      const volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
      scope.keep({ close: async () => volume.remove() });
      const dir = await mkdtemp(join(tmpdir(), 'tollgate-ingress-tls-'));
      scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
      const tollgate = await scope.tollgate({
        main: {
          workers,
          access_log: false,
          proxy_address_tls: '127.0.0.1:0',
          tls_certificate: volume.path('tls.crt'),
          tls_key_file: volume.path('tls.key'),
          kubernetes: { kubeconfig: api.writeKubeconfig(dir, 'apps'), ingress_class: 'tollgate' },
        },
        upstreams: { upstreams: { 'file.test': { paths: { '/': { servers: [pod.address] } } } } },
        env: { KUBECONFIG: '' },
        readyTimeoutMs: PROCESS_START_MS,
      });
      const tlsPort = tollgate.tlsPort as number;

      await waitFor(
        async () => (await servedFingerprint(tlsPort, 'shop.test')) === first.fingerprint256,
        10_000,
      );
      assert.equal(await servedFingerprint(tlsPort, 'other.test'), fallback.fingerprint256);
      const secure = await httpsGet(tlsPort, 'shop.test');
      assert.equal(secure.status, 200);
      assert.equal(JSON.parse(secure.body).server, 'shop');
      // A TLS host redirects plain HTTP (ingress-nginx's ssl-redirect default).
      const plain = await request(`${tollgate.proxyUrl}/cart?x=1`, { headers: { host: 'shop.test' } });
      assert.equal(plain.status, 301);
      assert.equal(plain.headers.location, 'https://shop.test/cart?x=1');

      // The Secret rotated (cert-manager renewing it): new handshakes get the new certificate within 1 s.
      api.apply(tlsSecret('shop-tls', second));
      await waitFor(
        async () => (await servedFingerprint(tlsPort, 'shop.test')) === second.fingerprint256,
        1_000,
      );

      // The Secret deleted: the Ingress is left out and reported; its host falls back to the default.
      api.delete('secrets', 'apps', 'shop-tls');
      await waitFor(
        async () => (await servedFingerprint(tlsPort, 'shop.test')) === fallback.fingerprint256,
        5_000,
      );
      await waitFor(() =>
        api.events.some((event) => /TLS Secret apps\/shop-tls does not exist/.test(event.message)),
      );
    });
  }
});
