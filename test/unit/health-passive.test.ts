import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { registry } from '../../src/admin/metrics.ts';
import type { HealthCheckConfig } from '../../src/config/types.ts';
import { createLogger } from '../../src/log.ts';
import type { Route, UpstreamServer } from '../../src/routing/types.ts';
import { createServerHealth } from '../../src/upstream/health.ts';
import { fakeRoute, fakeServer, fakeTable } from '../helpers/fake-routes.ts';

const server = (address: string) => fakeServer(address);
const route = (id: string, servers: UpstreamServer[], healthCheck: HealthCheckConfig | null = null) =>
  fakeRoute({ id, servers, healthCheck });
const table = (routes: Route[]) => fakeTable(routes);

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines, messages: () => lines.map((l) => l.msg) };
}

async function gauge(routeId: string, address: string): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('tollgate_upstream_up')?.get();
  return metric?.values.find((v) => v.labels.route === routeId && v.labels.server === address)?.value;
}

describe('passive server health', () => {
  const a = server('10.0.0.1:80');
  const b = server('10.0.0.2:80');
  const r = route('passive.example/', [a, b]);
  let clock = 1_000;
  const log = capture();
  const health = createServerHealth({ logger: log.logger, now: () => clock, cooldownMs: 10_000 });
  health.sync(table([r]));
  after(() => health.close());

  test('everything is up at start and the gauge says so', async () => {
    assert.equal(health.allUp, true);
    assert.equal(health.isAvailable(r, a), true);
    assert.equal(await gauge(r.id, a.address), 1);
  });

  test('resets and protocol errors never eject', () => {
    for (let i = 0; i < 10; i++) health.reportFailure(r, a, 'reset');
    for (let i = 0; i < 10; i++) health.reportFailure(r, a, 'protocol');
    assert.equal(health.isAvailable(r, a), true);
  });

  test('a success in between resets the count of consecutive failures', () => {
    health.reportFailure(r, a, 'connect');
    health.reportFailure(r, a, 'timeout');
    health.reportSuccess(r, a);
    health.reportFailure(r, a, 'connect');
    health.reportFailure(r, a, 'connect');
    assert.equal(health.isAvailable(r, a), true);
  });

  test('the third consecutive failure ejects the server, logged once, gauge 0', async () => {
    health.reportFailure(r, a, 'connect');
    assert.equal(health.isAvailable(r, a), false);
    assert.equal(health.isAvailable(r, b), true);
    assert.equal(health.allUp, false);
    assert.equal(await gauge(r.id, a.address), 0);
    health.reportFailure(r, a, 'connect'); // a straggler sent before the ejection
    assert.equal(log.messages().filter((m) => m === 'upstream server ejected').length, 1);
    const line = log.lines.find((l) => l.msg === 'upstream server ejected');
    assert.equal(line?.server, a.address);
    assert.equal(line?.level, 'warn');
  });

  test('no trial during the cool-down', () => {
    clock += 9_999;
    assert.equal(health.claimTrial(r), null);
  });

  test('after the cool-down exactly one trial is handed out', () => {
    clock += 1;
    assert.equal(health.claimTrial(r), a);
    assert.equal(health.claimTrial(r), null, 'a second concurrent trial');
    assert.equal(health.isAvailable(r, a), false, 'still out of rotation until the trial answers');
  });

  test('a failed trial ejects it for another cool-down, without a second log line', () => {
    health.reportFailure(r, a, 'connect');
    assert.equal(health.claimTrial(r), null);
    clock += 10_000;
    assert.equal(health.claimTrial(r), a);
    assert.equal(log.messages().filter((m) => m === 'upstream server ejected').length, 1);
  });

  test('a successful trial re-admits it, logged once, gauge 1', async () => {
    health.reportSuccess(r, a);
    health.reportSuccess(r, a);
    assert.equal(health.isAvailable(r, a), true);
    assert.equal(health.allUp, true);
    assert.equal(await gauge(r.id, a.address), 1);
    assert.equal(log.messages().filter((m) => m === 'upstream server re-admitted').length, 1);
  });

  test('a trial that never reports back expires after a cool-down', () => {
    for (let i = 0; i < 3; i++) health.reportFailure(r, b, 'timeout');
    clock += 10_000;
    assert.equal(health.claimTrial(r), b);
    clock += 5_000;
    assert.equal(health.claimTrial(r), null);
    clock += 5_000;
    assert.equal(health.claimTrial(r), b);
    health.reportSuccess(r, b);
    assert.equal(health.allUp, true);
  });
});

describe('health state across reloads', () => {
  const a = server('10.0.1.1:80');
  const b = server('10.0.1.2:80');
  const log = capture();
  const health = createServerHealth({ logger: log.logger, now: () => 0 });
  after(() => health.close());

  test('an ejection is keyed by address: it survives a reload that builds new objects', async () => {
    const first = route('reload.example/', [a, b]);
    health.sync(table([first]));
    for (let i = 0; i < 3; i++) health.reportFailure(first, a, 'connect');
    const aAgain = server('10.0.1.1:80');
    const second = route('reload.example/', [aAgain, b]);
    const other = route('reload.example/other', [aAgain]);
    health.sync(table([second, other]));
    assert.equal(health.isAvailable(second, aAgain), false);
    assert.equal(health.isAvailable(other, aAgain), false, 'every route naming the address');
    assert.equal(await gauge(other.id, a.address), 0);
  });

  test('a reload dropping the server forgets it and removes its gauges', async () => {
    const third = route('reload.example/', [b]);
    health.sync(table([third]));
    assert.equal(health.allUp, true);
    assert.equal(await gauge('reload.example/', a.address), undefined);
    assert.equal(await gauge('reload.example/other', a.address), undefined);
    assert.equal(await gauge('reload.example/', b.address), 1);
  });
});
