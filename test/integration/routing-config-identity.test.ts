import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { request, startTollgate, type Tollgate } from '../helpers/tollgate.ts';

/**
 * The config identity the admin port publishes, checked on two real replicas: equal for the same
 * config, and never the sha256 of upstreams.yaml (which would let anyone who can scrape the metrics
 * test password guesses offline).
 */

const UPSTREAMS = {
  upstreams: {
    'app.test': {
      paths: {
        '/': { servers: ['127.0.0.1:9'], authorization: { type: 'basic', creds: 'admin:guessable' } },
      },
    },
  },
};

const published = async (tollgate: Tollgate) => {
  const metrics = await tollgate.metrics();
  const fromMetrics = [...metrics.matchAll(/^tollgate_config_info\{hash="([0-9a-f]+)"\} 1$/gm)].map(
    (m) => m[1],
  );
  const ready = JSON.parse((await request(`${tollgate.adminUrl}/readyz`)).body) as { config_hash: string };
  const readyLine = tollgate.logs().find((line) => line.msg === 'tollgate ready');
  return { fromMetrics, fromReadyz: ready.config_hash, fromLog: readyLine?.hash };
};

describe('config identity on the admin port', () => {
  const replicas: Tollgate[] = [];

  before(async () => {
    // One after the other, with room for a loaded machine: this test is about the hash, not start-up.
    for (let i = 0; i < 2; i++) {
      replicas.push(
        await startTollgate({
          main: { masterkey: 'shared-masterkey-for-both' },
          upstreams: UPSTREAMS,
          readyTimeoutMs: 30_000,
        }),
      );
    }
  });

  after(async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
  });

  it('is one value per replica, the same on both, and not a hash of the file', async () => {
    const [first, second] = await Promise.all(replicas.map(published));
    assert.ok(first && second);
    assert.equal(first.fromMetrics.length, 1);
    const identity = first.fromMetrics[0] as string;
    assert.match(identity, /^[0-9a-f]{64}$/);
    assert.equal(first.fromReadyz, identity);
    assert.equal(first.fromLog, identity);
    assert.deepEqual(second, first);

    const replica = replicas[0] as Tollgate;
    const bytes = await readFile(join(replica.dir, 'upstreams.yaml'));
    assert.notEqual(identity, createHash('sha256').update(bytes).digest('hex'));
    assert.ok(!replica.stdout().includes(createHash('sha256').update(bytes).digest('hex')));
  });
});
