import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { hasOpenssl, type IssuedCertificate, SecretVolume, selfSigned, TestCa } from '../helpers/certs.ts';
import {
  endpointSlice,
  ingress,
  ingressClass,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { waitFor } from '../helpers/tollgate.ts';
import { PROCESS_START_MS } from '../helpers/workers.ts';

/**
 * ingress-nginx's auth-tls-* annotations (docs/ingress.md#client-certificates), through the built
 * process and the fake API server, with real handshakes and certificates made by `openssl`.
 */

interface Answer {
  status: number;
  body: string;
  location?: string;
}

/** One HTTP/1.1 request on a fresh TLS connection to `host`; rejects when the handshake fails. */
function get(
  port: number,
  host: string,
  client: { cert?: Buffer; key?: Buffer } = {},
  servername = host,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        servername,
        path: '/',
        headers: { host, 'ssl-client-cert': 'forged' },
        rejectUnauthorized: false,
        agent: false,
        ...client,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            ...(res.headers.location === undefined ? {} : { location: res.headers.location }),
          }),
        );
      },
    );
    req.setTimeout(15_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** The request succeeded with `status` (a refused handshake is false, not an error). */
async function answers(port: number, host: string, status: number, client?: IssuedCertificate) {
  try {
    return (await get(port, host, client)).status === status;
  } catch {
    return false;
  }
}

const REFUSED = /certificate required|socket hang up|ECONNRESET|EPIPE/i;

describe('Ingress auth-tls-* annotations: client certificates on the Ingress TLS hosts', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let ca: TestCa;
  let nextCa: TestCa;
  let payments: IssuedCertificate;
  let stranger: IssuedCertificate;
  let nextPayments: IssuedCertificate;
  let nextRevoked: IssuedCertificate;
  before(() => {
    ca = new TestCa('Clients CA');
    nextCa = new TestCa('Next Clients CA');
    payments = ca.issue('payments');
    stranger = ca.issue('stranger');
    nextPayments = nextCa.issue('payments');
    nextRevoked = nextCa.issue('billing');
  });
  after(() => {
    ca.remove();
    nextCa.remove();
  });

  for (const workers of [1, 2]) {
    it(`require, optional, match-cn, pass-certificate, 421 across checks, CA replaced, CRL added, error page, and Secret deleted live (workers: ${workers})`, async () => {
      const pod = await scope.upstream({ name: 'pod' });
      const api = scope.keep(await startFakeKubeApi());
      api.apply(ingressClass());
      api.apply(
        service({
          name: 'pod',
          namespace: 'apps',
          ports: [{ name: 'http', port: 80, targetPort: pod.port }],
        }),
      );
      api.apply(
        endpointSlice({
          service: 'pod',
          namespace: 'apps',
          ports: [{ name: 'http', port: pod.port }],
          endpoints: [{ ip: '127.0.0.1' }],
        }),
      );
      const serving = selfSigned('secure.test');
      const servingOptional = selfSigned('open.test');
      const servingPaged = selfSigned('paged.test');
      for (const [name, pair] of [
        ['secure-tls', serving],
        ['open-tls', servingOptional],
        ['paged-tls', servingPaged],
      ] as const)
        api.apply(
          secret({
            name,
            namespace: 'apps',
            type: 'kubernetes.io/tls',
            data: { 'tls.crt': pair.cert.toString(), 'tls.key': pair.key.toString() },
          }),
        );
      api.apply(secret({ name: 'clients-ca', namespace: 'apps', data: { 'ca.crt': ca.cert.toString() } }));
      api.apply(
        ingress({
          name: 'secure',
          namespace: 'apps',
          annotations: {
            'nginx.ingress.kubernetes.io/auth-tls-secret': 'apps/clients-ca',
            'nginx.ingress.kubernetes.io/auth-tls-verify-client': 'on',
            'nginx.ingress.kubernetes.io/auth-tls-verify-depth': '1',
            'nginx.ingress.kubernetes.io/auth-tls-match-cn': 'CN=(payments|billing)',
          },
          tls: [{ hosts: ['secure.test'], secretName: 'secure-tls' }],
          rules: [{ host: 'secure.test', paths: [{ service: 'pod', port: 80 }] }],
        }),
      );
      api.apply(
        ingress({
          name: 'open',
          namespace: 'apps',
          annotations: {
            'nginx.ingress.kubernetes.io/auth-tls-secret': 'apps/clients-ca',
            'nginx.ingress.kubernetes.io/auth-tls-verify-client': 'optional',
            'nginx.ingress.kubernetes.io/auth-tls-pass-certificate-to-upstream': 'true',
          },
          tls: [{ hosts: ['open.test'], secretName: 'open-tls' }],
          rules: [{ host: 'open.test', paths: [{ service: 'pod', port: 80 }] }],
        }),
      );
      api.apply(
        ingress({
          name: 'paged',
          namespace: 'apps',
          annotations: {
            'nginx.ingress.kubernetes.io/auth-tls-secret': 'clients-ca',
            'nginx.ingress.kubernetes.io/auth-tls-error-page': 'https://help.example.test/mtls',
          },
          tls: [{ hosts: ['paged.test'], secretName: 'paged-tls' }],
          rules: [{ host: 'paged.test', paths: [{ service: 'pod', port: 80 }] }],
        }),
      );
      const fallback = selfSigned('default.test');
      const volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
      scope.keep({ close: async () => volume.remove() });
      const dir = await mkdtemp(join(tmpdir(), 'tollgate-ingress-mtls-'));
      scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
      // main.yaml has no client-certificate check: the Ingress's turns checking on at run time.
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
      const port = tollgate.tlsPort as number;

      // require (`on`): a valid certificate with a matching CN passes; every worker has the check.
      await waitFor(() => answers(port, 'secure.test', 200, payments), 15_000);
      for (let i = 0; i < 4; i++) {
        await assert.rejects(get(port, 'secure.test'), REFUSED);
        const ok = await get(port, 'secure.test', payments);
        assert.equal(ok.status, 200);
        // Not asked to forward: the client's forged copy is removed, none is added.
        assert.equal(JSON.parse(ok.body).headers['ssl-client-cert'], undefined);
      }
      // auth-tls-match-cn: another CN of the same CA is refused.
      const other = await get(port, 'secure.test', stranger);
      assert.equal(other.status, 403);
      assert.equal(JSON.parse(other.body).error, 'forbidden');
      // A certificate of a CA the Secret does not hold: the connection is refused.
      await assert.rejects(get(port, 'secure.test', nextPayments), REFUSED);

      // Sessions are no longer resumed once a check exists: every connection is verified anew.
      const agent = new https.Agent({ keepAlive: false, maxCachedSessions: 10, ...payments });
      const reused: boolean[] = [];
      for (const host of ['secure.test', 'secure.test', 'file.test', 'file.test'])
        await new Promise<void>((resolve, reject) => {
          https
            .get(
              {
                host: '127.0.0.1',
                port,
                servername: host,
                path: '/',
                headers: { host },
                agent,
                rejectUnauthorized: false,
              },
              (res) => {
                reused.push((res.socket as TLSSocket).isSessionReused());
                res.resume();
                res.on('end', resolve);
              },
            )
            .on('error', reject);
        });
      agent.destroy();
      assert.deepEqual(reused, [false, false, false, false]);

      // optional + pass-certificate-to-upstream: through without one, forwarded with one.
      await waitFor(() => answers(port, 'open.test', 200), 10_000);
      const anonymous = await get(port, 'open.test');
      assert.equal(JSON.parse(anonymous.body).headers['ssl-client-cert'], undefined);
      const forwarded = await get(port, 'open.test', payments);
      assert.equal(forwarded.status, 200);
      assert.equal(JSON.parse(forwarded.body).headers['ssl-client-cert'], encodeURIComponent(payments.pem));
      // A connection set up for the checked host does not carry requests for another host's check.
      assert.equal((await get(port, 'open.test', payments, 'secure.test')).status, 421);
      // A certificate that does not verify is neither an identity nor forwarded.
      const unverified = await get(port, 'open.test', nextPayments);
      assert.equal(unverified.status, 200);
      assert.equal(JSON.parse(unverified.body).headers['ssl-client-cert'], undefined);

      // on + auth-tls-error-page: no verified certificate is a redirect to the page, not a failed handshake.
      await waitFor(() => answers(port, 'paged.test', 200, payments), 10_000);
      for (const client of [undefined, nextPayments]) {
        const paged = await get(port, 'paged.test', client);
        assert.equal(paged.status, 302);
        assert.equal(paged.location, 'https://help.example.test/mtls');
      }

      // The CA replaced in the Secret: the old CA's certificates are refused from the next handshake.
      api.apply(
        secret({ name: 'clients-ca', namespace: 'apps', data: { 'ca.crt': nextCa.cert.toString() } }),
      );
      await waitFor(() => answers(port, 'secure.test', 200, nextPayments), 10_000);
      for (let i = 0; i < 4; i++) {
        await assert.rejects(get(port, 'secure.test', payments), REFUSED);
        assert.equal((await get(port, 'secure.test', nextPayments)).status, 200);
      }

      // ca.crl added: a revoked certificate is refused from the next handshake, the others pass.
      assert.equal((await get(port, 'secure.test', nextRevoked)).status, 200);
      api.apply(
        secret({
          name: 'clients-ca',
          namespace: 'apps',
          data: { 'ca.crt': nextCa.cert.toString(), 'ca.crl': nextCa.crl([nextRevoked]).toString() },
        }),
      );
      await waitFor(async () => {
        try {
          await get(port, 'secure.test', nextRevoked);
          return false;
        } catch {
          return true;
        }
      }, 10_000);
      for (let i = 0; i < 4; i++) {
        await assert.rejects(get(port, 'secure.test', nextRevoked), REFUSED);
        assert.equal((await get(port, 'secure.test', nextPayments)).status, 200);
      }

      // The Secret deleted: the paths close (503), never open without their check.
      api.delete('secrets', 'apps', 'clients-ca');
      await waitFor(async () => {
        try {
          return (await get(port, 'secure.test')).status === 503;
        } catch {
          return false;
        }
      }, 10_000);
      await waitFor(() =>
        api.events.some((event) => /auth-tls-secret apps\/clients-ca does not exist/.test(event.message)),
      );
    });
  }
});
