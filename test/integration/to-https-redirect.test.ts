import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasOpenssl, type SelfSigned, selfSigned } from '../helpers/certs.ts';
import { freePort, type InProcessTollgate, request, startInProcess } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

const METHODS = [
  { method: 'GET', status: 301 },
  { method: 'HEAD', status: 301 },
  { method: 'POST', status: 308 },
  { method: 'PUT', status: 308 },
  { method: 'PATCH', status: 308 },
  { method: 'DELETE', status: 308 },
  { method: 'OPTIONS', status: 308 },
];

/** One request over TLS to the proxy, trusting the test's self-signed certificate. */
function httpsRequest(
  port: number,
  ca: Buffer,
  options: { path: string; method?: string; headers?: Record<string, string> },
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, ca, servername: 'localhost', agent: false, ...options },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('to_https redirects (per path, https_port 443, trusted proxy)', () => {
  let upstream: Upstream;
  let tollgate: InProcessTollgate;

  before(async () => {
    upstream = await startUpstream();
    tollgate = await startInProcess({
      main: { trusted_proxies: ['127.0.0.1/32'] },
      upstreams: {
        upstreams: {
          'shop.example.com': {
            paths: {
              '/': { servers: [upstream.address] },
              '/account': { servers: [upstream.address], to_https: true },
            },
          },
        },
      },
    });
  });
  after(async () => {
    await tollgate.stop();
    await upstream.close();
  });

  for (const { method, status } of METHODS) {
    for (const query of ['', '?next=%2Fcart&x=1&x=2']) {
      it(`${method} ${query ? 'with' : 'without'} a query → ${status}, query kept, no port`, async () => {
        const before = upstream.requests.length;
        const res = await request(`${tollgate.proxyUrl}/account/orders${query}`, {
          method,
          headers: { host: 'Shop.Example.com:8080' },
          body: method === 'POST' || method === 'PUT' || method === 'PATCH' ? 'payload' : undefined,
        });
        assert.equal(res.status, status);
        assert.equal(res.headers.location, `https://shop.example.com/account/orders${query}`);
        assert.equal(upstream.requests.length, before, 'a redirected request never reaches the upstream');
      });
    }
  }

  it('redirects to the normalised path', async () => {
    const res = await request(`${tollgate.proxyUrl}/`, {
      path: '/x/../account//a/./b',
      headers: { host: 'shop.example.com' },
    });
    assert.equal(res.status, 301);
    assert.equal(res.headers.location, 'https://shop.example.com/account/a/b');
  });

  it('does not redirect paths without to_https', async () => {
    const res = await request(`${tollgate.proxyUrl}/catalog`, { headers: { host: 'shop.example.com' } });
    assert.equal(res.status, 200);
  });

  it('does not redirect when a trusted proxy says X-Forwarded-Proto: https', async () => {
    const res = await request(`${tollgate.proxyUrl}/account/orders?x=1`, {
      headers: { host: 'shop.example.com', 'x-forwarded-proto': 'https' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.json<{ url: string }>().url, '/account/orders?x=1');
  });
});

describe('to_https with a TLS listener, https_port and global to_https', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  let upstream: Upstream;
  let tollgate: InProcessTollgate;
  let tlsPort: number;
  let cert: SelfSigned;
  let certDir: string;

  before(async () => {
    upstream = await startUpstream();
    cert = selfSigned('localhost');
    certDir = await mkdtemp(join(tmpdir(), 'tollgate-tls-'));
    await writeFile(join(certDir, 'tls.crt'), cert.cert);
    await writeFile(join(certDir, 'tls.key'), cert.key);
    tlsPort = await freePort();
    tollgate = await startInProcess({
      main: {
        proxy_address_tls: `127.0.0.1:${tlsPort}`,
        tls_certificate: join(certDir, 'tls.crt'),
        tls_key_file: join(certDir, 'tls.key'),
        https_port: 8443,
        // No trusted_proxies: a client's own X-Forwarded-Proto must not dodge the redirect.
      },
      upstreams: {
        to_https: true,
        upstreams: {
          DEFAULT: { paths: { '/': { servers: [upstream.address] } } },
          '[::1]': { paths: { '/': { servers: [upstream.address] } } },
        },
      },
    });
  });
  after(async () => {
    await tollgate.stop();
    await upstream.close();
    await rm(certDir, { recursive: true, force: true });
  });

  it('writes https_port into the Location', async () => {
    const res = await request(`${tollgate.proxyUrl}/a?b=c`, {
      method: 'POST',
      headers: { host: 'app.test' },
    });
    assert.equal(res.status, 308);
    assert.equal(res.headers.location, 'https://app.test:8443/a?b=c');
  });

  it('brackets an IPv6 host', async () => {
    const res = await request(`${tollgate.proxyUrl}/a`, { headers: { host: '[::1]:8080' } });
    assert.equal(res.status, 301);
    assert.equal(res.headers.location, 'https://[::1]:8443/a');
  });

  it('ignores X-Forwarded-Proto from an untrusted peer', async () => {
    const res = await request(`${tollgate.proxyUrl}/a`, {
      headers: { host: 'app.test', 'x-forwarded-proto': 'https' },
    });
    assert.equal(res.status, 301);
  });

  it('serves requests arriving over the TLS listener, with X-Forwarded-Proto https upstream', async () => {
    for (const method of ['GET', 'POST']) {
      const res = await httpsRequest(tlsPort, cert.cert, {
        path: '/a?b=c',
        method,
        headers: { host: 'app.test' },
      });
      assert.equal(res.status, 200);
      const echoed = JSON.parse(res.body) as { url: string; headers: Record<string, string> };
      assert.equal(echoed.url, '/a?b=c');
      assert.equal(echoed.headers['x-forwarded-proto'], 'https');
    }
  });
});
