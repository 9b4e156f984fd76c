import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import {
  type IssuerKey,
  issuerKey,
  type JwksServer,
  signAs,
  startJwksServer,
} from '../helpers/jwks-server.ts';
import { testScope } from '../helpers/scope.ts';
import { counterValue, mintToken } from '../helpers/token-api.ts';
import { request, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'external-issuer-masterkey-44aa';
const ISSUER = 'https://idp.test.example';
const FILE_ISSUER = 'https://kubernetes.default.svc.cluster.local';
const AUDIENCE = 'tollgate-test';

interface Echo {
  headers: Record<string, string | undefined>;
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('external issuers (OpenID JWKS) through the proxy process', () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;
  let jwks: JwksServer;
  let rsa: IssuerKey;
  let ec: IssuerKey;
  let ed: IssuerKey;
  let rotated: IssuerKey;
  let fileKey: IssuerKey;

  before(async () => {
    [rsa, ec, ed, rotated, fileKey] = await Promise.all([
      issuerKey('rsa-1', 'RS256'),
      issuerKey('ec-1', 'ES256'),
      issuerKey('ed-1', 'EdDSA'),
      issuerKey('rsa-2', 'RS256'),
      issuerKey('sa-1', 'RS256'),
    ]);
    jwks = scope.keep(await startJwksServer());
    jwks.setKeys('/keys', [rsa, ec, ed]);
    jwks.setKeys('/keys-outage', [rsa]);
    upstream = await scope.upstream({ name: 'app' });
    const servers = [upstream.address];
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-jwks-'));
    scope.keep({ close: () => rm(dir, { recursive: true, force: true }) });
    const jwksFile = join(dir, 'cluster-jwks.json');
    await writeFile(jwksFile, JSON.stringify({ keys: [fileKey.publicJwk] }));
    const external = { issuer: ISSUER, audience: AUDIENCE, jwks_uri: `${jwks.origin}/keys` };
    tollgate = await scope.tollgate({
      main: { masterkey: MASTERKEY },
      upstreams: {
        upstreams: {
          DEFAULT: {
            paths: {
              '/ext': { servers, authorization: { type: 'jwt', ...external } },
              '/both': {
                servers,
                authorization: {
                  type: 'jwt',
                  issuers: ['tollgate', { ...external, subject_claim: 'email' }],
                },
              },
              '/outage': {
                servers,
                authorization: {
                  type: 'jwt',
                  issuer: ISSUER,
                  audience: [AUDIENCE, 'other'],
                  jwks_uri: `${jwks.origin}/keys-outage`,
                },
              },
              '/cluster': {
                servers,
                authorization: { type: 'jwt', issuer: FILE_ISSUER, audience: AUDIENCE, jwks_file: jwksFile },
              },
              '/own': { servers, authorization: { type: 'jwt' } },
            },
          },
        },
      },
    });
  });

  const get = (path: string, token: string) =>
    request(tollgate.proxyUrl, { path, headers: { host: 'svc.local', authorization: `Bearer ${token}` } });
  const failures = async (route: string, reason: string) =>
    counterValue(
      await tollgate.metrics(),
      'tollgate_auth_failures_total',
      `route="DEFAULT${route}",method="jwt",reason="${reason}"`,
    );
  /**
   * Sends a token that must be refused: status, reason code and one more count in the metric; with
   * `detail`, the auth_refused log line of this request says why (the answer stays generic).
   */
  const refused = async (path: string, token: string, status: number, reason: string, detail?: string) => {
    const before = await failures(path, reason);
    const logged = tollgate.logs().filter((line) => line.event === 'auth_refused').length;
    const res = await get(path, token);
    assert.equal(res.status, status, `${path}: ${res.body}`);
    assert.equal(res.json().error, reason);
    assert.equal(await failures(path, reason), before + 1, `metric for ${reason}`);
    if (detail === undefined) return;
    await waitFor(() => tollgate.logs().filter((line) => line.event === 'auth_refused').length > logged);
    const line = tollgate.logs().filter((l) => l.event === 'auth_refused')[logged];
    assert.equal(line?.reason, reason);
    assert.equal(line?.detail, detail, JSON.stringify(line));
    assert.equal(JSON.stringify(line).includes(token), false, 'the token is never logged');
  };

  it('RS256, ES256 and EdDSA tokens of the issuer are accepted; the subject comes from sub', async () => {
    for (const key of [rsa, ec, ed]) {
      const res = await get(
        '/ext/x',
        await signAs(key, { sub: `svc-${key.alg}` }, { issuer: ISSUER, audience: AUDIENCE }),
      );
      assert.equal(res.status, 200, key.alg);
      assert.equal(res.json<Echo>().headers['x-tollgate-subject'], `svc-${key.alg}`);
      assert.equal(res.json<Echo>().headers.authorization, undefined, 'the token is not forwarded');
    }
  });

  it('key rotation: a new kid is fetched at once; unknown kids then wait out the 30 s cooldown', async () => {
    const fetchesBefore = jwks.fetches('/keys');
    jwks.setKeys('/keys', [rsa, rotated]);
    const res = await get(
      '/ext',
      await signAs(rotated, { sub: 'rotated' }, { issuer: ISSUER, audience: AUDIENCE }),
    );
    assert.equal(res.status, 200, res.body);
    assert.equal(res.json<Echo>().headers['x-tollgate-subject'], 'rotated');
    assert.equal(jwks.fetches('/keys'), fetchesBefore + 1, 'one refresh for the new kid');
    const stranger = await issuerKey('never-published', 'RS256');
    for (let i = 0; i < 3; i++) {
      await refused(
        '/ext',
        await signAs(stranger, {}, { issuer: ISSUER, audience: AUDIENCE }),
        401,
        'token_invalid',
      );
    }
    assert.equal(jwks.fetches('/keys'), fetchesBefore + 1, 'no refetch within the cooldown');
    const metrics = await tollgate.metrics();
    assert.ok(
      counterValue(metrics, 'tollgate_jwks_refreshes_total', `issuer="${ISSUER}",result="success"`) >= 2,
    );
  });

  it("Tollgate's own tokens only where the route lists tollgate; the subject claim is configurable", async () => {
    const own = (await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'carol', valid: 5 })).token;
    await refused('/ext', own, 401, 'token_invalid');
    assert.equal((await get('/both', own)).json<Echo>().headers['x-tollgate-subject'], 'carol');
    const external = await signAs(
      rsa,
      { sub: 'u-1', email: 'dana@example.com' },
      { issuer: ISSUER, audience: AUDIENCE },
    );
    assert.equal(
      (await get('/both', external)).json<Echo>().headers['x-tollgate-subject'],
      'dana@example.com',
    );
    await refused('/own', external, 401, 'token_invalid');
    const noEmail = await signAs(rsa, { sub: 'u-2' }, { issuer: ISSUER, audience: AUDIENCE });
    await refused('/both', noEmail, 401, 'token_invalid');
  });

  it('wrong audience, wrong issuer, expired, not yet valid: 401 with the reason and a count', async () => {
    await refused(
      '/ext',
      await signAs(rsa, {}, { issuer: ISSUER, audience: 'someone-else' }),
      401,
      'token_invalid',
      'wrong_audience',
    );
    await refused(
      '/ext',
      await signAs(rsa, {}, { issuer: 'https://evil.example', audience: AUDIENCE }),
      401,
      'token_invalid',
      'wrong_issuer',
    );
    // Several issuers on the route: a token naming none of them is refused before any verification.
    await refused(
      '/both',
      await signAs(rsa, {}, { issuer: 'https://evil.example', audience: AUDIENCE }),
      401,
      'token_invalid',
      'untrusted_issuer',
    );
    await refused(
      '/ext',
      await signAs(ec, {}, { issuer: ISSUER, audience: AUDIENCE, header: { kid: 'no-such-kid' } }),
      401,
      'token_invalid',
      'unknown_kid',
    );
    const genuine = await signAs(rsa, {}, { issuer: ISSUER, audience: AUDIENCE });
    const [head, body] = genuine.split('.');
    const forged = await signAs(rsa, { sub: 'mallory' }, { issuer: ISSUER, audience: AUDIENCE });
    await refused('/ext', `${head}.${body}.${forged.split('.')[2]}`, 401, 'token_invalid', 'bad_signature');
    const past = Math.floor(Date.now() / 1000) - 3600;
    await refused(
      '/ext',
      await signAs(rsa, {}, { issuer: ISSUER, audience: AUDIENCE, expiresIn: past }),
      401,
      'token_expired',
    );
    const future = await signAs(
      rsa,
      { nbf: Math.floor(Date.now() / 1000) + 600 },
      { issuer: ISSUER, audience: AUDIENCE },
    );
    await refused('/ext', future, 401, 'token_invalid', 'not_yet_valid');
    // One of several configured audiences is enough.
    assert.equal(
      (await get('/outage', await signAs(rsa, {}, { issuer: ISSUER, audience: 'other' }))).status,
      200,
    );
  });

  it('algorithm confusion and alg none are refused', async () => {
    const claims = { iss: ISSUER, aud: AUDIENCE, sub: 'mallory', exp: Math.floor(Date.now() / 1000) + 600 };
    // HS256 "signed" with the issuer's public key, which anyone can download.
    for (const secret of [JSON.stringify(rsa.publicJwk), String(rsa.publicJwk.n)]) {
      const unsigned = `${b64({ alg: 'HS256', kid: rsa.kid, typ: 'JWT' })}.${b64(claims)}`;
      const mac = createHmac('sha256', secret).update(unsigned).digest('base64url');
      await refused('/ext', `${unsigned}.${mac}`, 401, 'token_invalid');
    }
    await refused('/ext', `${b64({ alg: 'none', kid: rsa.kid })}.${b64(claims)}.`, 401, 'token_invalid');
    await refused('/ext', `${b64({ alg: 'none' })}.${b64(claims)}.AAAA`, 401, 'token_invalid');
    // An RS256 header over an EC key's signature: alg must match the key.
    const mismatched = await signAs(ec, {}, { issuer: ISSUER, audience: AUDIENCE, header: { kid: rsa.kid } });
    await refused('/ext', mismatched, 401, 'token_invalid');
  });

  it('JWKS server down: keys already fetched keep working; an unverifiable token is a 401, never a 5xx', async () => {
    const first = await signAs(rsa, { sub: 'before-outage' }, { issuer: ISSUER, audience: AUDIENCE });
    assert.equal((await get('/outage', first)).status, 200);
    const fetched = jwks.fetches('/keys-outage');
    jwks.setDown(true);
    try {
      // A token never seen before (not in the verified cache), signed by a known key.
      const fresh = await signAs(rsa, { sub: 'during-outage' }, { issuer: ISSUER, audience: AUDIENCE });
      const res = await get('/outage', fresh);
      assert.equal(res.status, 200, res.body);
      assert.equal(res.json<Echo>().headers['x-tollgate-subject'], 'during-outage');
      // An unknown kid makes Tollgate try the JWKS, which fails: refused, not an error.
      await refused(
        '/outage',
        await signAs(rotated, {}, { issuer: ISSUER, audience: AUDIENCE }),
        401,
        'token_invalid',
      );
      assert.equal(jwks.fetches('/keys-outage'), fetched + 1, 'one attempt');
      const metrics = await tollgate.metrics();
      assert.ok(
        counterValue(metrics, 'tollgate_jwks_refreshes_total', `issuer="${ISSUER}",result="failure"`) >= 1,
      );
    } finally {
      jwks.setDown(false);
    }
  });

  it('jwks_file: a key set from a mounted file (the Kubernetes service-account case)', async () => {
    const token = await signAs(
      fileKey,
      { sub: 'system:serviceaccount:jobs:reporter', kubernetes: { namespace: 'jobs' } },
      { issuer: FILE_ISSUER, audience: AUDIENCE },
    );
    const res = await get('/cluster', token);
    assert.equal(res.status, 200, res.body);
    assert.equal(res.json<Echo>().headers['x-tollgate-subject'], 'system:serviceaccount:jobs:reporter');
    await refused(
      '/cluster',
      await signAs(rsa, {}, { issuer: FILE_ISSUER, audience: AUDIENCE }),
      401,
      'token_invalid',
    );
  });
});
