import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import { before, describe, it } from 'node:test';
import { hasOpenssl, type IssuedCertificate, SecretVolume, selfSigned, TestCa } from '../helpers/certs.ts';
import { h2Request } from '../helpers/h2-client.ts';
import { testScope } from '../helpers/scope.ts';
import { type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Echo } from '../helpers/upstream.ts';

/**
 * Client certificates (docs/authentication.md#client-certificates), through the built process with
 * real handshakes: certificates made by `openssl`, clients node:https (HTTP/1.1) and node:http2.
 */

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

interface ClientCredentials {
  cert?: Buffer;
  key?: Buffer;
  maxVersion?: 'TLSv1.2';
}

/** One HTTP/1.1 request on a fresh TLS connection to `servername`; rejects when the handshake fails. */
function get1(
  port: number,
  servername: string,
  path: string,
  client: ClientCredentials = {},
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        servername,
        path,
        headers: { host: servername, ...headers },
        rejectUnauthorized: false,
        agent: false,
        ...client,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.setTimeout(15_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** One HTTP/2 session to `servername` (with a client certificate when given). */
async function session2(port: number, servername: string, client: ClientCredentials = {}) {
  const session = http2.connect(`https://127.0.0.1:${port}`, {
    servername,
    rejectUnauthorized: false,
    ...client,
  });
  session.on('error', () => {});
  return session;
}

async function get2(
  port: number,
  servername: string,
  path: string,
  client: ClientCredentials = {},
  extra: http2.OutgoingHttpHeaders = {},
) {
  const session = await session2(port, servername, client);
  try {
    return await h2Request(session, { ':path': path, ':authority': servername, ...extra });
  } finally {
    session.close();
  }
}

const echoOf = (answer: { body: string | Buffer }) => JSON.parse(String(answer.body)) as Echo;

describe('client certificates (mTLS)', { skip: hasOpenssl() ? false : 'no openssl' }, () => {
  const scope = testScope();
  let tollgate: Tollgate;
  let port: number;
  let ca: TestCa;
  let otherCa: TestCa;
  let nextCa: TestCa;
  let payments: IssuedCertificate;
  let billing: IssuedCertificate;
  let plain: IssuedCertificate;
  let revoked: IssuedCertificate;
  let stranger: IssuedCertificate;
  let deep: IssuedCertificate;
  let toRevokeLater: IssuedCertificate;
  let volume: SecretVolume;

  before(async () => {
    ca = new TestCa('Clients CA');
    otherCa = new TestCa('Other CA');
    nextCa = new TestCa('Next Clients CA');
    const intermediate = new TestCa('Clients Intermediate', ca);
    for (const authority of [ca, otherCa, nextCa, intermediate])
      scope.keep({ close: async () => authority.remove() });
    payments = ca.issue('payments-api', {
      uris: ['spiffe://cluster.local/ns/payments/sa/api'],
      dns: ['api.payments.svc'],
    });
    billing = ca.issue('billing', { uris: ['spiffe://cluster.local/ns/billing/sa/api'] });
    plain = ca.issue('plain-client', { emails: ['ops@example.test'] });
    revoked = ca.issue('revoked-client', { uris: ['spiffe://cluster.local/ns/payments/sa/old'] });
    toRevokeLater = ca.issue('later', { uris: ['spiffe://cluster.local/ns/payments/sa/later'] });
    stranger = otherCa.issue('stranger', { uris: ['spiffe://cluster.local/ns/payments/sa/api'] });
    deep = intermediate.issue('deep', {
      uris: ['spiffe://cluster.local/ns/payments/sa/deep'],
      chain: [intermediate.cert],
    });
    const serving = {
      default: selfSigned('default.test'),
      a: selfSigned('a.test'),
      b: selfSigned('b.test'),
      c: selfSigned('c.test'),
      d: selfSigned('d.test'),
    };
    volume = new SecretVolume({
      'default.crt': serving.default.cert,
      'default.key': serving.default.key,
      'a.crt': serving.a.cert,
      'a.key': serving.a.key,
      'b.crt': serving.b.cert,
      'b.key': serving.b.key,
      'c.crt': serving.c.cert,
      'c.key': serving.c.key,
      'd.crt': serving.d.cert,
      'd.key': serving.d.key,
      'ca.crt': ca.cert,
      'ca.crl': ca.crl([revoked]),
    });
    scope.keep({ close: async () => volume.remove() });
    const upstream = await scope.upstream();
    const route = { servers: [upstream.address] };
    tollgate = await scope.tollgate({
      main: {
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('default.crt'),
        tls_key_file: volume.path('default.key'),
        tls_certificates: [
          {
            certificate: volume.path('a.crt'),
            key: volume.path('a.key'),
            client_certificates: { ca_file: volume.path('ca.crt'), crl_file: volume.path('ca.crl') },
          },
          {
            certificate: volume.path('b.crt'),
            key: volume.path('b.key'),
            client_certificates: {
              ca_file: volume.path('ca.crt'),
              crl_file: volume.path('ca.crl'),
              mode: 'optional',
            },
          },
          // Without a CRL (one would be needed for the intermediate too): depth alone decides.
          ...(['c', 'd'] as const).map((name, index) => ({
            certificate: volume.path(`${name}.crt`),
            key: volume.path(`${name}.key`),
            client_certificates: {
              ca_file: volume.path('ca.crt'),
              mode: 'optional',
              verify_depth: index + 1,
            },
          })),
        ],
      },
      upstreams: {
        upstreams: {
          'a.test': { paths: { '/': route } },
          'b.test': {
            paths: {
              '/open': route,
              '/mtls': {
                ...route,
                authorization: {
                  type: 'client_certificate',
                  forward_client_certificate: 'xfcc',
                  allow: { uri_sans: ['spiffe://cluster.local/ns/payments/*'] },
                },
              },
              '/pem': {
                ...route,
                authorization: {
                  type: 'client_certificate',
                  subject_from: ['email_san', 'cn'],
                  forward_client_certificate: 'pem',
                },
              },
              '/dns': {
                ...route,
                authorization: {
                  type: 'client_certificate',
                  subject_from: ['dns_san'],
                  allow: { dns_sans: ['*.payments.svc'] },
                },
              },
            },
          },
          'default.test': { paths: { '/': route } },
          'c.test': { paths: { '/': { ...route, authorization: { type: 'client_certificate' } } } },
          'd.test': { paths: { '/': { ...route, authorization: { type: 'client_certificate' } } } },
        },
      },
    });
    port = tollgate.tlsPort as number;
  });

  it('require: a verified certificate passes over HTTP/1.1 and HTTP/2; without one, or from another CA, the handshake fails', async () => {
    assert.equal((await get1(port, 'a.test', '/', payments)).status, 200);
    assert.equal((await get2(port, 'a.test', '/', payments)).status, 200);
    await assert.rejects(get1(port, 'a.test', '/'), /certificate required|socket hang up|ECONNRESET/i);
    await assert.rejects(get2(port, 'a.test', '/'));
    await assert.rejects(get1(port, 'a.test', '/', stranger));
    await assert.rejects(get2(port, 'a.test', '/', stranger));
    // TLS 1.2 alike (the certificate comes before the client's Finished there).
    assert.equal((await get1(port, 'a.test', '/', { ...payments, maxVersion: 'TLSv1.2' })).status, 200);
    await assert.rejects(get1(port, 'a.test', '/', { maxVersion: 'TLSv1.2' }));
    await assert.rejects(get1(port, 'a.test', '/', { ...stranger, maxVersion: 'TLSv1.2' }));
    // A host without a check never asks: the handshake for default.test passes without one.
    assert.equal((await get1(port, 'default.test', '/')).status, 200);
  });

  it('sessions are never resumed while a check is configured (every connection is verified anew)', async () => {
    // An agent that caches TLS sessions, as browsers and most clients do.
    const agent = new https.Agent({ keepAlive: false, maxCachedSessions: 10, ...payments });
    const reused: boolean[] = [];
    for (const servername of ['a.test', 'a.test', 'default.test', 'default.test']) {
      await new Promise<void>((resolve, reject) => {
        https
          .get(
            {
              host: '127.0.0.1',
              port,
              servername,
              path: '/',
              headers: { host: servername },
              agent,
              rejectUnauthorized: false,
            },
            (res) => {
              reused.push((res.socket as import('node:tls').TLSSocket).isSessionReused());
              res.resume();
              res.on('end', resolve);
            },
          )
          .on('error', reject);
      });
    }
    agent.destroy();
    assert.deepEqual(reused, [false, false, false, false]);
  });

  it('a revoked certificate (CRL) is refused: no handshake on a require host, 401 on an optional one', async () => {
    await assert.rejects(get1(port, 'a.test', '/', revoked));
    await assert.rejects(get2(port, 'a.test', '/', revoked));
    const refused = await get1(port, 'b.test', '/mtls', revoked);
    assert.equal(refused.status, 401);
    assert.equal(JSON.parse(refused.body).error, 'client_certificate_required');
  });

  it('a chain deeper than verify_depth is refused: an intermediate passes at 2, not at 1 (the default)', async () => {
    assert.equal((await get1(port, 'd.test', '/', deep)).status, 200);
    assert.equal((await get1(port, 'c.test', '/', deep)).status, 401);
    assert.equal((await get1(port, 'c.test', '/', payments)).status, 200);
    await assert.rejects(get1(port, 'a.test', '/', deep));
  });

  it('optional: the request goes on, and a client_certificate route answers 401 without one (gRPC 16)', async () => {
    assert.equal((await get1(port, 'b.test', '/open')).status, 200);
    const refused = await get1(port, 'b.test', '/mtls');
    assert.equal(refused.status, 401);
    assert.equal(JSON.parse(refused.body).error, 'client_certificate_required');
    const grpc = await get2(
      port,
      'b.test',
      '/mtls',
      {},
      { ':method': 'POST', 'content-type': 'application/grpc' },
    );
    assert.equal(grpc.status, 200);
    assert.equal(grpc.headers['grpc-status'], '16');
    // From a CA this host does not trust: the same 401 (the handshake itself went on).
    assert.equal((await get1(port, 'b.test', '/mtls', stranger)).status, 401);
  });

  it('the subject is the URI SAN, allow uri_sans applies, and X-Forwarded-Client-Cert replaces the client copy', async () => {
    const spoof = {
      'x-forwarded-client-cert': 'Hash=00;URI=spiffe://cluster.local/ns/payments/sa/admin',
      'ssl-client-cert': 'forged',
      'x-tollgate-subject': 'admin',
    };
    for (const answer of [
      await get1(port, 'b.test', '/mtls', payments, spoof),
      await get2(port, 'b.test', '/mtls', payments, spoof),
    ]) {
      assert.equal(answer.status, 200);
      const echo = echoOf(answer);
      assert.equal(echo.headers['x-tollgate-subject'], 'spiffe://cluster.local/ns/payments/sa/api');
      assert.equal(
        echo.headers['x-forwarded-client-cert'],
        `Hash=${payments.sha256};Subject="CN=payments-api,O=Tollgate Tests";URI=spiffe://cluster.local/ns/payments/sa/api;DNS=api.payments.svc`,
      );
      assert.equal(echo.headers['ssl-client-cert'], undefined);
    }
    // Another namespace: authenticated, not allowed.
    const forbidden = await get1(port, 'b.test', '/mtls', billing);
    assert.equal(forbidden.status, 403);
    assert.equal(JSON.parse(forbidden.body).error, 'forbidden');
    // A route without client-certificate auth forwards neither header, whatever the client sent.
    const open = echoOf(await get1(port, 'b.test', '/open', payments, spoof));
    assert.equal(open.headers['x-forwarded-client-cert'], undefined);
    assert.equal(open.headers['ssl-client-cert'], undefined);
  });

  it('subject_from picks the first present; pem forwards ssl-client-cert; dns_sans patterns', async () => {
    const pem = echoOf(await get1(port, 'b.test', '/pem', plain));
    assert.equal(pem.headers['x-tollgate-subject'], 'ops@example.test');
    assert.equal(decodeURIComponent(String(pem.headers['ssl-client-cert'])), plain.pem);
    assert.equal(
      echoOf(await get1(port, 'b.test', '/pem', billing)).headers['x-tollgate-subject'],
      'billing',
    );
    assert.equal(
      echoOf(await get1(port, 'b.test', '/dns', payments)).headers['x-tollgate-subject'],
      'api.payments.svc',
    );
    // No DNS SAN at all: nothing to take the subject from.
    assert.equal((await get1(port, 'b.test', '/dns', billing)).status, 401);
  });

  it('a request for a host whose check differs from the connection server name is answered 421', async () => {
    // HTTP/2 connection reuse: a session set up for default.test (no check) asking for a.test.
    const session = await session2(port, 'default.test');
    try {
      const reused = await h2Request(session, { ':path': '/', ':authority': 'a.test' });
      assert.equal(reused.status, 421);
      assert.equal(reused.json().error, 'misdirected_request');
    } finally {
      session.close();
    }
    // HTTP/1.1 with an SNI of the optional host and the Host of the require one.
    const crossed = await get1(port, 'b.test', '/', payments, { host: 'a.test' });
    assert.equal(crossed.status, 421);
    // A verified certificate for a.test does not serve a route of another host either.
    assert.equal((await get1(port, 'a.test', '/mtls', payments, { host: 'b.test' })).status, 421);
  });

  it('the CA bundle and the CRL reload live: a new CA is trusted, a newly revoked certificate refused', async () => {
    assert.equal((await get1(port, 'b.test', '/mtls', toRevokeLater)).status, 200);
    const newcomer = nextCa.issue('newcomer', { uris: ['spiffe://cluster.local/ns/payments/sa/new'] });
    assert.equal((await get1(port, 'b.test', '/mtls', newcomer)).status, 401);
    volume.swap({
      ...volumeFiles(volume),
      'ca.crt': Buffer.concat([ca.cert, nextCa.cert]),
      'ca.crl': Buffer.concat([ca.crl([revoked, toRevokeLater]), nextCa.crl()]),
    });
    await waitFor(async () => (await get1(port, 'b.test', '/mtls', newcomer)).status === 200, 15_000);
    assert.equal((await get1(port, 'b.test', '/mtls', toRevokeLater)).status, 401);
    await assert.rejects(get1(port, 'a.test', '/', toRevokeLater));
    assert.equal((await get1(port, 'a.test', '/', newcomer)).status, 200);
    // A CA file that breaks keeps the previous one serving.
    volume.swap({ ...volumeFiles(volume), 'ca.crt': 'garbage' });
    await waitFor(
      () => tollgate.logs().some((line) => String(line.msg).startsWith('TLS certificate not reloaded')),
      15_000,
    );
    assert.equal((await get1(port, 'a.test', '/', newcomer)).status, 200);
  });
});

/** The files of a SecretVolume as they are now (a swap replaces every file). */
function volumeFiles(volume: SecretVolume): Record<string, Buffer> {
  const names = ['default', 'a', 'b', 'c', 'd'].flatMap((name) => [`${name}.crt`, `${name}.key`]);
  return Object.fromEntries(names.map((name) => [name, readFileSync(volume.path(name))]));
}
