import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SecretVolume } from '../helpers/certs.ts';
import { type IssuerKey, issuerKey, signAs } from '../helpers/jwks-server.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * The key set an external issuer's policy reads from `jwks_file` (a mounted ConfigMap of the
 * cluster's service-account keys) rotates on its own, without touching upstreams.yaml: the new keys
 * verify within a second, the removed ones stop, and a broken key set keeps the old keys working.
 */
const ISSUER = 'https://kubernetes.default.svc.cluster.local';
const AUDIENCE = 'tollgate-reload-test';
const LIVE_WITHIN_MS = 1_000;

const jwks = (...keys: IssuerKey[]) => JSON.stringify({ keys: keys.map((key) => key.publicJwk) });

describe('jwks_file rotated alone (real process)', () => {
  let upstream: Upstream;
  let volume: SecretVolume;
  let tollgate: Tollgate;
  let oldKey: IssuerKey;
  let newKey: IssuerKey;

  before(async () => {
    [oldKey, newKey] = await Promise.all([issuerKey('sa-old', 'ES256'), issuerKey('sa-new', 'ES256')]);
    upstream = await startUpstream();
    volume = new SecretVolume({ 'jwks.json': jwks(oldKey) });
    tollgate = await startTollgate({
      upstreams: {
        upstreams: {
          'app.test': {
            paths: {
              '/': {
                servers: [upstream.address],
                authorization: {
                  type: 'jwt',
                  issuer: ISSUER,
                  audience: AUDIENCE,
                  jwks_file: volume.path('jwks.json'),
                },
              },
            },
          },
        },
      },
    });
  });
  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
    volume?.remove();
  });

  const tokenOf = (key: IssuerKey) => signAs(key, {}, { issuer: ISSUER, audience: AUDIENCE });
  const use = async (token: string) =>
    (
      await request(tollgate.proxyUrl, {
        path: '/',
        headers: { host: 'app.test', authorization: `Bearer ${token}` },
      })
    ).status;

  it('verifies with the new key set within 1 s of the swap, and no longer with the old one', async () => {
    const oldToken = await tokenOf(oldKey);
    const newToken = await tokenOf(newKey);
    assert.equal(await use(oldToken), 200);
    assert.equal(await use(newToken), 401);

    const swappedAt = Date.now();
    volume.swap({ 'jwks.json': jwks(newKey) });
    await waitFor(async () => (await use(newToken)) === 200, 10_000);
    assert.equal(await use(oldToken), 401);

    const reloaded = () =>
      tollgate
        .logs()
        .find((line) => line.msg === 'upstreams.yaml reloaded' && /jwks_file/.test(String(line.trigger)));
    await waitFor(() => reloaded() !== undefined, 10_000);
    const delay = Date.parse(String(reloaded()?.time)) - swappedAt;
    assert.ok(delay <= LIVE_WITHIN_MS, `the new key set went live after ${delay} ms`);
    const metrics = await tollgate.metrics();
    assert.equal(reloadCount(metrics, 'jwks_file', 'success'), 1);
    assert.equal(
      reloadCount(metrics, 'upstreams.yaml', 'success'),
      0,
      'upstreams.yaml itself did not change',
    );
  });

  it('keeps the live keys when the new key set is broken, and counts the failure', async () => {
    const token = await tokenOf(newKey);
    volume.swap({ 'jwks.json': '{"keys": [ broken' });
    await waitFor(async () => reloadCount(await tollgate.metrics(), 'jwks_file', 'failure') === 1, 10_000);
    assert.equal(await use(token), 200, 'the keys already live keep verifying');
    await waitFor(
      () => tollgate.logs().some((line) => String(line.msg).includes('jwks.json') && line.level === 'error'),
      10_000,
    );
  });
});
