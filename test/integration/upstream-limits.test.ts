import assert from 'node:assert/strict';
import { once } from 'node:events';
import type http from 'node:http';
import net from 'node:net';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { request, waitFor } from '../helpers/tollgate.ts';

/**
 * Per-server connection limits against the real process: requests a server holds open on one route
 * (what slow uploads do) cannot take the connections another route needs, and what does not fit
 * is answered 503 quickly instead of hanging.
 */
const scope = testScope();

function rejected(metrics: string, reason: string): number {
  const match = new RegExp(
    `^tollgate_upstream_rejected_total\\{[^}]*reason="${reason}"\\} (\\d+)$`,
    'm',
  ).exec(metrics);
  return match ? Number(match[1]) : 0;
}

describe('upstream connection limits', () => {
  it('one route holding its share leaves the rest of the server to other routes; excess gets 503 upstream_busy', async () => {
    const held: http.ServerResponse[] = [];
    const upstream = await scope.upstream({
      handler: (req, res) => {
        if (req.url?.startsWith('/slow')) held.push(res);
        else res.end('other');
      },
    });
    const tollgate = await scope.tollgate({
      main: {
        upstream_max_connections: 2,
        upstream_max_connections_per_route: 1,
        upstream_queue_size: 1,
        upstream_queue_timeout_seconds: 1,
      },
      upstreams: {
        upstreams: {
          'app.test': {
            paths: { '/slow': { servers: [upstream.address] }, '/other': { servers: [upstream.address] } },
          },
        },
      },
    });
    const get = (path: string) => request(tollgate.proxyUrl, { path, headers: { host: 'app.test' } });

    const first = get('/slow/1');
    await waitFor(() => held.length === 1);
    // The route is at its share: one more waits in the queue, the next finds the queue full.
    const [second, third] = [get('/slow/2'), get('/slow/3')];
    const other = await get('/other');
    assert.equal(other.status, 200);
    assert.equal(other.body, 'other');

    const answers = await Promise.all([second, third]);
    for (const answer of answers) {
      assert.equal(answer.status, 503);
      assert.equal(answer.json<{ error: string }>().error, 'upstream_busy');
    }
    const metrics = await tollgate.metrics();
    assert.equal(rejected(metrics, 'queue_full'), 1);
    assert.equal(rejected(metrics, 'queue_timeout'), 1);
    // Busy is not down: the server stays in rotation.
    assert.match(metrics, /tollgate_upstream_up\{route="app\.test\/slow",server="[^"]+"\} 1/);
    assert.equal(held.length, 1, 'the refused requests never reached the upstream');

    held[0]?.end('slow done');
    const done = await first;
    assert.equal(done.status, 200);
    assert.equal(done.body, 'slow done');
  });

  it('slow uploads flooding an open route leave the server reachable for an authenticated route', async () => {
    const upstream = await scope.upstream();
    const tollgate = await scope.tollgate({
      main: {
        upstream_max_connections: 4,
        upstream_max_connections_per_route: 2,
        upstream_queue_size: 2,
        upstream_queue_timeout_seconds: 30,
      },
      upstreams: {
        upstreams: {
          'app.test': {
            paths: {
              '/upload': { servers: [upstream.address] },
              '/private': {
                servers: [upstream.address],
                authorization: { type: 'basic', creds: 'alice:wonderland' },
              },
            },
          },
        },
      },
    });
    // The attack, bounded: 8 uploads that announce 1 MB and send one byte, then stall.
    const uploads: net.Socket[] = [];
    try {
      for (let i = 0; i < 8; i++) {
        const socket = net.connect({ host: '127.0.0.1', port: tollgate.proxyPort });
        socket.on('error', () => {});
        uploads.push(socket);
        await once(socket, 'connect');
        socket.write(`POST /upload/${i} HTTP/1.1\r\nHost: app.test\r\nContent-Length: 1000000\r\n\r\nx`);
      }
      // Two hold the route's share, two wait in the queue, the rest are refused at once.
      let refused = 0;
      await waitFor(async () => {
        const metrics = await tollgate.metrics();
        refused = rejected(metrics, 'queue_full');
        return refused === 4;
      });
      const res = await request(tollgate.proxyUrl, {
        path: '/private/report',
        headers: {
          host: 'app.test',
          authorization: `Basic ${Buffer.from('alice:wonderland').toString('base64')}`,
        },
      });
      assert.equal(res.status, 200);
      assert.equal(res.json<{ url: string }>().url, '/private/report');
    } finally {
      for (const socket of uploads) socket.destroy();
    }
  });

  it('a request waiting in the queue is sent as soon as a connection is free', async () => {
    const held: http.ServerResponse[] = [];
    const upstream = await scope.upstream({
      handler: (_req, res) => {
        held.push(res);
      },
    });
    const tollgate = await scope.tollgate({
      main: { upstream_max_connections: 1, upstream_queue_size: 4, upstream_queue_timeout_seconds: 30 },
      upstreams: { upstreams: { 'app.test': { paths: { '/': { servers: [upstream.address] } } } } },
    });
    const get = (path: string) => request(tollgate.proxyUrl, { path, headers: { host: 'app.test' } });
    const first = get('/1');
    await waitFor(() => held.length === 1);
    const second = get('/2');
    held[0]?.end('one');
    await waitFor(() => held.length === 2);
    held[1]?.end('two');
    assert.equal((await first).body, 'one');
    assert.equal((await second).body, 'two');
  });
});
