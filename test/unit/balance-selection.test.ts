import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { StickySessions } from '../../src/config/types.ts';
import { createLogger } from '../../src/log.ts';
import { createPickServerStage } from '../../src/pipeline/5-pick-server.ts';
import { PASS } from '../../src/pipeline/verdict.ts';
import type { ProxyRequest } from '../../src/request/record.ts';
import type { Route, RoutingTable, UpstreamServer } from '../../src/routing/types.ts';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { createServerHealth, type ServerHealth } from '../../src/upstream/health.ts';
import { fakeRoute, fakeServer, fakeTable } from '../helpers/fake-routes.ts';

const server = (n: number): UpstreamServer => fakeServer(`10.9.0.${n}:80`, `sid${n}`);
const route = (id: string, servers: UpstreamServer[], sticky: StickySessions | null = null): Route =>
  fakeRoute({ id, hostKey: 'h', prefix: '/', servers, sticky });
const table = (routes: Route[]): RoutingTable => fakeTable(routes, 't');

/** A ProxyRequest with just what the pick-server stage reads. */
function proxyRequest(r: Route, t: RoutingTable, options: { cookie?: string; secure?: boolean } = {}) {
  const request = {
    req: { headers: options.cookie === undefined ? {} : { cookie: options.cookie } },
    table: t,
    route: r,
    secure: options.secure ?? false,
    responseCookies: [] as string[],
    candidates: [] as readonly UpstreamServer[],
  } as unknown as ProxyRequest;
  return { request };
}

const REFUSED = classifyUpstreamError(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));

const addresses = (servers: readonly UpstreamServer[]) => servers.map((s) => s.address);

function eject(health: ServerHealth, r: Route, s: UpstreamServer) {
  for (let i = 0; i < 3; i++) health.reportFailure(r, s, REFUSED);
}

describe('round robin', () => {
  const [s1, s2, s3] = [server(1), server(2), server(3)] as [UpstreamServer, UpstreamServer, UpstreamServer];
  const r = route('rr/', [s1, s2, s3]);
  const t = table([r]);
  let clock = 0;
  const health = createServerHealth({ logger: createLogger('silent'), now: () => clock });
  health.sync(t);
  const balance = createPickServerStage({ health });
  after(() => health.close());

  test('each server in turn goes first; the others follow as failover', () => {
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const { request } = proxyRequest(r, t);
      assert.equal(balance(request), PASS);
      seen.push(addresses(request.candidates));
    }
    assert.deepEqual(seen, [
      [s1.address, s2.address, s3.address],
      [s2.address, s3.address, s1.address],
      [s3.address, s1.address, s2.address],
      [s1.address, s2.address, s3.address],
    ]);
  });

  test('the counter is per route', () => {
    const other = route('rr/other', [s1, s2, s3]);
    const { request } = proxyRequest(other, t);
    balance(request);
    assert.equal(request.candidates[0], s1);
  });

  test('ejected servers are left out of the candidates entirely', () => {
    eject(health, r, s2);
    const firsts = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const { request } = proxyRequest(r, t);
      balance(request);
      assert.ok(!request.candidates.includes(s2));
      assert.equal(request.candidates.length, 2);
      firsts.add((request.candidates[0] as UpstreamServer).address);
    }
    assert.deepEqual([...firsts].sort(), [s1.address, s3.address]);
  });

  test('every server ejected: passive health never empties a route, all are tried (panic), no trial apart', () => {
    eject(health, r, s1);
    eject(health, r, s3);
    const { request } = proxyRequest(r, t);
    assert.equal(balance(request), PASS);
    assert.deepEqual(addresses(request.candidates).sort(), addresses([s1, s2, s3]));
    clock += 10_000;
    const later = proxyRequest(r, t);
    assert.equal(balance(later.request), PASS);
    assert.equal(later.request.candidates.length, 3, 'no trial added in front of the rotation');
  });

  test('the first answer re-admits its server: the others are out again, each back through its trial', () => {
    health.reportSuccess(r, s2);
    const { request } = proxyRequest(r, t);
    assert.equal(balance(request), PASS);
    // s1 and s3 are past their cool-down: one of them comes first as the trial, s2 behind it.
    assert.equal(request.candidates.length, 2);
    assert.notEqual(request.candidates[0], s2);
    assert.equal(request.candidates[1], s2);
  });
});

describe('sticky sessions', () => {
  const [s1, s2, s3] = [server(4), server(5), server(6)] as [UpstreamServer, UpstreamServer, UpstreamServer];
  const r = route('sticky/', [s1, s2, s3], { maxAgeSeconds: 120 });
  const rOther = route('sticky/other', [server(7), server(8)], { maxAgeSeconds: 120 });
  const t = table([r, rOther]);
  const health = createServerHealth({ logger: createLogger('silent') });
  health.sync(t);
  const balance = createPickServerStage({ health });
  after(() => health.close());

  const cookieValue = (setCookie: string | undefined) =>
    /^tollgate_sticky=([^;]*)/.exec(setCookie ?? '')?.[1];

  test('no cookie: round robin and a cookie naming the chosen server', () => {
    const { request } = proxyRequest(r, t, { secure: true });
    balance(request);
    assert.equal(request.responseCookies.length, 1);
    const [cookie] = request.responseCookies;
    assert.equal(cookieValue(cookie), (request.candidates[0] as UpstreamServer).id);
    assert.match(cookie as string, /; Path=\/; HttpOnly; SameSite=Lax; Max-Age=120; Secure$/);
  });

  test('a valid cookie pins its server, with the others as failover, and sets no new cookie', () => {
    for (let i = 0; i < 5; i++) {
      const { request } = proxyRequest(r, t, { cookie: `x=1; tollgate_sticky=${s2.id}` });
      assert.equal(balance(request), PASS);
      assert.deepEqual(addresses(request.candidates), [s2.address, s3.address, s1.address]);
      assert.deepEqual(request.responseCookies, []);
    }
  });

  test('a cookie naming an unknown server is replaced', () => {
    const { request } = proxyRequest(r, t, { cookie: 'tollgate_sticky=not-a-server' });
    balance(request);
    assert.equal(cookieValue(request.responseCookies[0]), (request.candidates[0] as UpstreamServer).id);
  });

  test('a cookie naming an ejected server falls back to balancing and is replaced', () => {
    eject(health, r, s2);
    const { request } = proxyRequest(r, t, { cookie: `tollgate_sticky=${s2.id}` });
    assert.equal(balance(request), PASS);
    assert.ok(!request.candidates.includes(s2));
    const chosen = request.candidates[0] as UpstreamServer;
    assert.equal(cookieValue(request.responseCookies[0]), chosen.id);
    // and the replacement pins
    const again = proxyRequest(r, t, { cookie: `tollgate_sticky=${chosen.id}` });
    balance(again.request);
    assert.equal(again.request.candidates[0], chosen);
    assert.ok(!again.request.candidates.includes(s2));
  });

  test('two routes of one host keep their own choice in one cookie', () => {
    const first = proxyRequest(rOther, t, { cookie: `tollgate_sticky=${s1.id}` });
    balance(first.request);
    const value = cookieValue(first.request.responseCookies[0]) as string;
    const otherChoice = first.request.candidates[0] as UpstreamServer;
    assert.equal(value, `${otherChoice.id}.${s1.id}`);
    const back = proxyRequest(r, t, { cookie: `tollgate_sticky=${value}` });
    balance(back.request);
    assert.equal(back.request.candidates[0], s1);
    assert.deepEqual(back.request.responseCookies, []);
  });
});
