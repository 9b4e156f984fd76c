import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { request, type Tollgate } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

/**
 * Header spoofing against the real process: what a client sends under our own header names (in any
 * spelling), forwarding headers, re-routing headers, and Connection tricks. The echo upstream
 * reports the headers it received.
 */
const scope = testScope();

const SPOOFED = {
  X_Tollgate_Subject: 'admin',
  'X-Tollgate-Subject': 'admin',
  'x-tollgate-role': 'admin',
  X_Forwarded_For: '6.6.6.6',
  X_Forwarded_Proto: 'https',
  x_forwarded_host: 'evil.test',
  Forwarded: 'for=6.6.6.6;proto=https',
  'X-Real-IP': '6.6.6.6',
  X_Real_IP: '6.6.6.6',
  'X-Client-IP': '6.6.6.6',
  'True-Client-IP': '6.6.6.6',
  'X-Forwarded-Port': '443',
  'X-Forwarded-Prefix': '/admin',
  'X-Original-URL': '/admin/delete',
  'X-Rewrite-URL': '/admin/delete',
  'X-HTTP-Method-Override': 'DELETE',
  X_HTTP_Method_Override: 'DELETE',
  // What a second auth layer behind Tollgate (nginx auth_request, oauth2-proxy) reads as the request.
  'X-Forwarded-Uri': '/admin/delete',
  'X-Forwarded-Method': 'DELETE',
  'X-Original-URI': '/admin/delete',
  'X-Original-Method': 'DELETE',
  'X-Auth-Request-Redirect': 'https://evil.test/',
};

/** Headers describing the original request to an auth layer behind Tollgate. */
const ORIGINAL_REQUEST = [
  'x-forwarded-uri',
  'x-forwarded-method',
  'x-original-uri',
  'x-auth-request-redirect',
];

async function setup(
  main: Record<string, unknown> = {},
): Promise<{ upstream: Upstream; tollgate: Tollgate }> {
  const upstream = await scope.upstream();
  const tollgate = await scope.tollgate({
    main,
    upstreams: {
      upstreams: {
        'app.test': {
          paths: {
            '/': { servers: [upstream.address] },
            '/private': {
              servers: [upstream.address],
              authorization: { type: 'basic', creds: 'alice:wonderland' },
            },
          },
        },
      },
    },
  });
  return { upstream, tollgate };
}

async function forwarded(
  tollgate: Tollgate,
  path: string,
  headers: Record<string, string>,
): Promise<IncomingHttpHeaders> {
  const res = await request(tollgate.proxyUrl, { path, headers: { host: 'app.test', ...headers } });
  assert.equal(res.status, 200, res.body);
  return res.json<{ headers: IncomingHttpHeaders }>().headers;
}

/** Header names the upstream received, normalised the way a CGI-style upstream reads them. */
const cgiNames = (headers: IncomingHttpHeaders) =>
  Object.keys(headers).map((name) => name.replaceAll('_', '-'));

describe('headers from an untrusted client', () => {
  it('no client copy of our headers, in any spelling, and none of the forwarding or re-routing family', async () => {
    const { tollgate } = await setup();
    const basic = `Basic ${Buffer.from('alice:wonderland').toString('base64')}`;
    const headers = await forwarded(tollgate, '/private/x', { ...SPOOFED, authorization: basic });
    assert.equal(headers['x-tollgate-subject'], 'alice');
    assert.equal(headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(headers['x-forwarded-proto'], 'http');
    assert.equal(headers['x-forwarded-host'], 'app.test');
    const names = cgiNames(headers);
    // Each of ours exactly once (the one we wrote); nothing else from the spoofed set.
    for (const name of ['x-tollgate-subject', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host']) {
      assert.equal(names.filter((n) => n === name).length, 1, name);
    }
    for (const name of [
      'x-tollgate-role',
      'forwarded',
      'x-real-ip',
      'x-client-ip',
      'true-client-ip',
      'x-forwarded-port',
      'x-forwarded-prefix',
      'x-original-url',
      'x-rewrite-url',
      'x-http-method-override',
      'x-original-method',
      ...ORIGINAL_REQUEST,
    ]) {
      assert.ok(!names.includes(name), `${name} reached the upstream`);
    }
  });

  it('on an open route, a client-chosen subject never arrives, whatever the spelling', async () => {
    const { tollgate } = await setup();
    const headers = await forwarded(tollgate, '/open', {
      X_Tollgate_Subject: 'admin',
      'X-TOLLGATE-SUBJECT': 'root',
    });
    assert.ok(!cgiNames(headers).includes('x-tollgate-subject'));
  });

  it('Connection cannot remove Host or our own headers, but still removes what it may', async () => {
    const { tollgate } = await setup();
    const headers = await forwarded(tollgate, '/', {
      connection: 'host, x-forwarded-for, x-tollgate-subject, content-length, x-custom',
      'x-custom': 'hop-by-hop by request',
      'x-kept': 'end to end',
    });
    assert.equal(headers.host, 'app.test');
    assert.equal(headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(headers['x-custom'], undefined);
    assert.equal(headers['x-kept'], 'end to end');
  });

  it('a request body keeps its Content-Length even when Connection names it', async () => {
    const { tollgate } = await setup();
    const res = await request(tollgate.proxyUrl, {
      method: 'POST',
      path: '/upload',
      headers: { host: 'app.test', connection: 'content-length', 'content-length': '5' },
      body: 'hello',
    });
    assert.equal(res.status, 200);
    assert.equal(res.json<{ bodyBytes: number }>().bodyBytes, 5);
  });
});

describe('headers from a trusted proxy', () => {
  it('keeps the forwarding family as the proxy sent it, appends our hop to Forwarded, drops re-routing', async () => {
    const { tollgate } = await setup({ trusted_proxies: ['127.0.0.1'] });
    const headers = await forwarded(tollgate, '/', {
      ...SPOOFED,
      'X-Forwarded-For': '203.0.113.7',
    });
    assert.equal(headers['x-real-ip'], '6.6.6.6');
    assert.equal(headers['x-client-ip'], '6.6.6.6');
    assert.equal(headers['true-client-ip'], '6.6.6.6');
    assert.equal(headers['x-forwarded-port'], '443');
    assert.equal(headers['x-forwarded-prefix'], '/admin');
    // The proxy in front describes the original request: its word is kept, as for X-Forwarded-Prefix.
    assert.equal(headers['x-forwarded-uri'], '/admin/delete');
    assert.equal(headers['x-forwarded-method'], 'DELETE');
    assert.equal(headers['x-original-uri'], '/admin/delete');
    assert.equal(headers['x-auth-request-redirect'], 'https://evil.test/');
    assert.equal(headers.forwarded, 'for=6.6.6.6;proto=https, for=127.0.0.1;proto=http;host="app.test"');
    assert.equal(headers['x-forwarded-for'], '203.0.113.7, 127.0.0.1');
    const names = cgiNames(headers);
    for (const name of ['x-original-url', 'x-rewrite-url', 'x-http-method-override', 'x-original-method']) {
      assert.ok(!names.includes(name), `${name} reached the upstream`);
    }
    // Underscore spellings are never what a proxy writes: dropped even from a trusted peer.
    assert.equal(headers.x_real_ip, undefined);
    assert.equal(headers.x_tollgate_subject, undefined);
    assert.equal(names.filter((n) => n === 'x-real-ip').length, 1);
  });
});
