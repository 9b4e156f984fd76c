import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type InProcessTollgate, request, startInProcess, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * A token in the query is a secret whatever happens to the request: refused by the rate limit or by
 * to_https before authentication ran, or sent to a route that does not consume it. None of these may
 * write it into the access log.
 */

const HOST = 'logs.example.com';
const MASTERKEY = 'security-logs-masterkey';

describe('tokens in the query never reach the logs', () => {
  let app: Upstream;
  let tollgate: InProcessTollgate;
  let token = '';

  before(async () => {
    app = await startUpstream({ name: 'app' });
    tollgate = await startInProcess({
      main: { masterkey: MASTERKEY },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/open': { servers: [app.address] },
              '/limited': { servers: [app.address], authorization: { type: 'jwt' }, rate_limit: 1 },
              '/secure': { servers: [app.address], authorization: { type: 'jwt' }, to_https: true },
              '/jwt': { servers: [app.address], authorization: { type: 'jwt' } },
            },
          },
        },
      },
    });
    const issued = await request(`${tollgate.apiUrl}/jwt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ master_key: MASTERKEY, owner: 'carol', valid: 5 }),
    });
    token = issued.json<{ token: string }>().token;
  });

  after(async () => {
    await tollgate?.stop();
    await app?.close();
  });

  const get = (path: string) => request(tollgate.proxyUrl, { path, headers: { host: HOST } });
  const accessLines = () => tollgate.logs().filter((line) => line.msg === 'access');

  it('is left out of the access line of requests answered before authentication, and of open routes', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await get(`/limited?a=${i}&tollgatetoken=${token}`)).status);
    assert.ok(statuses.includes(429), `no request was rate limited: ${statuses}`);
    assert.equal((await get(`/secure?tollgatetoken=${token}&b=1`)).status, 301);
    const open = await get(`/open?tollgate%74oken=${token}&c=1`);
    assert.equal(open.status, 200);
    // Open routes too: a token is never handed to an upstream (docs/tokens.md).
    assert.equal(open.json<{ url: string }>().url, '/open?c=1');
    assert.equal((await get(`/jwt?tollgatetoken=${token}&tollgatetoken=${token}&d=1`)).status, 200);

    await waitFor(() => accessLines().length >= 6);
    const signature = token.split('.')[2] as string;
    assert.doesNotMatch(tollgate.stdout(), new RegExp(signature));
    const paths = accessLines().map((line) => line.path);
    for (const expected of ['/limited?a=2', '/secure?b=1', '/open?c=1', '/jwt?d=1']) {
      assert.ok(paths.includes(expected), `${expected} not in ${JSON.stringify(paths)}`);
    }
  });
});
