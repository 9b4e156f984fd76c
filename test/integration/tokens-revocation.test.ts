import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { type ConfigMapVolume, createConfigMapVolume } from '../helpers/configmap.ts';
import { testScope } from '../helpers/scope.ts';
import { counterValue, mintToken } from '../helpers/token-api.ts';
import { request, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';

const MASTERKEY = 'revocation-test-masterkey-0b7d';

describe('revoked_tokens_file through the proxy process', () => {
  const scope = testScope();
  let upstream: Upstream;
  let tollgate: Tollgate;
  let volume: ConfigMapVolume;

  before(async () => {
    upstream = await scope.upstream({ name: 'app' });
    // Empty at start: a valid, empty list (the watcher must not take it for a broken file).
    volume = await createConfigMapVolume({ 'revoked.txt': '' });
    scope.keep({ close: () => volume.remove() });
    tollgate = await scope.tollgate({
      main: { masterkey: MASTERKEY, revoked_tokens_file: volume.path('revoked.txt') },
      upstreams: {
        upstreams: {
          DEFAULT: { paths: { '/app': { servers: [upstream.address], authorization: { type: 'jwt' } } } },
        },
      },
    });
  });

  const get = (token: string, path = '/app') =>
    request(tollgate.proxyUrl, { path, headers: { host: 'app.local', authorization: `Bearer ${token}` } });

  it('a revoked jti is refused 401 token_revoked within a second of the kubelet swap, and accepted again once removed', async () => {
    const kept = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'kept', valid: 10 });
    const leaked = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'leaked', valid: 10 });
    // Both verified once, so the revocation must also beat the verified-token cache.
    assert.equal((await get(kept.token)).status, 200);
    assert.equal((await get(leaked.token)).status, 200);

    await volume.update({
      'revoked.txt': `# revoked Tollgate tokens\n${leaked.jti}  # leaked in a ticket\n`,
    });
    const swappedAt = Date.now();
    await waitFor(async () => (await get(leaked.token)).status === 401, 5_000);
    const elapsed = Date.now() - swappedAt;
    assert.ok(elapsed < 1_000, `applied ${elapsed} ms after the swap`);
    const refused = await get(leaked.token);
    assert.equal(refused.json().error, 'token_revoked');
    assert.equal(refused.headers['www-authenticate'], 'Bearer realm="tollgate", error="invalid_token"');
    assert.equal((await get(kept.token)).status, 200, 'other tokens are untouched');
    const metrics = await tollgate.metrics();
    assert.ok(
      counterValue(
        metrics,
        'tollgate_auth_failures_total',
        'route="DEFAULT/app",method="jwt",reason="token_revoked"',
      ) >= 2,
    );
    assert.match(metrics, /^tollgate_revoked_tokens 1$/m);

    await volume.update({ 'revoked.txt': '# revoked Tollgate tokens\n' });
    await waitFor(async () => (await get(leaked.token)).status === 200, 5_000);
    assert.match(await tollgate.metrics(), /^tollgate_revoked_tokens 0$/m);
  });

  it('a file that disappears keeps the revocations in force', async () => {
    const leaked = await mintToken(tollgate.apiUrl, { master_key: MASTERKEY, owner: 'leaked2', valid: 10 });
    await volume.update({ 'revoked.txt': `${leaked.jti}\n` });
    await waitFor(async () => (await get(leaked.token)).status === 401, 5_000);
    await volume.update({ 'other.txt': 'x' }); // the key is gone from the ConfigMap
    await waitFor(() => tollgate.stdout().includes('revoked_tokens_file not reloaded'), 5_000);
    assert.equal((await get(leaked.token)).status, 401);
  });

  it('a revoked_tokens_file that cannot be read stops the start with a message naming it', async () => {
    const missing = join(volume.dir, 'no-such-file.txt');
    const failed = await startTollgate({
      main: { masterkey: MASTERKEY, revoked_tokens_file: missing },
      upstreams: { upstreams: { DEFAULT: { paths: { '/': { servers: [upstream.address] } } } } },
      waitReady: false,
    });
    assert.equal(await failed.exited, 1);
    assert.match(
      failed.stderr(),
      /main\.yaml:\d+:\d+: revoked_tokens_file: cannot read .*no-such-file\.txt: no such file/,
    );
    await failed.stop();
  });

  it('an unknown key next to revoked_tokens_file is still refused (strict validation)', async () => {
    const failed = await startTollgate({
      main: { masterkey: MASTERKEY, revoked_token_file: volume.path('revoked.txt') },
      upstreams: { upstreams: { DEFAULT: { paths: { '/': { servers: [upstream.address] } } } } },
      waitReady: false,
    });
    assert.equal(await failed.exited, 1);
    assert.match(failed.stderr(), /revoked_token_file/);
    await failed.stop();
  });
});
