import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { OAUTH2_PROXY_COOKIE, startOauth2Proxy } from '../helpers/auth-services.ts';
import { type EchoReply, type EchoRequest, echoClientClass, startEchoServer } from '../helpers/grpc.ts';
import { testScope } from '../helpers/scope.ts';
import { request, type Tollgate } from '../helpers/tollgate.ts';

/**
 * gRPC through the built process (docs/traffic.md#grpc): a real @grpc/grpc-js client speaks h2c to
 * Tollgate's plain listener (`http2_cleartext: true`), Tollgate speaks h2c to a real grpc-js server
 * (`upstream_protocol: auto` picks h2c for gRPC on a plain server).
 */

const scope = testScope();
const Echo = echoClientClass();
const AUTHORITY = 'grpc.test';

async function proxyFor(
  path: Record<string, unknown>,
  main: Record<string, unknown> = {},
): Promise<Tollgate> {
  return scope.tollgate({
    upstreams: { upstreams: { [AUTHORITY]: { paths: { '/': path } } } },
    main: { http2_cleartext: true, ...main },
  });
}

// biome-ignore lint/suspicious/noExplicitAny: grpc-js generates clients at run time
function clientOf(tollgate: Tollgate): any {
  const client = new Echo(`127.0.0.1:${tollgate.proxyPort}`, grpc.credentials.createInsecure(), {
    'grpc.default_authority': AUTHORITY,
  });
  scope.keep({ close: async () => client.close() });
  return client;
}

function unary(
  // biome-ignore lint/suspicious/noExplicitAny: as above
  client: any,
  request: EchoRequest,
  metadata = new grpc.Metadata(),
  options: grpc.CallOptions = {},
): Promise<{ reply: EchoReply; trailers: grpc.Metadata }> {
  return new Promise((resolve, reject) => {
    let reply: EchoReply | null = null;
    let trailers: grpc.Metadata | null = null;
    const settle = () => {
      if (reply !== null && trailers !== null) resolve({ reply, trailers });
    };
    const call = client.Unary(
      request,
      metadata,
      options,
      (error: grpc.ServiceError | null, answer: EchoReply) => {
        if (error) {
          reject(error);
          return;
        }
        reply = answer;
        settle();
      },
    );
    call.on('status', (status: grpc.StatusObject) => {
      trailers = status.metadata;
      settle();
    });
  });
}

async function refusedWith(promise: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await promise;
  } catch (error) {
    return error as grpc.ServiceError;
  }
  assert.fail('the call was expected to fail');
}

describe('gRPC through Tollgate', () => {
  it('unary: the reply, forwarded metadata and the trailers (grpc-status and custom) come back', async () => {
    const server = scope.keep(await startEchoServer());
    const tollgate = await proxyFor({ servers: [server.address] });
    const { reply, trailers } = await unary(clientOf(tollgate), { message: 'hello' });
    assert.equal(reply.message, 'hello');
    assert.equal(reply.seen['x-forwarded-for'], '127.0.0.1');
    assert.deepEqual(trailers.get('x-echo-trailer'), ['unary']);
    const metrics = await tollgate.metrics();
    assert.match(metrics, /tollgate_requests_total\{[^}]*route="grpc\.test\/"[^}]*\} 1/);
  });

  it('server, client and bidirectional streaming', async () => {
    const server = scope.keep(await startEchoServer());
    const client = clientOf(await proxyFor({ servers: [server.address] }));

    const streamed: string[] = await new Promise((resolve, reject) => {
      const messages: string[] = [];
      const call = client.ServerStream({ message: 'm', count: 5 });
      call.on('data', (reply: EchoReply) => messages.push(reply.message));
      call.on('error', reject);
      call.on('end', () => resolve(messages));
    });
    assert.deepEqual(streamed, ['m#0', 'm#1', 'm#2', 'm#3', 'm#4']);

    const joined: EchoReply = await new Promise((resolve, reject) => {
      const call = client.ClientStream((error: grpc.ServiceError | null, reply: EchoReply) =>
        error ? reject(error) : resolve(reply),
      );
      for (const message of ['a', 'b', 'c']) call.write({ message });
      call.end();
    });
    assert.equal(joined.message, 'a,b,c');

    // Each answer is awaited before the next message is sent: a real conversation, not a batch.
    const call = client.Bidi();
    const answers: string[] = [];
    for (const message of ['one', 'two', 'three']) {
      const answer = new Promise<EchoReply>((resolve) => call.once('data', resolve));
      call.write({ message });
      answers.push((await answer).message);
    }
    call.end();
    await new Promise((resolve) => call.on('status', resolve));
    assert.deepEqual(answers, ['echo:one', 'echo:two', 'echo:three']);
  });

  it("relays the upstream's own error status and message", async () => {
    const server = scope.keep(await startEchoServer());
    const client = clientOf(await proxyFor({ servers: [server.address] }));
    const error = await refusedWith(unary(client, { message: 'fail:5' }));
    assert.equal(error.code, grpc.status.NOT_FOUND);
    assert.equal(error.details, 'failed as asked (5)');
  });

  it('an auth refusal is 16 UNAUTHENTICATED; the right credentials pass', async () => {
    const server = scope.keep(await startEchoServer());
    const client = clientOf(
      await proxyFor({
        servers: [server.address],
        authorization: { type: 'apikey', keys: [{ name: 'svc', key: 'grpc-key-of-enough-length' }] },
      }),
    );
    const error = await refusedWith(unary(client, { message: 'x' }));
    assert.equal(error.code, grpc.status.UNAUTHENTICATED);
    const metadata = new grpc.Metadata();
    metadata.set('x-api-key', 'grpc-key-of-enough-length');
    assert.equal((await unary(client, { message: 'in' }, metadata)).reply.message, 'in');
  });

  it('forward auth with signin_url: a gRPC client gets 16 UNAUTHENTICATED, a browser the redirect', async () => {
    const server = scope.keep(await startEchoServer());
    const oauth2 = scope.keep(await startOauth2Proxy());
    const tollgate = await proxyFor({
      servers: [server.address],
      authorization: {
        type: 'forward',
        url: `${oauth2.origin}/oauth2/auth`,
        signin_url: `https://${AUTHORITY}/oauth2/start`,
      },
    });
    const client = clientOf(tollgate);
    const error = await refusedWith(unary(client, { message: 'x' }));
    assert.equal(error.code, grpc.status.UNAUTHENTICATED);
    const metadata = new grpc.Metadata();
    metadata.set('cookie', OAUTH2_PROXY_COOKIE);
    assert.equal((await unary(client, { message: 'in' }, metadata)).reply.message, 'in');
    const browser = await request(tollgate.proxyUrl, { path: '/page', headers: { host: AUTHORITY } });
    assert.equal(browser.status, 302);
    assert.match(String(browser.headers.location), /^https:\/\/grpc\.test\/oauth2\/start\?rd=/);
  });

  it('an upstream that is down is 14 UNAVAILABLE', async () => {
    const client = clientOf(await proxyFor({ servers: [await scope.deadServer()] }));
    const error = await refusedWith(unary(client, { message: 'x' }));
    assert.equal(error.code, grpc.status.UNAVAILABLE);
  });

  it('fails over from a server that is down to the next one on the HTTP/2 sessions, counting the failure', async () => {
    const dead = await scope.deadServer();
    const server = scope.keep(await startEchoServer());
    // Round robin: a call that starts on the dead server is retried on the live one (nothing was sent).
    const tollgate = await proxyFor({ servers: [dead, server.address] });
    const client = clientOf(tollgate);
    for (let call = 0; call < 3; call++) {
      const { reply, trailers } = await unary(client, { message: `m${call}` });
      assert.equal(reply.message, `m${call}`);
      assert.ok(trailers instanceof grpc.Metadata);
    }
    assert.match(
      await tollgate.metrics(),
      new RegExp(`tollgate_upstream_errors_total\\{[^}]*server="${dead}",kind="connect"\\} [1-9]`),
    );
  });

  it('a live stream outlasts the response timeout while messages flow; a silent call does not', async () => {
    const server = scope.keep(await startEchoServer());
    const client = clientOf(
      await proxyFor({ servers: [server.address] }, { upstream_response_timeout_seconds: 2 }),
    );
    // Client streaming: the response headers come only at the end, ~3 s after the first message
    // (one message every 250 ms: far inside the 2 s limit even on a loaded machine).
    const joined: EchoReply = await new Promise((resolve, reject) => {
      const call = client.ClientStream((error: grpc.ServiceError | null, reply: EchoReply) =>
        error ? reject(error) : resolve(reply),
      );
      let sent = 0;
      const next = () => {
        call.write({ message: String(sent) });
        sent += 1;
        if (sent < 13) setTimeout(next, 250);
        else call.end();
      };
      next();
    });
    assert.equal(joined.message, '0,1,2,3,4,5,6,7,8,9,10,11,12');
    // A unary call whose server stays silent past the timeout is cut: 504 → DEADLINE_EXCEEDED.
    const error = await refusedWith(unary(client, { message: 'slow', count: 8_000 }));
    assert.equal(error.code, grpc.status.DEADLINE_EXCEEDED);
  });

  it("honours grpc-timeout: Tollgate ends the call at the caller's deadline", async () => {
    const server = scope.keep(await startEchoServer());
    const tollgate = await proxyFor({ servers: [server.address] });
    // A raw HTTP/2 client, so the deadline is enforced by Tollgate and not by the gRPC client library.
    const session = http2.connect(`http://127.0.0.1:${tollgate.proxyPort}`);
    scope.keep({ close: async () => session.close() });
    const message = Buffer.from('slow');
    // EchoRequest { message: "slow", count: 3000 } in protobuf, behind gRPC's 5-byte frame header.
    const body = Buffer.concat([
      Buffer.from([0x0a, message.length]),
      message,
      Buffer.from([0x10, 0xb8, 0x17]),
    ]);
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, body.length]), body]);
    const started = Date.now();
    const stream = session.request({
      ':method': 'POST',
      ':path': '/tollgate.test.Echo/Unary',
      ':authority': AUTHORITY,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': '300m',
    });
    stream.end(frame);
    const status = await new Promise<string | undefined>((resolve, reject) => {
      let seen: string | undefined;
      stream.on('response', (headers) => {
        seen ??= headers['grpc-status'] as string | undefined;
      });
      stream.on('trailers', (trailers) => {
        seen = trailers['grpc-status'] as string | undefined;
      });
      stream.on('error', reject);
      stream.on('close', () => resolve(seen));
      stream.resume();
    });
    assert.equal(status, String(grpc.status.DEADLINE_EXCEEDED));
    assert.ok(Date.now() - started < 2_500, 'answered at the deadline, not when the server replied');
  });
});
