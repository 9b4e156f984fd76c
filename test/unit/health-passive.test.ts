import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { HealthCheckConfig } from '../../src/config/types.ts';
import { createLogger } from '../../src/log.ts';
import { registry } from '../../src/observe/metrics.ts';
import type { Route, UpstreamServer } from '../../src/routing/types.ts';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { createServerHealth } from '../../src/upstream/health.ts';
import { fakeRoute, fakeServer, fakeTable } from '../helpers/fake-routes.ts';

const server = (address: string) => fakeServer(address);
const route = (id: string, servers: UpstreamServer[], healthCheck: HealthCheckConfig | null = null) =>
  fakeRoute({ id, servers, healthCheck });
const table = (routes: Route[]) => fakeTable(routes);

/** Failures as the forwarder classifies them. */
const failure = (code: string) => classifyUpstreamError(Object.assign(new Error(code), { code }));
const REFUSED = failure('ECONNREFUSED');
const CONNECT_TIMEOUT = failure('UND_ERR_CONNECT_TIMEOUT');
const RESPONSE_TIMEOUT = failure('UND_ERR_HEADERS_TIMEOUT');
const BODY_TIMEOUT = failure('UND_ERR_BODY_TIMEOUT');
const RESET = failure('ECONNRESET');
const PROTOCOL = failure('HPE_INVALID_CONSTANT');

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

  test('resets, protocol errors and response timeouts never eject: the server was reached', () => {
    for (let i = 0; i < 10; i++) health.reportFailure(r, a, RESET);
    for (let i = 0; i < 10; i++) health.reportFailure(r, a, PROTOCOL);
    for (let i = 0; i < 10; i++) health.reportFailure(r, a, RESPONSE_TIMEOUT);
    for (let i = 0; i < 10; i++) health.reportFailure(r, a, BODY_TIMEOUT);
    assert.equal(health.isAvailable(r, a), true);
    assert.equal(health.allUp, true);
  });

  test('a success in between resets the count of consecutive failures', () => {
    health.reportFailure(r, a, REFUSED);
    health.reportFailure(r, a, CONNECT_TIMEOUT);
    health.reportSuccess(r, a);
    health.reportFailure(r, a, REFUSED);
    health.reportFailure(r, a, REFUSED);
    assert.equal(health.isAvailable(r, a), true);
  });

  test('the third consecutive failure ejects the server, logged once, gauge 0', async () => {
    health.reportFailure(r, a, REFUSED);
    assert.equal(health.isAvailable(r, a), false);
    assert.equal(health.isAvailable(r, b), true);
    assert.equal(health.allUp, false);
    assert.equal(await gauge(r.id, a.address), 0);
    health.reportFailure(r, a, REFUSED); // a straggler sent before the ejection
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
    health.reportFailure(r, a, REFUSED);
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
    for (let i = 0; i < 3; i++) health.reportFailure(r, b, CONNECT_TIMEOUT);
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
    for (let i = 0; i < 3; i++) health.reportFailure(first, a, REFUSED);
    const aAgain = server('10.0.1.1:80');
    const second = route('reload.example/', [aAgain, b]);
    const other = route('reload.example/other', [aAgain, server('10.0.1.3:80')]);
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

describe('passive health never takes the last server', () => {
  const only = server('10.0.2.1:80');
  const x = server('10.0.2.2:80');
  const y = server('10.0.2.3:80');
  let clock = 0;
  const log = capture();
  const health = createServerHealth({ logger: log.logger, now: () => clock, cooldownMs: 10_000 });
  after(() => health.close());

  test("a route's only server is never ejected, however often it cannot be reached", async () => {
    const single = route('single.example/', [only]);
    const again = route('single.example/again', [only]);
    health.sync(table([single, again]));
    for (let i = 0; i < 10; i++) health.reportFailure(single, only, REFUSED);
    assert.equal(health.isAvailable(single, only), true);
    assert.equal(health.allUp, true);
    assert.equal(await gauge(single.id, only.address), 1);
    assert.deepEqual(log.messages(), [], 'nothing ejected, nothing logged');
  });

  test('an address shared with a route of several servers is ejected there, kept where it is alone', async () => {
    const single = route('single.example/', [only]);
    const pair = route('pair.example/', [only, x]);
    health.sync(table([single, pair]));
    for (let i = 0; i < 3; i++) health.reportFailure(pair, only, REFUSED);
    assert.equal(health.isAvailable(pair, only), false);
    assert.equal(health.isAvailable(single, only), true, 'the route has no other server');
    assert.equal(await gauge(pair.id, only.address), 0);
    assert.equal(await gauge(single.id, only.address), 1);
  });

  test('when every server of a route is ejected, all stay in rotation (panic) and no trial is claimed', async () => {
    const pair = route('panic.example/', [x, y]);
    health.sync(table([pair]));
    for (let i = 0; i < 3; i++) health.reportFailure(pair, x, REFUSED);
    assert.equal(health.isAvailable(pair, x), false);
    assert.equal(await gauge(pair.id, x.address), 0);
    for (let i = 0; i < 3; i++) health.reportFailure(pair, y, CONNECT_TIMEOUT);
    assert.equal(health.isAvailable(pair, x), true);
    assert.equal(health.isAvailable(pair, y), true);
    assert.equal(await gauge(pair.id, x.address), 1, "the other server's gauge follows the panic");
    assert.equal(await gauge(pair.id, y.address), 1);
    clock += 10_000;
    assert.equal(health.claimTrial(pair), null, 'both are tried anyway');

    // The first answer re-admits its server; the other is out again.
    health.reportSuccess(pair, y);
    assert.equal(health.isAvailable(pair, y), true);
    assert.equal(health.isAvailable(pair, x), false);
    assert.equal(await gauge(pair.id, x.address), 0);
    assert.equal(health.claimTrial(pair), x);
  });
});
