import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { V8_LAUNCH_FLAGS } from '../../src/v8-launch-flags.ts';
import { configIdentityOf } from '../helpers/config-identity.ts';
import { testScope } from '../helpers/scope.ts';
import { request, waitFor } from '../helpers/tollgate.ts';
import type { Upstream } from '../helpers/upstream.ts';
import { accessLinesByWorker, liveWorkers, PROCESS_START_MS, sample, sumOf } from '../helpers/workers.ts';

const upstreamsFor = (upstream: Upstream) =>
  `upstreams:\n  app.test:\n    paths:\n      "/":\n        servers: ["${upstream.address}"]\n`;

/** The processes `pid` forked (Linux /proc). */
const childPids = (pid: number): number[] =>
  readdirSync(`/proc/${pid}/task`).flatMap((task) =>
    readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number),
  );

/** One request on a connection of its own, so the kernel picks a worker for each. */
const get = (url: string) => request(url, { headers: { host: 'app.test', connection: 'close' } });

describe('workers: 2 behave as one Tollgate (the real process)', () => {
  const scope = testScope();

  it('spreads connections over both workers and /metrics counts every request exactly once', async () => {
    const upstream = await scope.upstream({ name: 'a' });
    const tollgate = await scope.tollgate({
      upstreams: upstreamsFor(upstream),
      main: { workers: 2 },
      readyTimeoutMs: PROCESS_START_MS,
    });
    assert.equal(liveWorkers(tollgate).length, 2);
    // The primary was started without the V8 launch flags (as `node dist/main.js`): the workers,
    // which serve the requests, still get the young-generation cap (src/v8-launch-flags.ts).
    for (const worker of childPids(tollgate.child.pid as number)) {
      const argv = readFileSync(`/proc/${worker}/cmdline`, 'utf8').split('\0');
      for (const flag of V8_LAUNCH_FLAGS)
        assert.ok(argv.includes(flag), `worker ${worker}: ${argv.join(' ')}`);
    }

    const answers = await Promise.all(Array.from({ length: 100 }, () => get(`${tollgate.proxyUrl}/x`)));
    assert.deepEqual(
      answers.map((answer) => answer.status),
      Array(100).fill(200),
    );
    await waitFor(
      () => [...accessLinesByWorker(tollgate).values()].reduce((a, b) => a + b, 0) === 100,
      PROCESS_START_MS,
    );
    const byWorker = accessLinesByWorker(tollgate);
    assert.equal(byWorker.size, 2, `both workers answered: ${JSON.stringify([...byWorker])}`);

    const metrics = await tollgate.metrics();
    assert.equal(sumOf(metrics, 'tollgate_requests_total', 'route="app.test/"', 'status="200"'), 100);
    assert.equal(sample(metrics, 'tollgate_request_duration_seconds_count{route="app.test/"}'), 100);
    assert.equal(sample(metrics, 'tollgate_workers_serving'), 2);
    // Every process samples its event loop; the primary serves their sum as one histogram.
    assert.ok((sample(metrics, 'tollgate_event_loop_delay_seconds_count') ?? 0) > 0);
    assert.ok(sample(metrics, 'tollgate_event_loop_delay_seconds_bucket{le="+Inf"}') !== undefined);
    // Asked again, nothing is counted twice.
    assert.equal(
      sumOf(await tollgate.metrics(), 'tollgate_requests_total', 'route="app.test/"', 'status="200"'),
      100,
    );
  });

  it('a config swap reaches every worker before readiness and tollgate_config_info name the new hash', async () => {
    const before = await scope.upstream({ name: 'before' });
    const after = await scope.upstream({ name: 'after' });
    const tollgate = await scope.tollgate({
      upstreams: upstreamsFor(before),
      main: { workers: 2 },
      readyTimeoutMs: PROCESS_START_MS,
    });
    const oldHash = (await request(`${tollgate.adminUrl}/readyz`)).json().config_hash;

    // Replaced the way an editor or the kubelet does: a new file renamed over the old one.
    const text = upstreamsFor(after);
    const newHash = configIdentityOf(text);
    const staging = join(tollgate.dir, 'upstreams.yaml.new');
    await writeFile(staging, text);
    await rename(staging, join(tollgate.dir, 'upstreams.yaml'));

    // Until readiness names the new hash, tollgate_config_info shows the old one or none, never a
    // hash that only some workers serve.
    await waitFor(async () => {
      const readyz = (await request(`${tollgate.adminUrl}/readyz`)).json();
      if (readyz.config_hash === newHash) return true;
      const info = await tollgate.metrics();
      assert.equal(sample(info, `tollgate_config_info{hash="${newHash}"}`) ?? 0, 0);
      return false;
    }, PROCESS_START_MS);
    assert.notEqual(oldHash, newHash);

    // From that moment every connection, whichever worker takes it, sees the new table.
    const answers = await Promise.all(Array.from({ length: 40 }, () => get(`${tollgate.proxyUrl}/y`)));
    for (const answer of answers) assert.equal(answer.json().server, 'after');
    const metrics = await tollgate.metrics();
    assert.equal(sample(metrics, `tollgate_config_info{hash="${newHash}"}`), 1);
    assert.equal(sample(metrics, `tollgate_config_info{hash="${oldHash}"}`), undefined);
    assert.equal(
      sumOf(metrics, 'tollgate_config_reloads_total', 'file="upstreams.yaml"', 'result="success"'),
      1,
    );
  });

  it('a sticky cookie set by one worker pins the client whichever worker reads it', async () => {
    const servers = [await scope.upstream({ name: 's0' }), await scope.upstream({ name: 's1' })];
    const tollgate = await scope.tollgate({
      upstreams: {
        sticky_sessions: 3600,
        upstreams: { 'app.test': { paths: { '/': { servers: servers.map((s) => s.address) } } } },
      },
      main: { workers: 2 },
      readyTimeoutMs: PROCESS_START_MS,
    });
    const first = await get(`${tollgate.proxyUrl}/`);
    const setCookie = [first.headers['set-cookie'] ?? []]
      .flat()
      .find((c) => c.startsWith('tollgate_sticky='));
    assert.ok(setCookie, 'the first answer sets the cookie');
    const cookie = setCookie.split(';')[0] as string;
    const pinned = first.json<{ server: string }>().server;

    const answers = await Promise.all(
      Array.from({ length: 40 }, () =>
        request(`${tollgate.proxyUrl}/`, { headers: { host: 'app.test', connection: 'close', cookie } }),
      ),
    );
    assert.deepEqual(
      new Set(answers.map((answer) => answer.json<{ server: string }>().server)),
      new Set([pinned]),
    );
    await waitFor(() => accessLinesByWorker(tollgate).size === 2, PROCESS_START_MS);
  });
});
