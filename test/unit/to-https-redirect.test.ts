import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, it } from 'node:test';
import type { ProxyRequest } from '../../src/proxy/context.ts';
import { createToHttpsStage } from '../../src/proxy/stages/to-https.ts';
import type { Route } from '../../src/routing/types.ts';

interface Written {
  status: number;
  headers: Record<string, string | number>;
  body: string;
}

function fakeRequest(options: {
  method?: string;
  host?: string;
  path?: string;
  query?: string;
  secure?: boolean;
  toHttps?: boolean;
}): { request: ProxyRequest; written: Written } {
  const written: Written = { status: 0, headers: {}, body: '' };
  const fake = {
    headersSent: false,
    writeHead(status: number, headers: Record<string, string | number>) {
      written.status = status;
      written.headers = headers;
      fake.headersSent = true;
    },
    end(body?: string) {
      written.body = body ?? '';
    },
  };
  const res = fake as unknown as ServerResponse;
  const route = { id: 'example.com/', hostKey: 'example.com', toHttps: options.toHttps ?? true } as Route;
  const request = {
    req: { method: options.method ?? 'GET' } as IncomingMessage,
    res,
    route,
    host: options.host ?? 'example.com',
    path: options.path ?? '/a/b',
    query: options.query ?? '',
    secure: options.secure ?? false,
  } as unknown as ProxyRequest;
  return { request, written };
}

describe('to_https stage', () => {
  const stage = createToHttpsStage({ httpsPort: 443 });

  for (const method of ['GET', 'HEAD']) {
    it(`redirects ${method} with 301 and no port when https_port is 443`, () => {
      const { request, written } = fakeRequest({ method });
      assert.equal(stage(request), false);
      assert.equal(written.status, 301);
      assert.equal(written.headers.location, 'https://example.com/a/b');
      assert.equal(written.headers['content-length'], Buffer.byteLength(written.body));
    });
  }

  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
    it(`redirects ${method} with 308 so the method and body are kept`, () => {
      const { request, written } = fakeRequest({ method, query: 'x=1&y=%20z' });
      assert.equal(stage(request), false);
      assert.equal(written.status, 308);
      assert.equal(written.headers.location, 'https://example.com/a/b?x=1&y=%20z');
    });
  }

  it('keeps the query byte for byte', () => {
    const { request, written } = fakeRequest({ query: 'a=1&a=2&b=%2F&c' });
    stage(request);
    assert.equal(written.headers.location, 'https://example.com/a/b?a=1&a=2&b=%2F&c');
  });

  it('writes https_port when it is not 443', () => {
    const { request, written } = fakeRequest({ path: '/' });
    createToHttpsStage({ httpsPort: 8443 })(request);
    assert.equal(written.headers.location, 'https://example.com:8443/');
  });

  it('brackets an IPv6 host', () => {
    const { request, written } = fakeRequest({ host: '2001:db8::1', path: '/x' });
    createToHttpsStage({ httpsPort: 8443 })(request);
    assert.equal(written.headers.location, 'https://[2001:db8::1]:8443/x');
  });

  it('passes secure requests on, synchronously', () => {
    const { request, written } = fakeRequest({ secure: true });
    assert.equal(stage(request), true);
    assert.equal(written.status, 0);
  });

  it('passes requests on routes without to_https', () => {
    const { request, written } = fakeRequest({ toHttps: false });
    assert.equal(stage(request), true);
    assert.equal(written.status, 0);
  });
});
