import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { StickySessions } from '../../src/config/types.ts';
import { createLogger } from '../../src/log.ts';
import { createPickServerStage } from '../../src/pipeline/5-pick-server.ts';
import type { ProxyRequest } from '../../src/pipeline/request.ts';
import { type Answer, PASS } from '../../src/pipeline/verdict.ts';
import type { Route, RoutingTable, UpstreamServer } from '../../src/routing/types.ts';
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

const addresses = (servers: readonly UpstreamServer[]) => servers.map((s) => s.address);

function eject(health: ServerHealth, r: Route, s: UpstreamServer) {
  for (let i = 0; i < 3; i++) health.reportFailure(r, s, 'connect');
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

  test('every server down: 503 no_healthy_upstream and the stage stops the request', () => {
    eject(health, r, s1);
    eject(health, r, s3);
    const { request } = proxyRequest(r, t);
    const answer = balance(request) as Answer;
    assert.equal(answer.kind, 'answer');
    assert.equal(answer.status, 503);
    assert.equal(JSON.parse(String(answer.body)).error, 'no_healthy_upstream');
  });

  test('after the cool-down one request is the trial, alone when nothing else is up', () => {
    clock += 10_000;
    const { request } = proxyRequest(r, t);
    assert.equal(balance(request), PASS);
    assert.equal(request.candidates.length, 1);
    const trial = request.candidates[0] as UpstreamServer;
    health.reportSuccess(r, trial);
    const next = proxyRequest(r, t);
    assert.equal(balance(next.request), PASS);
    // the other two are half-open too: the next request brings one of them as trial, first
    assert.equal(next.request.candidates.length, 2);
    assert.notEqual(next.request.candidates[0], trial);
    assert.equal(next.request.candidates[1], trial);
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
