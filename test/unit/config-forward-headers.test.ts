import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import { problems, valid } from '../fixtures/config/problems.ts';

const FILE = 'upstreams.yaml';
const ROUTES = 'upstreams:\n  DEFAULT:\n    paths:\n      /:\n        servers: ["127.0.0.1:3000"]\n';
const parse = (head: string) => parseUpstreamsConfig(`${head}${ROUTES}`, FILE);

describe('type: forward', () => {
  it('reads every key with its defaults; creds/data are the URL (Aralez)', () => {
    const full = valid(
      parse(
        'authorization:\n  type: forward\n  url: http://auth:4180/oauth2/auth\n' +
          '  auth_response_headers: [X-Auth-Request-User]\n  subject_header: X-Auth-Request-User\n' +
          '  timeout_seconds: 2.5\n  signin_url: https://app.example.com/oauth2/start\n',
      ),
    );
    assert.deepEqual(full.authorization?.forward, {
      url: 'http://auth:4180/oauth2/auth',
      authRequestHeaders: ['cookie', 'authorization'],
      authResponseHeaders: ['x-auth-request-user'],
      subjectHeader: 'x-auth-request-user',
      timeoutMs: 2500,
      signinUrl: 'https://app.example.com/oauth2/start',
    });
    const aralez = valid(parse('authorization:\n  type: forward\n  data: https://auth/check\n'));
    assert.equal(aralez.authorization?.forward?.url, 'https://auth/check');
    assert.equal(aralez.authorization?.forward?.timeoutMs, 5000);
  });

  it('refuses a missing or non-http URL, managed header names and keys of other methods, with file:line', () => {
    assert.deepEqual(problems(parse('authorization:\n  type: forward\n')), [
      "upstreams.yaml:1:1: authorization: forward needs 'url': the auth service to ask",
    ]);
    assert.deepEqual(
      problems(
        parse(
          'authorization:\n  type: forward\n  url: ftp://auth/x\n' +
            '  auth_response_headers: [X-Forwarded-User, Connection]\n  users: []\n',
        ),
      ),
      [
        'upstreams.yaml:3:8: authorization.url: must be an http:// or https:// URL, not ftp:',
        "upstreams.yaml:4:27: authorization.auth_response_headers[0]: 'X-Forwarded-User' is written or guarded by Tollgate itself and cannot be configured",
        "upstreams.yaml:4:45: authorization.auth_response_headers[1]: 'Connection' is a hop-by-hop header: it never crosses the proxy",
        "upstreams.yaml:5:3: authorization.users: 'users' is not used by type forward",
      ],
    );
    assert.deepEqual(problems(parse('authorization:\n  type: basic\n  creds: "a:b"\n  url: http://x/\n')), [
      "upstreams.yaml:4:3: authorization.url: 'url' is for type forward",
    ]);
  });
});

describe('header rules', () => {
  it('refuses Tollgate’s own, hop-by-hop and framing names, and two rules for one name', () => {
    assert.deepEqual(
      problems(
        parse(
          'request_headers:\n  set: { X-Tollgate-Subject: admin, X-Forwarded-For: 1.2.3.4, Host: evil }\n' +
            '  add: { x-env: a }\n  remove: [X-Env, Transfer-Encoding]\n' +
            'server_headers: ["X-Env:b", "nocolon"]\n',
        ),
      ),
      [
        "upstreams.yaml:2:10: request_headers.set.X-Tollgate-Subject: 'X-Tollgate-Subject' is written or guarded by Tollgate itself and cannot be configured",
        "upstreams.yaml:2:37: request_headers.set.X-Forwarded-For: 'X-Forwarded-For' is written or guarded by Tollgate itself and cannot be configured",
        "upstreams.yaml:2:63: request_headers.set.Host: 'Host' describes the request itself and cannot be configured",
        "upstreams.yaml:4:12: request_headers.remove[0]: 'x-env' already has a rule here ('add'); one rule per name",
        "upstreams.yaml:4:19: request_headers.remove[1]: 'Transfer-Encoding' is a hop-by-hop header: it never crosses the proxy",
        "upstreams.yaml:5:1: server_headers: 'x-env' also has a rule in 'request_headers'; keep one",
        "upstreams.yaml:5:29: server_headers[1]: must be 'Name:Value'",
      ],
    );
  });

  it('Aralez lists become set (server_headers) and add (client_headers); redirect_to needs no servers', () => {
    const config = valid(
      parseUpstreamsConfig(
        'server_headers: ["X-From: tollgate"]\nclient_headers: ["Access-Control-Allow-Origin:*"]\n' +
          'upstreams:\n  a.example.com:\n    paths:\n      /old:\n        redirect_to: https://new.example.com/\n',
        FILE,
      ),
    );
    assert.deepEqual(config.requestHeaders, {
      set: [{ name: 'x-from', value: 'tollgate' }],
      add: [],
      remove: [],
    });
    assert.deepEqual(config.responseHeaders, {
      set: [],
      add: [{ name: 'access-control-allow-origin', value: '*' }],
      remove: [],
    });
    assert.equal(config.hosts[0]?.paths[0]?.redirectTo, 'https://new.example.com');
  });
});
