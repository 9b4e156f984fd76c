import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAIN_JS, request, startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import {
  type BlackholeAddress,
  blackholeAddress,
  startUpstream,
  type Upstream,
} from '../helpers/upstream.ts';

/**
 * The backend-side path policies of upstreams.yaml (docs/traffic.md "Weighted servers", "Timeouts";
 * docs/configuration.md `upstream_host`, `redirect`; docs/authentication.md "Sign-in URL variables"),
 * through the built proxy as a process.
 */

const HOST = 'app.example.com';

describe('backend policies in upstreams.yaml', () => {
  let heavy: Upstream;
  let light: Upstream;
  let drained: Upstream;
  let slow: Upstream;
  let stalling: Upstream;
  let echo: Upstream;
  let blackhole: BlackholeAddress;
  let authService: http.Server;
  let tollgate: Tollgate;

  before(async () => {
    [heavy, light, drained, echo] = await Promise.all([
      startUpstream({ name: 'heavy' }),
      startUpstream({ name: 'light' }),
      startUpstream({ name: 'drained' }),
      startUpstream({ name: 'echo' }),
    ]);
    // Answers after 3 s: a path whose response timeout is shorter gets 504, the others wait.
    slow = await startUpstream({
      name: 'slow',
      handler: (_req, res) => {
        const timer = setTimeout(() => res.end('late'), 3_000);
        res.on('close', () => clearTimeout(timer));
      },
    });
    // Sends its headers and one chunk, then nothing: only an idle timer ends the response.
    stalling = await startUpstream({
      name: 'stalling',
      handler: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('first chunk\n');
      },
    });
    blackhole = await blackholeAddress();
    // A forward-auth service that never knows the client: every check is a 401.
    authService = http.createServer((_req, res) => {
      res.writeHead(401, { 'content-type': 'text/plain' });
      res.end('who are you?');
    });
    authService.listen(0, '127.0.0.1');
    await once(authService, 'listening');
    const authUrl = `http://127.0.0.1:${(authService.address() as AddressInfo).port}/check`;

    tollgate = await startTollgate({
      main: { upstream_response_timeout_seconds: 30, upstream_connect_timeout_seconds: 30 },
      upstreams: {
        // Sticky sessions on: requests without the cookie are balanced (by weight), pinned ones stay.
        sticky_sessions: true,
        upstreams: {
          [HOST]: {
            paths: {
              '/weighted': {
                servers: [
                  { address: heavy.address, weight: 3 },
                  light.address,
                  { address: drained.address, weight: 0 },
                ],
              },
              '/slow-short': { servers: [slow.address], timeouts: { response_seconds: 0.3 } },
              '/slow-default': { servers: [slow.address] },
              '/stall': { servers: [stalling.address], timeouts: { idle_seconds: 0.5 } },
              '/unreachable': { servers: [blackhole.address], timeouts: { connect_seconds: 0.5 } },
              '/vhost': { servers: [echo.address], upstream_host: 'internal.svc.cluster.local' },
              '/moved': { redirect: { url: 'https://new.example.com/landing?from=old', code: 302 } },
              '/gone': { redirect: { url: 'https://new.example.com/' } },
              '/oauth': {
                servers: [echo.address],
                authorization: {
                  type: 'forward',
                  url: authUrl,
                  signin_url: 'https://$host/oauth2/start?rd=$escaped_request_uri',
                },
              },
              '/portal': {
                servers: [echo.address],
                authorization: {
                  type: 'forward',
                  url: authUrl,
                  signin_url: 'https://login.example.com/start?back=$scheme://$host$request_uri',
                },
              },
            },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await Promise.all([heavy, light, drained, slow, stalling, echo].map((upstream) => upstream?.close()));
    await blackhole?.close();
    authService?.close();
    authService?.closeAllConnections();
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    request(`${tollgate.proxyUrl}${path}`, { headers: { host: HOST, ...headers } });

  it('weighted servers: 3 of every 4 requests to the server of weight 3, none to weight 0', async () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const res = await get('/weighted');
      assert.equal(res.status, 200);
      const server = res.json<{ server: string }>().server;
      counts.set(server, (counts.get(server) ?? 0) + 1);
    }
    // Smooth weighted round robin is deterministic: exact shares, not a statistical tendency.
    assert.deepEqual(Object.fromEntries(counts), { heavy: 30, light: 10 });
    assert.equal(drained.requests.length, 0);
  });

  it('weighted servers: a client pinned by the sticky cookie stays with its server, whatever the weights', async () => {
    let pinned: { cookie: string } | null = null;
    for (let i = 0; i < 4 && pinned === null; i++) {
      const res = await get('/weighted');
      if (res.json<{ server: string }>().server !== 'light') continue;
      const cookie = (res.headers['set-cookie'] as string[]).find((c) => c.startsWith('tollgate_sticky='));
      pinned = { cookie: String(cookie).split(';')[0] as string };
    }
    assert.ok(pinned !== null, 'the server of weight 1 is picked once in every 4 requests');
    for (let i = 0; i < 8; i++) {
      const res = await get('/weighted', { cookie: pinned.cookie });
      assert.equal(res.json<{ server: string }>().server, 'light');
    }
  });

  it('timeouts.response_seconds: 504 on this path while the global timeout lets another wait', async () => {
    const started = performance.now();
    const short = await get('/slow-short');
    assert.equal(short.status, 504);
    assert.ok(performance.now() - started < 2_500, 'answered before the upstream would have');
    const patient = await get('/slow-default');
    assert.equal(patient.status, 200);
    assert.equal(patient.body, 'late');
  });

  it('timeouts.idle_seconds: a response body that goes silent is cut', async () => {
    const started = performance.now();
    const outcome = await new Promise<{ status: number; body: string; complete: boolean }>((resolve) => {
      const req = http.get(`${tollgate.proxyUrl}/stall`, { headers: { host: HOST }, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('error', () => {});
        res.on('close', () => resolve({ status: res.statusCode ?? 0, body, complete: res.complete }));
      });
      req.on('error', () => {});
    });
    assert.equal(outcome.status, 200);
    assert.equal(outcome.body, 'first chunk\n');
    assert.equal(outcome.complete, false, 'the response must not look complete');
    // The global idle timer is 30 s: ending well before it is this path's 0.5 s.
    assert.ok(performance.now() - started < 15_000);
  });

  it('timeouts.connect_seconds: a server that never accepts fails after the path connect timeout', async () => {
    const started = performance.now();
    const res = await get('/unreachable');
    assert.equal(res.status, 502);
    // The global connect timeout is 30 s.
    assert.ok(performance.now() - started < 15_000, `took ${performance.now() - started} ms`);
  });

  it('upstream_host: the upstream gets that Host; X-Forwarded-Host keeps the client one', async () => {
    const res = await get('/vhost');
    const seen = res.json<{ headers: Record<string, string> }>().headers;
    assert.equal(seen.host, 'internal.svc.cluster.local');
    assert.equal(seen['x-forwarded-host'], HOST);
  });

  it('redirect: exactly the URL with its code, nothing appended; 301 by default', async () => {
    const moved = await get('/moved/deeper?x=1');
    assert.equal(moved.status, 302);
    assert.equal(moved.headers.location, 'https://new.example.com/landing?from=old');
    const gone = await get('/gone', {});
    assert.equal(gone.status, 301);
    assert.equal(gone.headers.location, 'https://new.example.com/');
  });

  it("signin_url variables: oauth2-proxy's form is expanded and rd is not added twice", async () => {
    const res = await get('/oauth/page?q=1&r=a b'.replace(' ', '%20'), { host: 'App.Example.com:8080' });
    assert.equal(res.status, 302);
    assert.equal(
      res.headers.location,
      'https://app.example.com/oauth2/start?rd=%2Foauth%2Fpage%3Fq%3D1%26r%3Da%2520b',
    );
  });

  it('signin_url variables: $request_uri is escaped and rd appended when the URL has none', async () => {
    const res = await get('/portal/a?q="x"&n=<1>');
    assert.equal(res.status, 302);
    const location = String(res.headers.location);
    assert.ok(
      location.startsWith(
        'https://login.example.com/start?back=http://app.example.com/portal/a?q=%22x%22&n=%3C1%3E&rd=',
      ),
      location,
    );
    assert.equal(location.match(/[?&]rd=/g)?.length, 1);
    assert.doesNotMatch(location, /["<> ]/);
  });
});

describe('validate refuses bad backend policies with file:line', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tollgate-backend-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('weights summing to 0, a bad duration, an unknown $variable, a bad redirect code', async () => {
    await writeFile(join(dir, 'main.yaml'), 'proxy_address_http: "127.0.0.1:0"\n');
    await writeFile(
      join(dir, 'upstreams.yaml'),
      [
        'upstreams:',
        '  app.test:',
        '    paths:',
        '      /a:',
        '        servers: [{ address: "127.0.0.1:3000", weight: 0 }, { address: "127.0.0.1:3001", weight: 0 }]',
        '      /b:',
        '        servers: ["127.0.0.1:3000"]',
        '        timeouts: { response_seconds: "10s", idle_seconds: -1 }',
        '      /c:',
        '        servers: ["127.0.0.1:3000"]',
        '        authorization:',
        '          type: forward',
        '          url: http://127.0.0.1:4180/check',
        '          signin_url: "https://$host/start?rd=$http_referer"',
        '      /d:',
        '        redirect: { url: "https://x.test/", code: 305 }',
        '',
      ].join('\n'),
    );
    const result = spawnSync(process.execPath, [MAIN_JS, 'validate', '--config', join(dir, 'main.yaml')], {
      encoding: 'utf8',
      env: { ...process.env, TOLLGATE_CONFIG: '' },
      timeout: 60_000,
    });
    assert.equal(result.status, 1, result.stdout);
    const stderr = result.stderr;
    assert.match(stderr, /upstreams\.yaml:5:\d+: .*servers: the weights sum to 0/);
    assert.match(stderr, /upstreams\.yaml:8:\d+: .*timeouts\.response_seconds: expected a number/);
    assert.match(stderr, /upstreams\.yaml:8:\d+: .*timeouts\.idle_seconds: -1 is out of range/);
    assert.match(stderr, /upstreams\.yaml:14:\d+: .*signin_url: uses the variable \$http_referer/);
    assert.match(stderr, /upstreams\.yaml:16:\d+: .*redirect\.code: 305 is not a redirect code/);
  });
});
