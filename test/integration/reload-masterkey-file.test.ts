import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { deriveSigningKey, issueToken } from '../../src/auth/tokens.ts';
import { SecretVolume } from '../helpers/certs.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * A masterkey_file mounted from a Secret is rotated on its own (no change to any other file): the
 * process applies it within a second, so tokens signed with the new key work and the old ones stop.
 * Tokens are signed here, independently of the process, so a pass proves the process re-derived its
 * verification key and did not merely start issuing with the new one.
 */
const OLD_KEY = 'masterkey-before-rotation';
const NEW_KEY = 'masterkey-after-rotation';
const LIVE_WITHIN_MS = 1_000;

const tokenFor = async (masterkey: string, owner: string) =>
  (await issueToken(deriveSigningKey(masterkey), { owner, validMinutes: 5 })).token;

describe('masterkey_file rotated alone (real process)', () => {
  let upstream: Upstream;
  let secret: SecretVolume;
  let tollgate: Tollgate;

  before(async () => {
    upstream = await startUpstream();
    secret = new SecretVolume({ masterkey: `${OLD_KEY}\n` });
    tollgate = await startTollgate({
      main: { masterkey_file: secret.path('masterkey') },
      upstreams: {
        upstreams: {
          'app.test': { paths: { '/': { servers: [upstream.address], authorization: { type: 'jwt' } } } },
        },
      },
    });
  });
  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
    secret?.remove();
  });

  const use = (token: string) =>
    request(tollgate.proxyUrl, {
      path: '/data',
      headers: { host: 'app.test', authorization: `Bearer ${token}` },
    });
  const mint = (masterKey: string) =>
    request(`${tollgate.apiUrl}/jwt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ master_key: masterKey, owner: 'minted', valid: 5 }),
    });

  it('accepts new-key tokens and refuses old-key tokens within 1 s of the swap', async () => {
    const oldToken = await tokenFor(OLD_KEY, 'before');
    const newToken = await tokenFor(NEW_KEY, 'after');
    assert.equal((await use(oldToken)).status, 200);
    assert.equal((await use(newToken)).status, 401);

    const swappedAt = Date.now();
    secret.swap({ masterkey: `${NEW_KEY}\n` });
    await waitFor(async () => (await use(newToken)).status === 200, 10_000);

    const refused = await use(oldToken);
    assert.equal(refused.status, 401);
    assert.equal(refused.json<{ error: string }>().error, 'token_invalid');
    // The token API follows the same key: the old one is refused, the new one issues.
    assert.equal((await mint(OLD_KEY)).status, 403);
    assert.equal((await mint(NEW_KEY)).status, 200);

    const applied = tollgate.logs().find((line) => line.msg === 'masterkey_file reloaded');
    assert.ok(applied, 'the rotation is logged');
    const delay = Date.parse(String(applied.time)) - swappedAt;
    assert.ok(delay <= LIVE_WITHIN_MS, `the new masterkey went live after ${delay} ms`);
    assert.equal(reloadCount(await tollgate.metrics(), 'masterkey_file', 'success'), 1);
    assert.ok(
      !tollgate.stdout().includes(NEW_KEY) && !tollgate.stdout().includes(OLD_KEY),
      'no key in the logs',
    );
  });

  it('keeps the live key when the rotated file is empty, and counts the failure', async () => {
    const token = await tokenFor(NEW_KEY, 'still');
    secret.swap({ masterkey: '' });
    await waitFor(
      async () => reloadCount(await tollgate.metrics(), 'masterkey_file', 'failure') === 1,
      10_000,
    );
    assert.equal((await use(token)).status, 200, 'the last good key keeps verifying');
    assert.ok(
      tollgate.logs().some((line) => line.msg === 'masterkey_file not reloaded; the previous one stays live'),
    );
  });
});
