import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type RunningTollgate, request, startInProcess, startTollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Tokens are verified by any process holding the same masterkey, whatever source it came from, and
 * by no other. Expiry is shown with a replica whose clock runs ahead (an in-process app given its
 * own clock), not by waiting minutes. The replica holding another key gets it from the environment,
 * so it is a real process.
 */
const MASTERKEY = 'replica-shared-masterkey';

describe('tokens across replicas and time', () => {
  let upstream: Upstream;
  let secretDir: string;
  let issuer: RunningTollgate;
  let sameKeyFromFile: RunningTollgate;
  let otherKeyFromEnv: RunningTollgate;
  let clockAhead: RunningTollgate;
  let clockBehind: RunningTollgate;

  before(async () => {
    upstream = await startUpstream();
    secretDir = await mkdtemp(join(tmpdir(), 'tollgate-secret-'));
    const keyFile = join(secretDir, 'masterkey');
    await writeFile(keyFile, `${MASTERKEY}\n`);
    const routes = {
      upstreams: {
        DEFAULT: { paths: { '/': { servers: [upstream.address], authorization: { type: 'jwt' } } } },
      },
    };
    [issuer, sameKeyFromFile, otherKeyFromEnv, clockAhead, clockBehind] = await Promise.all([
      startInProcess({ main: { masterkey: MASTERKEY }, upstreams: routes }),
      startInProcess({ main: { masterkey_file: keyFile }, upstreams: { masterkey: MASTERKEY, ...routes } }),
      // The env wins over main.yaml: this replica holds another key despite the same file.
      startTollgate({
        main: { masterkey: MASTERKEY },
        upstreams: routes,
        env: { TOLLGATE_MASTERKEY: 'another-key' },
      }),
      startInProcess({
        main: { masterkey: MASTERKEY },
        upstreams: routes,
        clock: () => Date.now() / 1000 + 150,
      }),
      startInProcess({
        main: { masterkey: MASTERKEY },
        upstreams: routes,
        clock: () => Date.now() / 1000 - 120,
      }),
    ]);
  });
  after(async () => {
    await Promise.all(
      [issuer, sameKeyFromFile, otherKeyFromEnv, clockAhead, clockBehind].map((t) => t?.stop()),
    );
    await upstream?.close();
    await rm(secretDir, { recursive: true, force: true });
  });

  async function issue(from: RunningTollgate, owner: string, valid: number): Promise<string> {
    const res = await request(`${from.apiUrl}/jwt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ master_key: MASTERKEY, owner, valid }),
    });
    assert.equal(res.status, 200, res.body);
    return res.json<{ token: string }>().token;
  }

  const use = (target: RunningTollgate, token: string) =>
    request(target.proxyUrl, { path: '/data', headers: { host: 'any', authorization: `Bearer ${token}` } });
  const reason = (res: { json<T>(): T }) => res.json<{ error: string }>().error;

  it('a token issued by one process is accepted by another with the same masterkey (from a file)', async () => {
    const token = await issue(issuer, 'replica-user', 5);
    const res = await use(sameKeyFromFile, token);
    assert.equal(res.status, 200);
    assert.equal(
      res.json<{ headers: Record<string, string> }>().headers['x-tollgate-subject'],
      'replica-user',
    );
    // And the other way round.
    assert.equal((await use(issuer, await issue(sameKeyFromFile, 'back', 5))).status, 200);
  });

  it('a process with another masterkey refuses it, and its own key does not work on the issuer', async () => {
    const token = await issue(issuer, 'replica-user', 5);
    const res = await use(otherKeyFromEnv, token);
    assert.equal(res.status, 401);
    assert.equal(reason(res), 'token_invalid');
    const wrongKeyRequest = await request(`${otherKeyFromEnv.apiUrl}/jwt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ master_key: MASTERKEY, owner: 'x', valid: 1 }),
    });
    assert.equal(wrongKeyRequest.status, 403, 'TOLLGATE_MASTERKEY wins over main.yaml');
  });

  it('a token expires after `valid` minutes (seen from a clock 150 s ahead), not before', async () => {
    const oneMinute = await issue(issuer, 'short', 1);
    const fiveMinutes = await issue(issuer, 'long', 5);
    assert.equal((await use(issuer, oneMinute)).status, 200, 'valid now');
    const expired = await use(clockAhead, oneMinute);
    assert.equal(expired.status, 401);
    assert.equal(reason(expired), 'token_expired');
    assert.match(String(expired.headers['www-authenticate']), /error="invalid_token"/);
    assert.equal((await use(clockAhead, fiveMinutes)).status, 200, 'a longer token is still valid');
  });

  it('a token whose nbf is ahead of the verifier by more than the skew allowance is refused', async () => {
    const res = await use(clockBehind, await issue(issuer, 'early', 5));
    assert.equal(res.status, 401);
    assert.equal(reason(res), 'token_invalid');
  });
});
