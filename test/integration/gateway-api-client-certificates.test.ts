import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasOpenssl, type IssuedCertificate, SecretVolume, selfSigned, TestCa } from '../helpers/certs.ts';
import {
  gatewayClassObject,
  gatewayObject,
  hasCondition,
  httpRouteObject,
  namespaceObject,
} from '../helpers/fake-gateway-api.ts';
import { configMap, endpointSlice, secret, service, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { testScope } from '../helpers/scope.ts';
import { waitFor } from '../helpers/tollgate.ts';

/**
 * Gateway API client-certificate validation (`Gateway.spec.tls.frontend`, docs/gateway-api.md
 * #client-certificates), through the built process and the fake API server: `default` and `perPort`,
 * a ConfigMap and a Secret as CA, AllowInsecureFallback, a ref that does not resolve in the
 * listener's status, and the CA replaced live.
 */

const NS = 'apps';

function get(port: number, host: string, client: { cert?: Buffer; key?: Buffer } = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        servername: host,
        path: '/',
        headers: { host },
        rejectUnauthorized: false,
        agent: false,
        ...client,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.setTimeout(15_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

async function answers(port: number, host: string, status: number, client?: IssuedCertificate) {
  try {
    return (await get(port, host, client)).status === status;
  } catch {
    return false;
  }
}

const REFUSED = /certificate required|socket hang up|ECONNRESET|EPIPE/i;

interface ListenerStatus {
  name: string;
  conditions: Array<{ type: string; status: string; reason: string }>;
}

describe('Gateway spec.tls.frontend: client certificates on HTTPS listeners', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  const scope = testScope();
  let ca: TestCa;
  let nextCa: TestCa;
  let client: IssuedCertificate;
  let nextClient: IssuedCertificate;
  before(() => {
    ca = new TestCa('Gateway Clients CA');
    nextCa = new TestCa('Next Gateway Clients CA');
    client = ca.issue('client');
    nextClient = nextCa.issue('client');
  });
  after(() => {
    ca.remove();
    nextCa.remove();
  });

  it('default and perPort validation, AllowInsecureFallback, an unresolved ref in status, the CA replaced live', async () => {
    const web = await scope.upstream({ name: 'web' });
    const api = scope.keep(await startFakeKubeApi());
    api.applyRaw(namespaceObject(NS));
    api.applyRaw(gatewayClassObject());
    api.apply(
      service({ name: 'web', namespace: NS, ports: [{ name: 'http', port: 80, targetPort: web.port }] }),
    );
    api.apply(
      endpointSlice({
        service: 'web',
        namespace: NS,
        ports: [{ name: 'http', port: web.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    const pairs = { strict: selfSigned('strict.test'), lenient: selfSigned('lenient.test') };
    for (const [name, pair] of Object.entries(pairs))
      api.apply(
        secret({
          name: `${name}-tls`,
          namespace: NS,
          type: 'kubernetes.io/tls',
          data: { 'tls.crt': pair.cert.toString(), 'tls.key': pair.key.toString() },
        }),
      );
    // Core: a ConfigMap with ca.crt; a Secret for the per-port override.
    api.apply(configMap({ name: 'clients-ca', namespace: NS, data: { 'ca.crt': ca.cert.toString() } }));
    api.apply(secret({ name: 'clients-ca-secret', namespace: NS, data: { 'ca.crt': ca.cert.toString() } }));
    const gateway = (caRef: Record<string, unknown>) => {
      const object = gatewayObject({
        name: 'gw',
        namespace: NS,
        listeners: [
          {
            name: 'strict',
            port: 443,
            protocol: 'HTTPS',
            hostname: 'strict.test',
            tls: { certificateRefs: [{ name: 'strict-tls' }] },
          },
          {
            name: 'lenient',
            port: 8443,
            protocol: 'HTTPS',
            hostname: 'lenient.test',
            tls: { certificateRefs: [{ name: 'lenient-tls' }] },
          },
        ],
      });
      (object.spec as Record<string, unknown>).tls = {
        frontend: {
          default: { validation: { caCertificateRefs: [caRef] } },
          perPort: [
            {
              port: 8443,
              tls: {
                validation: {
                  caCertificateRefs: [{ group: '', kind: 'Secret', name: 'clients-ca-secret' }],
                  mode: 'AllowInsecureFallback',
                },
              },
            },
          ],
        },
      };
      return object;
    };
    api.applyRaw(gateway({ group: '', kind: 'ConfigMap', name: 'clients-ca' }));
    for (const host of ['strict.test', 'lenient.test'])
      api.applyRaw(
        httpRouteObject({
          name: host.split('.')[0] as string,
          namespace: NS,
          parentRefs: [{ name: 'gw' }],
          hostnames: [host],
          rules: [{ backendRefs: [{ name: 'web', port: 80 }] }],
        }),
      );
    const fallback = selfSigned('default.test');
    const volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    scope.keep({ close: async () => volume.remove() });
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-mtls-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    const tollgate = await scope.tollgate({
      main: {
        access_log: false,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, NS), gateway_class: 'tollgate' },
      },
      upstreams: { upstreams: { 'file.test': { paths: { '/': { servers: [web.address] } } } } },
      env: { KUBECONFIG: '' },
    });
    const port = tollgate.tlsPort as number;

    // default (ConfigMap, AllowValidOnly): no certificate, no handshake; a valid one passes.
    await waitFor(() => answers(port, 'strict.test', 200, client), 15_000);
    await assert.rejects(get(port, 'strict.test'), REFUSED);
    await assert.rejects(get(port, 'strict.test', nextClient), REFUSED);
    // perPort 8443 (Secret, AllowInsecureFallback): through with or without one.
    await waitFor(() => answers(port, 'lenient.test', 200), 10_000);
    assert.equal((await get(port, 'lenient.test', client)).status, 200);
    assert.equal((await get(port, 'lenient.test', nextClient)).status, 200);

    // The CA replaced in the ConfigMap: the next handshakes verify against the new one.
    api.apply(configMap({ name: 'clients-ca', namespace: NS, data: { 'ca.crt': nextCa.cert.toString() } }));
    await waitFor(() => answers(port, 'strict.test', 200, nextClient), 10_000);
    await assert.rejects(get(port, 'strict.test', client), REFUSED);

    // A ref that does not resolve: ResolvedRefs False on the listener, which is no longer served.
    api.applyRaw(gateway({ group: '', kind: 'ConfigMap', name: 'missing-ca' }));
    await api.waitFor(() => {
      const listeners = (
        api.get('gateways', NS, 'gw')?.status as { listeners?: ListenerStatus[] } | undefined
      )?.listeners;
      const strict = listeners?.find((listener) => listener.name === 'strict');
      return (
        hasCondition(strict?.conditions, 'ResolvedRefs', 'False', 'InvalidCACertificateRef') &&
        hasCondition(strict?.conditions, 'Accepted', 'False', 'NoValidCACertificate') &&
        hasCondition(strict?.conditions, 'Programmed', 'False')
      );
    }, 'the strict listener ResolvedRefs False');
    // Its host is served by no listener now: held closed (503), never served without the check.
    let last = '';
    await waitFor(async () => {
      try {
        const answer = await get(port, 'strict.test');
        last = `${answer.status} ${answer.body}`;
        return answer.status === 503;
      } catch (error) {
        last = String(error);
        return false;
      }
    }, 10_000).catch((error) => {
      throw new Error(`${(error as Error).message}: last ${last}`);
    });
    // A kind that cannot hold a CA bundle.
    api.applyRaw(gateway({ group: 'example.com', kind: 'Bundle', name: 'x' }));
    await api.waitFor(() => {
      const listeners = (
        api.get('gateways', NS, 'gw')?.status as { listeners?: ListenerStatus[] } | undefined
      )?.listeners;
      return hasCondition(
        listeners?.find((listener) => listener.name === 'strict')?.conditions,
        'ResolvedRefs',
        'False',
        'InvalidCACertificateKind',
      );
    }, 'ResolvedRefs False InvalidCACertificateKind');
  });
});
