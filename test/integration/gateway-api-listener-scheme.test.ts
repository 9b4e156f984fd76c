/**
 * A route serves the requests of the kinds of listener it is attached through (docs/gateway-api.md
 * #gateways, #ports), through the built process against the fake API server: the Gateway API guide
 * "HTTP path redirects and rewrites" (examples/standard/http-redirect-rewrite of
 * kubernetes-sigs/gateway-api) redirects plain HTTP to HTTPS with a RequestRedirect route attached to
 * the `http` listener, and serves the site with a route attached to the `https` listener. Compiled
 * without the listener's kind, the redirect also answered on the TLS port: a redirect loop.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasOpenssl, SecretVolume, selfSigned } from '../helpers/certs.ts';
import {
  gatewayClassObject,
  gatewayObject,
  httpRouteObject,
  namespaceObject,
} from '../helpers/fake-gateway-api.ts';
import {
  endpointSlice,
  type FakeKubeApi,
  secret,
  service,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const NAMESPACE = 'default';
const HOST = 'redirect.example';
const SETTLE_MS = 10_000;

interface Answer {
  status: number;
  location: string | undefined;
  body: string;
}

/** GET `path` over TLS with SNI and Host `HOST`, not following redirects. */
function tlsGet(port: number, path: string, ca: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, path, servername: HOST, headers: { host: HOST }, ca, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location, body }));
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
}

describe('Gateway API: a route answers only on the kinds of listener it is attached through', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  let upstream: Upstream;
  let api: FakeKubeApi;
  let dir: string;
  let tollgate: Tollgate;
  let volume: SecretVolume;
  const fallback = selfSigned('default.test');
  const site = selfSigned(HOST, { ip: false });

  before(async () => {
    upstream = await startUpstream({ name: 'example-svc' });
    api = await startFakeKubeApi();
    api.applyRaw(namespaceObject(NAMESPACE));
    api.applyRaw(gatewayClassObject());
    api.apply(
      service({
        name: 'example-svc',
        namespace: NAMESPACE,
        ports: [{ name: 'http', port: 80, targetPort: upstream.port }],
      }),
    );
    api.apply(
      endpointSlice({
        service: 'example-svc',
        namespace: NAMESPACE,
        ports: [{ name: 'http', port: upstream.port }],
        endpoints: [{ ip: '127.0.0.1' }],
      }),
    );
    volume = new SecretVolume({ 'tls.crt': fallback.cert, 'tls.key': fallback.key });
    dir = await mkdtemp(join(tmpdir(), 'tollgate-gateway-scheme-'));
    tollgate = await startTollgate({
      main: {
        access_log: false,
        proxy_address_tls: '127.0.0.1:0',
        tls_certificate: volume.path('tls.crt'),
        tls_key_file: volume.path('tls.key'),
        kubernetes: { kubeconfig: api.writeKubeconfig(dir, NAMESPACE), gateway_class: 'tollgate' },
      },
      upstreams: { upstreams: {} },
      env: { KUBECONFIG: '' },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await api?.stop();
    await upstream?.close();
    volume?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("the guide's HTTP→HTTPS redirect: a plain request is redirected, the same request over TLS is served (no redirect loop)", async () => {
    // The guide's objects: gateway-redirect-http-https.yaml, httproute-redirect-http.yaml,
    // httproute-redirect-https.yaml.
    api.apply(
      secret({
        name: 'redirect-example',
        namespace: NAMESPACE,
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': site.cert.toString(), 'tls.key': site.key.toString() },
      }),
    );
    api.applyRaw(
      gatewayObject({
        name: 'redirect-gateway',
        namespace: NAMESPACE,
        listeners: [
          { name: 'http', protocol: 'HTTP', port: 80 },
          {
            name: 'https',
            protocol: 'HTTPS',
            port: 443,
            tls: { mode: 'Terminate', certificateRefs: [{ name: 'redirect-example' }] },
          },
        ],
      }),
    );
    api.applyRaw(
      httpRouteObject({
        name: 'http-filter-redirect',
        namespace: NAMESPACE,
        parentRefs: [{ name: 'redirect-gateway', sectionName: 'http' }],
        hostnames: [HOST],
        rules: [
          { filters: [{ type: 'RequestRedirect', requestRedirect: { scheme: 'https', statusCode: 301 } }] },
        ],
      }),
    );
    api.applyRaw(
      httpRouteObject({
        name: 'https-route',
        namespace: NAMESPACE,
        parentRefs: [{ name: 'redirect-gateway', sectionName: 'https' }],
        hostnames: [HOST],
        rules: [{ backendRefs: [{ name: 'example-svc', port: 80 }] }],
      }),
    );

    let plain = '';
    try {
      await waitFor(async () => {
        const res = await request(`${tollgate.proxyUrl}/cart?x=1`, { headers: { host: HOST } });
        plain = `${res.status} ${String(res.headers.location)}`;
        return res.status === 301;
      }, SETTLE_MS);
    } catch {
      assert.fail(`plain http://${HOST}/cart?x=1: expected 301, got ${plain}`);
    }
    assert.equal(plain, `301 https://${HOST}/cart?x=1`);

    const port = tollgate.tlsPort as number;
    let last: Answer | null = null;
    try {
      await waitFor(async () => {
        last = await tlsGet(port, '/cart?x=1', site.cert.toString()).catch((error: Error) => ({
          status: 0,
          location: undefined,
          body: error.message,
        }));
        return last.status === 200;
      }, SETTLE_MS);
    } catch {
      const answer = last as Answer | null;
      assert.fail(
        `https://${HOST}/cart?x=1: expected 200 from example-svc, got ${answer?.status} ${answer?.location ?? answer?.body.slice(0, 120)}`,
      );
    }
    assert.equal(String(JSON.parse((last as unknown as Answer).body).server), 'example-svc');
  });
});
