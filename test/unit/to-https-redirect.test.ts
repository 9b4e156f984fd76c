import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { createToHttpsStage } from '../../src/pipeline/2-to-https.ts';
import { PASS } from '../../src/pipeline/verdict.ts';
import type { ProxyRequest } from '../../src/request/record.ts';
import type { Redirect, Verdict } from '../../src/request/verdict.ts';
import type { Route } from '../../src/routing/types.ts';

function fakeRequest(options: {
  method?: string;
  host?: string;
  path?: string;
  query?: string;
  secure?: boolean;
  toHttps?: boolean;
}): ProxyRequest {
  const route = { id: 'example.com/', hostKey: 'example.com', toHttps: options.toHttps ?? true } as Route;
  return {
    req: { method: options.method ?? 'GET' } as IncomingMessage,
    route,
    host: options.host ?? 'example.com',
    path: options.path ?? '/a/b',
    query: options.query ?? '',
    secure: options.secure ?? false,
  } as unknown as ProxyRequest;
}

function redirectOf(verdict: Verdict | Promise<Verdict>): Redirect {
  assert.ok(!(verdict instanceof Promise), 'to_https decides synchronously');
  assert.equal(verdict.kind, 'redirect');
  return verdict as Redirect;
}

describe('to_https stage', () => {
  const stage = createToHttpsStage({ httpsPort: 443 });

  for (const method of ['GET', 'HEAD']) {
    it(`redirects ${method} with 301 and no port when https_port is 443`, () => {
      const redirect = redirectOf(stage(fakeRequest({ method })));
      assert.equal(redirect.status, 301);
      assert.equal(redirect.location, 'https://example.com/a/b');
    });
  }

  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
    it(`redirects ${method} with 308 so the method and body are kept`, () => {
      const redirect = redirectOf(stage(fakeRequest({ method, query: 'x=1&y=%20z' })));
      assert.equal(redirect.status, 308);
      assert.equal(redirect.location, 'https://example.com/a/b?x=1&y=%20z');
    });
  }

  it('keeps the query byte for byte', () => {
    const redirect = redirectOf(stage(fakeRequest({ query: 'a=1&a=2&b=%2F&c' })));
    assert.equal(redirect.location, 'https://example.com/a/b?a=1&a=2&b=%2F&c');
  });

  it('writes https_port when it is not 443', () => {
    const redirect = redirectOf(createToHttpsStage({ httpsPort: 8443 })(fakeRequest({ path: '/' })));
    assert.equal(redirect.location, 'https://example.com:8443/');
  });

  it('brackets an IPv6 host', () => {
    const request = fakeRequest({ host: '2001:db8::1', path: '/x' });
    assert.equal(
      redirectOf(createToHttpsStage({ httpsPort: 8443 })(request)).location,
      'https://[2001:db8::1]:8443/x',
    );
  });

  it('passes secure requests on, synchronously', () => {
    assert.equal(stage(fakeRequest({ secure: true })), PASS);
  });

  it('passes requests on routes without to_https', () => {
    assert.equal(stage(fakeRequest({ toHttps: false })), PASS);
  });
});
