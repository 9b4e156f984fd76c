import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { mintToken } from '../helpers/token-api.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Echo, Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'hygiene-test-masterkey-91f0';

describe('no token reaches an upstream or a log, whatever the route and spelling', () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    upstream = await scope.upstream({ name: 'app' });
    const servers = [upstream.address];
    tollgate = await scope.tollgate({
      main: { masterkey: MASTERKEY },
      upstreams: {
        upstreams: {
          DEFAULT: {
            paths: {
              '/': { servers },
              '/private': { servers, authorization: { type: 'jwt' } },
            },
          },
        },
      },
    });
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    request(tollgate.proxyUrl, { path, headers: { host: 'site.local', ...headers } });

  it('open route: every spelling of the token parameter, the Referer copy and the link cookie are removed', async () => {
    const { token } = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'alice', valid: 5 });
    const secrets = ['SECRET-ONE', 'SECRET-TWO', 'SECRET-THREE', 'SECRET-FOUR', token];
    const res = await get(
      `/page?a=1&tollgatetoken=${secrets[0]}&TOLLGATETOKEN=${secrets[1]}&tollgatetoken[]=${secrets[2]}&Tollgate%54oken=${secrets[3]}&b=2`,
      {
        referer: `http://site.local/private/doc?x=1&tollgatetoken=${token}`,
        cookie: `theme=dark; tollgatetoken=${token}; lang=en`,
      },
    );
    assert.equal(res.status, 200);
    const seen = res.json<Echo>();
    assert.equal(seen.url, '/page?a=1&b=2');
    assert.equal(seen.headers.referer, 'http://site.local/private/doc?x=1');
    assert.equal(seen.headers.cookie, 'theme=dark; lang=en');
    const accessLine = () =>
      tollgate.logs().find((l) => l.msg === 'access' && String(l.path).startsWith('/page'));
    await waitFor(() => accessLine() !== undefined);
    assert.equal(accessLine()?.path, '/page?a=1&b=2');
    const log = tollgate.stdout();
    for (const secret of secrets) {
      assert.ok(!JSON.stringify(upstream.requests).includes(secret), `upstream saw ${secret.slice(0, 12)}`);
      assert.ok(!log.includes(secret), `the log holds ${secret.slice(0, 12)}`);
    }
  });

  it('a cookie that is only the link cookie leaves no Cookie header at all', async () => {
    const res = await get('/page', { cookie: 'tollgatetoken=abc' });
    assert.equal(res.json<Echo>().headers.cookie, undefined);
  });

  it('owners must be well-formed Unicode without control characters (400, never a 500 later)', async () => {
    for (const owner of ['\ud800', 'a\udc00b', 'x\u0085y', 'tab\there']) {
      const res = await fetch(`${tollgate.apiUrl}/jwt`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // JSON.stringify escapes a lone surrogate as \ud800, the way a hostile client sends it.
        body: JSON.stringify({ master_key: MASTERKEY, owner, valid: 5 }),
      });
      assert.equal(res.status, 400, JSON.stringify(owner));
      assert.match(((await res.json()) as { message: string }).message, /^owner /);
    }
  });

  it('X-Tollgate-Subject is unambiguous: only safe characters go as is, anything else is percent-encoded', async () => {
    const cases: Record<string, string> = {
      'alice@example.com': 'alice@example.com',
      '%61dmin': '%2561dmin',
      ' admin': '%20admin',
      'alice, admin': 'alice%2C%20admin',
      zoë: 'zo%C3%AB',
      'a"b;c': 'a%22b%3Bc',
    };
    for (const [owner, header] of Object.entries(cases)) {
      const { token } = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner, valid: 5 });
      const res = await get('/private/x', { authorization: `Bearer ${token}` });
      assert.equal(res.status, 200, owner);
      const subject = res.json<Echo>().headers['x-tollgate-subject'];
      assert.equal(subject, header, owner);
      assert.equal(decodeURIComponent(subject as string), owner);
    }
  });
});
