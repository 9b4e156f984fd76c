/**
 * What a URL's credentials leave behind (docs/observability.md, docs/tokens.md): the OpenID
 * callback's `code` and `state` are never written to the access log or a span, and the token
 * parameter is recognised with spaces around its name (`%20tollgatetoken`, `tollgatetoken%20`,
 * `+tollgatetoken`) wherever it is recognised: auth, removal before forwarding, the
 * Referrer-Policy / no-store headers, the access log and spans. Through the built process, with a
 * collector of the tests' own.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { type OtlpCollector, startOtlpCollector } from '../helpers/otlp-collector.ts';
import { testScope } from '../helpers/scope.ts';
import { mintToken } from '../helpers/token-api.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Echo } from '../helpers/upstream.ts';

const MASTERKEY = 'redaction-masterkey-41c9';
const HOST = 'sso.test';

describe('credentials in URLs stay out of logs and spans', () => {
  const scope = testScope();
  let collector: OtlpCollector;
  let tollgate: Tollgate;

  before(async () => {
    collector = scope.keep(await startOtlpCollector());
    const upstream = await scope.upstream({ name: 'app' });
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-redaction-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    await writeFile(join(dir, 'client-secret'), 'a-client-secret\n');
    await writeFile(join(dir, 'session-secrets'), 'a-session-secret-of-at-least-thirty-two-bytes\n');
    const servers = [upstream.address];
    tollgate = await scope.tollgate({
      main: {
        masterkey: MASTERKEY,
        tracing: { endpoint: collector.origin, protocol: 'http/protobuf', batch_delay_seconds: 0.05 },
        // Never reached here: the callbacks below are refused before the provider is needed.
        oidc_providers: {
          corp: {
            issuer: 'http://127.0.0.1:1',
            client_id: 'tollgate',
            client_secret_file: join(dir, 'client-secret'),
          },
        },
        session_secret_file: join(dir, 'session-secrets'),
      },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/': { servers },
              '/app': { servers, authorization: { type: 'oidc', provider: 'corp' } },
              '/reports': { servers, authorization: { type: 'jwt' } },
            },
          },
          'open.test': { paths: { '/': { servers } } },
        },
      },
    });
  });

  const get = (host: string, path: string) => request(tollgate.proxyUrl, { path, headers: { host } });
  const serverSpan = async (path: string) => {
    const [span] = await collector.waitForSpans(
      (candidate) => candidate.kind === 'server' && candidate.attributes['url.path'] === path,
    );
    return span;
  };
  const accessLine = async (host: string, prefix: string) => {
    let found: Record<string, unknown> | undefined;
    await waitFor(() => {
      found = tollgate
        .logs()
        .find((line) => line.msg === 'access' && line.host === host && String(line.path).startsWith(prefix));
      return found !== undefined;
    });
    return found as Record<string, unknown>;
  };
  const leaked = (secret: RegExp) =>
    secret.test(tollgate.stdout()) || secret.test(Buffer.concat(collector.bodies).toString('latin1'));

  it("the callback's code and state are in neither the access log nor the span (routed and not)", async () => {
    const query = 'code=SECRET-CODE-1&state=SECRET-STATE-1&iss=idp&session_state=s';
    // A callback without the state cookie: refused (401) on the host whose route logs people in.
    const routed = await get(HOST, `/.tollgate/oidc/callback?${query}`);
    assert.equal(routed.status, 401);
    // On a host without an oidc route: 404, never forwarded, recorded without them all the same.
    const unrouted = await get('open.test', `/.tollgate/oidc/callback?${query.replaceAll('-1', '-2')}`);
    assert.equal(unrouted.status, 404);
    for (const host of [HOST, 'open.test']) {
      const line = await accessLine(host, '/.tollgate/oidc/callback');
      assert.equal(line.path, '/.tollgate/oidc/callback?iss=idp&session_state=s', host);
    }
    const spans = await collector.waitForSpans(
      (span) => span.kind === 'server' && span.attributes['url.path'] === '/.tollgate/oidc/callback',
      2,
    );
    for (const span of spans) assert.equal(span.attributes['url.query'], 'iss=idp&session_state=s');
    assert.ok(!leaked(/SECRET-(CODE|STATE)/), 'a code or state was recorded');
    // Elsewhere, parameters named code and state are the application's own: recorded as they are.
    await get(HOST, '/page?code=app-code&state=app-state');
    assert.equal((await accessLine(HOST, '/page')).path, '/page?code=app-code&state=app-state');
  });

  it('a token parameter with spaces around its name authenticates and is removed, marked and redacted', async () => {
    const token = async (owner: string) =>
      (await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner, valid: 60 })).token;
    for (const name of ['%20tollgatetoken', 'tollgatetoken%20', '+tollgatetoken', '%09tollgatetoken%20%20']) {
      const secret = await token(`spaced-${name.length}`);
      const res = await get(HOST, `/reports/1?${name}=${secret}&keep=1`);
      assert.equal(res.status, 200, `${name}: ${res.body}`);
      assert.equal(res.json<Echo>().url, '/reports/1?keep=1', name);
      assert.equal(res.json<Echo>().headers['x-tollgate-subject'], `spaced-${name.length}`);
      assert.equal(res.headers['referrer-policy'], 'no-referrer', name);
      assert.equal(res.headers['cache-control'], 'private, no-store', name);
      assert.ok(!leaked(new RegExp(secret.slice(-24))), `${name}: the token was recorded`);
    }
    // On an open route: removed before forwarding, the response marked, nothing recorded.
    const open = await get(
      HOST,
      '/open?a=1&%20tollgatetoken=SECRET-TOKEN-1&tollgatetoken%20=SECRET-TOKEN-2&+TollgateToken=SECRET-TOKEN-3;%20tollgatetoken=SECRET-TOKEN-4',
    );
    assert.equal(open.status, 200);
    assert.equal(open.json<Echo>().url, '/open?a=1');
    assert.equal(open.headers['referrer-policy'], 'no-referrer');
    assert.equal((await accessLine(HOST, '/open')).path, '/open?a=1');
    assert.equal((await serverSpan('/open'))?.attributes['url.query'], 'a=1');
    assert.ok(!leaked(/SECRET-TOKEN/), 'a token was recorded');
  });
});
