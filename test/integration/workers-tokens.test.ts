import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deriveSigningKey, issueToken } from '../../src/auth/tokens.ts';
import { SecretVolume } from '../helpers/certs.ts';
import { testScope } from '../helpers/scope.ts';
import { request, waitFor } from '../helpers/tollgate.ts';
import { accessLinesByWorker, PROCESS_START_MS } from '../helpers/workers.ts';

const OLD_KEY = 'workers-masterkey-before';
const NEW_KEY = 'workers-masterkey-after';

/** Signed here, not by the process: a pass proves every worker verifies with the key. */
const tokenFor = async (masterkey: string) =>
  (await issueToken(deriveSigningKey(masterkey), { owner: 'test', validMinutes: 5 })).token;

describe('workers: tokens are judged the same by every worker', () => {
  const scope = testScope();

  it('every worker verifies with the masterkey the primary holds, also after masterkey_file is rotated', async () => {
    const upstream = await scope.upstream();
    const secret = new SecretVolume({ masterkey: `${OLD_KEY}\n` });
    scope.keep({ close: async () => secret.remove() });
    const tollgate = await scope.tollgate({
      main: { workers: 2, masterkey_file: secret.path('masterkey') },
      readyTimeoutMs: PROCESS_START_MS,
      upstreams: `upstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["${upstream.address}"]\n        authorization: {type: jwt}\n`,
    });
    /** Statuses of 24 requests, each on a connection of its own, so both workers answer some. */
    const statusesWith = async (token: string) =>
      (
        await Promise.all(
          Array.from({ length: 24 }, () =>
            request(tollgate.proxyUrl, {
              headers: { host: 'app.test', connection: 'close', authorization: `Bearer ${token}` },
            }),
          ),
        )
      ).map((answer) => answer.status);
    const mint = (masterKey: string) =>
      request(`${tollgate.apiUrl}/jwt`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ master_key: masterKey, owner: 'minted', valid: 5 }),
      });

    const issued = await mint(OLD_KEY);
    assert.equal(issued.status, 200, 'the token API runs in the primary');
    const fromApi = issued.json<{ token: string }>().token;
    assert.deepEqual(await statusesWith(fromApi), Array(24).fill(200));
    assert.deepEqual(await statusesWith(await tokenFor(NEW_KEY)), Array(24).fill(401));

    secret.swap({ masterkey: `${NEW_KEY}\n` });
    // The primary applies it (its token API issues with it), then every worker confirms the new key
    // before readiness is back: from then on no worker judges with the old one.
    await waitFor(async () => (await mint(NEW_KEY)).status === 200, PROCESS_START_MS);
    await waitFor(
      async () => (await request(`${tollgate.adminUrl}/readyz`)).status === 200,
      PROCESS_START_MS,
    );
    assert.deepEqual(await statusesWith(await tokenFor(NEW_KEY)), Array(24).fill(200));
    assert.deepEqual(await statusesWith(fromApi), Array(24).fill(401));
    assert.equal(accessLinesByWorker(tollgate).size, 2, 'both workers judged tokens');
    assert.ok(!tollgate.stdout().includes(NEW_KEY) && !tollgate.stdout().includes(OLD_KEY), 'no key logged');
  });
});
