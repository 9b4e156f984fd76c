import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type AuthService, OAUTH2_PROXY_COOKIE, startOauth2Proxy } from '../helpers/auth-services.ts';
import { type InProcessTollgate, startInProcess } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * `Expect: 100-continue`: the client holds its body back until told to send it. Tollgate says
 * `100 Continue` only once the pipeline admitted the request; a refusal goes out as the first and
 * only response, and the body is never asked for. The client here is a raw socket that, like curl,
 * sends the body only after a 100.
 */

const BODY = 'x'.repeat(64 * 1024);
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

interface Exchange {
  /** Status of each response head received, in order (100 first when it came). */
  statuses: number[];
  /** The final response's head and body as text. */
  final: string;
  /** True when the server closed the connection after the final response. */
  closedByServer: boolean;
  bodySent: boolean;
}

/**
 * Sends the head of a POST with `Expect: 100-continue`, sends the body only if a 100 arrives, and
 * resolves once the final response is complete (Content-Length) — never on a timer.
 */
async function postExpectingContinue(port: number, host: string, headers: Record<string, string> = {}) {
  const socket = net.connect({ host: '127.0.0.1', port });
  await once(socket, 'connect');
  const head = [
    'POST /upload HTTP/1.1',
    `Host: ${host}`,
    'Expect: 100-continue',
    'Content-Type: application/octet-stream',
    `Content-Length: ${BODY.length}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    '',
    '',
  ].join('\r\n');
  socket.write(head);
  const exchange: Exchange = { statuses: [], final: '', closedByServer: false, bodySent: false };
  let buffer = '';
  return new Promise<Exchange>((resolve, reject) => {
    socket.setEncoding('latin1');
    socket.on('error', reject);
    socket.on('end', () => {
      exchange.closedByServer = true;
    });
    socket.on('close', () => resolve(exchange));
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end === -1) return;
        const status = Number(buffer.slice(9, 12));
        if (status === 100) {
          exchange.statuses.push(100);
          buffer = buffer.slice(end + 4);
          exchange.bodySent = true;
          socket.write(BODY);
          continue;
        }
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buffer.slice(0, end))?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        exchange.statuses.push(status);
        exchange.final = buffer.slice(0, end + 4 + length);
        // Complete: end our side; a server that closed already makes this the last event.
        socket.end();
        return;
      }
    });
  });
}

describe('Expect: 100-continue is answered only after the pipeline admitted the request', {
  timeout: 20_000,
}, () => {
  let upstream: Upstream;
  let authService: AuthService;
  let tollgate: InProcessTollgate;

  before(async () => {
    upstream = await startUpstream();
    authService = await startOauth2Proxy();
    const server = [upstream.address];
    tollgate = await startInProcess({
      upstreams: {
        upstreams: {
          'basic.test': {
            paths: {
              '/': {
                servers: server,
                authorization: { type: 'basic', users: [{ username: 'alice', password: 'wonderland' }] },
              },
            },
          },
          'limited.test': { paths: { '/': { servers: server, rate_limit: 1 } } },
          'secure.test': { paths: { '/': { servers: server, to_https: true } } },
          'open.test': { paths: { '/': { servers: server } } },
          'forward.test': {
            paths: {
              '/': {
                servers: server,
                authorization: { type: 'forward', url: `${authService.origin}/oauth2/auth` },
              },
            },
          },
        },
      },
    });
  });
  after(async () => {
    await tollgate?.stop();
    await Promise.all([upstream?.close(), authService?.close()]);
  });

  it('forward auth: 100 only after the auth service said 2xx; its 401 goes out without one', async () => {
    const checks = authService.checks.length;
    const allowed = await postExpectingContinue(tollgate.proxyPort, 'forward.test', {
      Cookie: OAUTH2_PROXY_COOKIE,
    });
    assert.deepEqual(allowed.statuses, [100, 200]);
    assert.equal(upstream.requests.at(-1)?.bodyBytes, BODY.length);
    assert.equal(authService.checks[checks]?.bodyBytes, 0);
    const before = upstream.requests.length;
    const refused = await postExpectingContinue(tollgate.proxyPort, 'forward.test');
    assert.deepEqual(refused.statuses, [401]);
    assert.equal(refused.bodySent, false);
    assert.equal(upstream.requests.length, before);
  });

  it('admitted: 100 Continue, then the body is forwarded and the upstream answers', async () => {
    const before = upstream.requests.length;
    const exchange = await postExpectingContinue(tollgate.proxyPort, 'basic.test', {
      Authorization: basic('alice', 'wonderland'),
    });
    assert.deepEqual(exchange.statuses, [100, 200]);
    assert.equal(upstream.requests.length, before + 1);
    assert.equal(upstream.requests.at(-1)?.bodyBytes, BODY.length);
    assert.equal(upstream.requests.at(-1)?.headers.expect, undefined, 'Expect is ours, not forwarded');
  });

  it('401: no 100, the body is never asked for, the connection is closed', async () => {
    const before = upstream.requests.length;
    const exchange = await postExpectingContinue(tollgate.proxyPort, 'basic.test', {
      Authorization: basic('alice', 'wrong'),
    });
    assert.deepEqual(exchange.statuses, [401]);
    assert.equal(exchange.bodySent, false);
    assert.match(exchange.final, /\r\nconnection: close\r\n/i);
    assert.match(exchange.final, /"error":"invalid_credentials"/);
    assert.ok(exchange.closedByServer, 'the server ends the connection: what follows is not a request');
    assert.equal(upstream.requests.length, before, 'nothing reached the upstream');
  });

  it('429: no 100 for a request over the rate limit', async () => {
    const first = await postExpectingContinue(tollgate.proxyPort, 'limited.test');
    const second = await postExpectingContinue(tollgate.proxyPort, 'limited.test');
    // The one-second window may roll over between the two: then both are admitted, so try once more.
    const limited = second.statuses.includes(429)
      ? second
      : await postExpectingContinue(tollgate.proxyPort, 'limited.test');
    assert.deepEqual(first.statuses, [100, 200]);
    assert.deepEqual(limited.statuses, [429]);
    assert.equal(limited.bodySent, false);
  });

  it('to_https redirect and unknown host: no 100', async () => {
    const redirect = await postExpectingContinue(tollgate.proxyPort, 'secure.test');
    assert.deepEqual(redirect.statuses, [308]);
    assert.match(redirect.final, /\r\nlocation: https:\/\/secure\.test\/upload\r\n/i);
    const unknown = await postExpectingContinue(tollgate.proxyPort, 'nowhere.test');
    assert.deepEqual(unknown.statuses, [404]);
    assert.equal(unknown.bodySent, false);
  });

  it('an open route still gets its 100 and its body', async () => {
    const exchange = await postExpectingContinue(tollgate.proxyPort, 'open.test');
    assert.deepEqual(exchange.statuses, [100, 200]);
    assert.equal(upstream.requests.at(-1)?.bodyBytes, BODY.length);
  });
});
