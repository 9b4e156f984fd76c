import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { hashPassword } from '../../src/auth/password.ts';
import { waitForLiveConfig } from '../helpers/config-identity.ts';
import { type ConfigMapVolume, createConfigMapVolume } from '../helpers/configmap.ts';
import { reloadCount } from '../helpers/reload-metrics.ts';
import { startTollgate, type Tollgate } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';

/**
 * Hashed Basic passwords under routing-table churn (docs/security.md "Password floods", "Across
 * reloads"): every rebuild used to start the policy's password checks cold (empty cache, fresh
 * queue), so the burst of requests right after each one went back to scrypt at once, one scrypt per
 * request: 503 auth_overloaded and multi-second stalls. Now the verified credentials and the queue
 * survive a rebuild that leaves the policy alone, and identical checks in flight are shared.
 * Bounded on purpose: loopback only, a few clients, a few seconds (the machine is shared).
 */

const SWAPS = 8;
const SWAP_EVERY_MS = 300;
const CLIENTS = 16;
const USERS = ['ana', 'ben', 'cleo'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Basic password checks while the routing table is rebuilt under load (real process)', () => {
  let upstream: Upstream;
  let other: Upstream;
  let volume: ConfigMapVolume;
  let tollgate: Tollgate;
  let hashes: string[];

  // Every version changes another route (its server), never the Basic policy.
  const configOf = (version: number) =>
    [
      `# version ${version}`,
      'upstreams:',
      '  app.test:',
      '    paths:',
      '      /private:',
      `        servers: ["${upstream.address}"]`,
      '        authorization:',
      '          type: basic',
      '          users:',
      ...USERS.map((name, i) => `            - { username: ${name}, password_hash: "${hashes[i]}" }`),
      '      /public:',
      `        servers: ["${version % 2 === 0 ? upstream.address : other.address}"]`,
      '',
    ].join('\n');

  before(async () => {
    [upstream, other] = await Promise.all([startUpstream({ name: 'app' }), startUpstream({ name: 'other' })]);
    // The production default cost: a check really costs what it costs in production.
    hashes = await Promise.all(USERS.map((name) => hashPassword(`${name}-pw`)));
    volume = await createConfigMapVolume({ 'upstreams.yaml': configOf(0) });
    tollgate = await startTollgate({
      upstreams: '',
      upstreamsPath: volume.path('upstreams.yaml'),
      main: { access_log: false },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await volume?.remove();
    await Promise.all([upstream?.close(), other?.close()]);
  });

  it('loses no request: no 503, no 401 for a right password, across every rebuild', {
    timeout: 120_000,
  }, async () => {
    let running = true;
    let swaps = 0;
    const statuses = new Map<number, number>();
    const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
    const once = (user: string) =>
      new Promise<number>((resolve) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: tollgate.proxyPort,
            path: '/private/x',
            agent,
            headers: {
              host: 'app.test',
              authorization: `Basic ${Buffer.from(`${user}:${user}-pw`).toString('base64')}`,
            },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
            res.on('error', () => resolve(0));
          },
        );
        req.on('error', () => resolve(0));
        req.end();
      });
    const client = async (index: number) => {
      const user = USERS[index % USERS.length] as string;
      while (running) {
        const status = await once(user);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    };
    const swapper = async () => {
      while (swaps < SWAPS) {
        await sleep(SWAP_EVERY_MS);
        const text = configOf(++swaps);
        await volume.update({ 'upstreams.yaml': text });
        await waitForLiveConfig(tollgate.adminUrl, text, 5_000);
      }
      running = false;
    };
    await Promise.all([swapper(), ...Array.from({ length: CLIENTS }, (_, i) => client(i))]);
    agent.destroy();

    const total = [...statuses.values()].reduce((a, b) => a + b, 0);
    assert.deepEqual([...statuses.keys()], [200], `statuses: ${JSON.stringify([...statuses])}`);
    assert.ok(total > 100, `only ${total} requests were sent`);
    const metrics = await tollgate.metrics();
    assert.equal(reloadCount(metrics, 'upstreams.yaml', 'success'), swaps);
    // One scrypt per distinct credential for the whole run: no rebuild sent anyone back to scrypt.
    const checks = Number(metrics.match(/^tollgate_password_checks_total (\d+)$/m)?.[1]);
    assert.equal(checks, USERS.length, `${checks} password checks for ${USERS.length} credentials`);
    process.stdout.write(`# ${total} requests over ${swaps} rebuilds, all 200\n`);
  });
});
