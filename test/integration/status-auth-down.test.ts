/**
 * /status shows what a forward-auth route enforces (docs/observability.md#the-status-page): while its
 * auth service gives no usable answer the route answers 503 and is shown `down` with the reason; the
 * next usable answer shows it `ok` again. Through the built process.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { StatusModel } from '../../src/observe/status.ts';
import { testScope } from '../helpers/scope.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';

describe('a forward-auth route whose auth service fails is down on /status', () => {
  const scope = testScope();
  let tollgate: Tollgate;
  let serviceAnswers = 200;

  before(async () => {
    const upstream = await scope.upstream({ name: 'app' });
    const service = await scope.upstream({
      name: 'auth',
      handler: (_req, res) => {
        res.writeHead(serviceAnswers, { 'content-type': 'text/plain' });
        res.end('auth');
      },
    });
    const dead = await scope.deadServer();
    const servers = [upstream.address];
    const forward = (url: string) => ({ type: 'forward', url, timeout_seconds: 2 });
    tollgate = await scope.tollgate({
      upstreams: {
        upstreams: {
          'fwd.test': {
            paths: {
              '/flaky': { servers, authorization: forward(`${service.origin}/check?secret=s3cr3t`) },
              '/gone': { servers, authorization: forward(`http://${dead}/check`) },
              '/open': { servers },
            },
          },
        },
      },
    });
  });

  const get = (path: string) => request(`${tollgate.proxyUrl}${path}`, { headers: { host: 'fwd.test' } });
  const status = async () =>
    JSON.parse((await request(`${tollgate.adminUrl}/status.json`)).body) as StatusModel;
  const routeOf = (model: StatusModel, id: string) => model.routes.find((route) => route.id === id);

  it('unreachable, then a bad status: down with the reason while it answers 503; ok once it answers', async () => {
    assert.equal((await get('/gone')).status, 503);
    assert.equal((await get('/flaky')).status, 200);
    serviceAnswers = 500;
    assert.equal((await get('/flaky')).status, 503);
    let model: StatusModel | null = null;
    await waitFor(async () => {
      model = await status();
      return (
        routeOf(model, 'fwd.test/flaky')?.state === 'down' &&
        routeOf(model, 'fwd.test/gone')?.state === 'down'
      );
    });
    const shown = model as unknown as StatusModel;
    assert.match(String(routeOf(shown, 'fwd.test/gone')?.problems), /forward-auth service cannot be reached/);
    assert.match(String(routeOf(shown, 'fwd.test/flaky')?.problems), /answered neither 2xx/);
    assert.equal(routeOf(shown, 'fwd.test/open')?.state, 'ok');
    assert.doesNotMatch(JSON.stringify(shown), /s3cr3t|\/check/, 'the service URL is never shown');
    serviceAnswers = 200;
    assert.equal((await get('/flaky')).status, 200);
    await waitFor(async () => routeOf(await status(), 'fwd.test/flaky')?.state === 'ok');
  });
});
