import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testScope } from '../helpers/scope.ts';
import { request, type SimpleResponse, type Tollgate } from '../helpers/tollgate.ts';
import type { Upstream, UpstreamOptions } from '../helpers/upstream.ts';

const scope = testScope();

async function upstreams(count: number, options: UpstreamOptions = {}): Promise<Upstream[]> {
  const list: Upstream[] = [];
  for (let i = 0; i < count; i++) list.push(await scope.upstream({ ...options, name: `s${i}` }));
  return list;
}

function stickyConfig(servers: Upstream[], sticky: boolean | number = 3600) {
  return {
    sticky_sessions: sticky,
    upstreams: { 'app.test': { paths: { '/': { servers: servers.map((s) => s.address) } } } },
  };
}

function proxy(config: Record<string, unknown>, main: Record<string, unknown> = {}): Promise<Tollgate> {
  return scope.tollgate({ upstreams: config, main });
}

function get(
  tollgate: Tollgate,
  cookie?: string,
  extra: Record<string, string> = {},
): Promise<SimpleResponse> {
  const headers: Record<string, string> = { host: 'app.test', ...extra };
  if (cookie !== undefined) headers.cookie = cookie;
  return request(tollgate.proxyUrl, { path: '/page', headers });
}

const setCookies = (res: SimpleResponse): string[] => {
  const value = res.headers['set-cookie'];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
};
const stickyOf = (res: SimpleResponse) => setCookies(res).find((c) => c.startsWith('tollgate_sticky='));
/** `tollgate_sticky=<value>` as a client would send it back. */
const cookiePair = (setCookie: string | undefined) => setCookie?.split(';')[0] as string;
const servedBy = (res: SimpleResponse) => res.json<{ server: string }>().server;

describe('sticky sessions', () => {
  it('pins a client to one server for 100 requests while new clients are spread', async () => {
    const servers = await upstreams(3);
    const tollgate = await proxy(stickyConfig(servers));

    const first = await get(tollgate);
    assert.equal(first.status, 200);
    const cookie = cookiePair(stickyOf(first));
    assert.ok(cookie, 'the first response sets the cookie');
    const pinned = servedBy(first);

    const seen = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const res = await get(tollgate, `other=1; ${cookie}`);
      assert.equal(res.status, 200);
      seen.add(servedBy(res));
      assert.equal(stickyOf(res), undefined, 'a valid cookie is not set again');
    }
    assert.deepEqual([...seen], [pinned]);

    // Without the cookie the same proxy balances: the stickiness above is the cookie's doing.
    const fresh = new Set<string>();
    for (let i = 0; i < 6; i++) fresh.add(servedBy(await get(tollgate)));
    assert.equal(fresh.size, 3);
  });

  it('the cookie means the same server on every replica sharing the config', async () => {
    const servers = await upstreams(3);
    const config = stickyConfig(servers);
    const [a, b] = [await proxy(config), await proxy(config)];
    // Move replica b's rotation so its own next choice differs from a's.
    await get(b);
    const first = await get(a);
    const cookie = cookiePair(stickyOf(first));
    const pinned = servedBy(first);
    for (let i = 0; i < 50; i++) {
      for (const replica of [a, b]) {
        const res = await get(replica, cookie);
        assert.equal(servedBy(res), pinned);
        assert.equal(stickyOf(res), undefined);
      }
    }
  });

  it('sets HttpOnly, SameSite=Lax, Path=/ and Max-Age, Secure only over HTTPS, and never reveals the address', async () => {
    const servers = await upstreams(2);
    const tollgate = await proxy(stickyConfig(servers, 600), { trusted_proxies: ['127.0.0.1/32'] });
    const plain = stickyOf(await get(tollgate)) as string;
    const value = cookiePair(plain).slice('tollgate_sticky='.length);
    assert.match(value, /^[A-Za-z0-9_-]+$/);
    for (const s of servers) {
      assert.ok(!value.includes(String(s.port)), 'no port in the cookie');
    }
    assert.ok(!value.includes('127'), 'no address in the cookie');
    const attributes = plain
      .split(';')
      .map((part) => part.trim())
      .slice(1);
    assert.deepEqual(attributes.sort(), ['HttpOnly', 'Max-Age=600', 'Path=/', 'SameSite=Lax']);

    const overTls = stickyOf(await get(tollgate, undefined, { 'x-forwarded-proto': 'https' })) as string;
    assert.ok(overTls.split('; ').includes('Secure'), overTls);
  });

  it('sticky_sessions: true gives a session cookie (no Max-Age)', async () => {
    const servers = await upstreams(2);
    const tollgate = await proxy(stickyConfig(servers, true));
    const cookie = stickyOf(await get(tollgate)) as string;
    assert.ok(cookie);
    assert.ok(!/max-age|expires/i.test(cookie), cookie);
  });

  it('no cookie at all when sticky sessions are off', async () => {
    const servers = await upstreams(2);
    const tollgate = await proxy(stickyConfig(servers, false));
    assert.equal(stickyOf(await get(tollgate)), undefined);
  });

  it('falls back to another server when its server dies, and replaces the cookie', async () => {
    const servers = await upstreams(3);
    const tollgate = await proxy(stickyConfig(servers));
    const first = await get(tollgate);
    const oldCookie = cookiePair(stickyOf(first));
    const dead = servers.find((s) => s.name === servedBy(first)) as Upstream;
    await dead.close();

    // Every request is answered by a live server; once the dead one is ejected the cookie is replaced.
    let replaced: string | undefined;
    const fallbacks = new Set<string>();
    for (let i = 0; i < 10 && replaced === undefined; i++) {
      const res = await get(tollgate, oldCookie);
      assert.equal(res.status, 200);
      assert.notEqual(servedBy(res), dead.name);
      fallbacks.add(servedBy(res));
      replaced = stickyOf(res);
    }
    assert.ok(replaced, 'the cookie naming the dead server was replaced');
    assert.notEqual(cookiePair(replaced), oldCookie);

    const newCookie = cookiePair(replaced);
    const pinned = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const res = await get(tollgate, newCookie);
      pinned.add(servedBy(res));
      assert.equal(stickyOf(res), undefined);
    }
    assert.equal(pinned.size, 1);
    assert.ok(!pinned.has(dead.name));
  });

  it('keeps the upstream’s own Set-Cookie headers next to the sticky cookie, and forwards the Cookie header', async () => {
    const received: Array<string | undefined> = [];
    const servers = await upstreams(1, {
      handler: (req, res) => {
        received.push(req.headers.cookie);
        res.setHeader('set-cookie', ['app_session=abc; Path=/; HttpOnly', 'theme=dark']);
        res.end('ok');
      },
    });
    const tollgate = await proxy(stickyConfig(servers));
    const res = await get(tollgate, 'theme=light');
    const cookies = setCookies(res);
    assert.equal(cookies.length, 3, JSON.stringify(cookies));
    assert.ok(cookies.includes('app_session=abc; Path=/; HttpOnly'));
    assert.ok(cookies.includes('theme=dark'));
    assert.ok(stickyOf(res));

    const again = await get(tollgate, `theme=light; ${cookiePair(stickyOf(res))}`);
    assert.deepEqual(setCookies(again), ['app_session=abc; Path=/; HttpOnly', 'theme=dark']);
    assert.equal(received[1], `theme=light; ${cookiePair(stickyOf(res))}`);
  });
});
