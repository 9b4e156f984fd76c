import assert from 'node:assert/strict';
import type http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { request, type SimpleResponse, startTollgate, type Tollgate, waitFor } from '../helpers/tollgate.ts';
import { startUpstream, type Upstream } from '../helpers/upstream.ts';
import { sumOf } from '../helpers/workers.ts';

/**
 * The response cache (docs/traffic.md#response-cache) through the built process.
 *
 * The upstream answers what the query asks of it: `cc` its Cache-Control, `vary`, `etag`, `lm`
 * (Last-Modified), `age`, `cookie` (a Set-Cookie), `status`, `size` (body bytes), `cut` (a body cut
 * half-way). Its body names the URL, how many times that URL was answered with a body, and the subject
 * Tollgate sent: what a user sees tells whose response it was.
 */

const HOST = 'cache.test';
const MASTERKEY = 'cache-test-masterkey-0123456789abcdef';
const basic = (user: string) => `Basic ${Buffer.from(`${user}:${user}-pw`).toString('base64')}`;

interface Body {
  url: string;
  n: number;
  subject: string | null;
}

/** Bodies answered per URL, and what each revalidation carried. */
class Origin {
  readonly answered = new Map<string, number>();
  readonly conditionals: Array<{
    url: string;
    ifNoneMatch?: string | undefined;
    ifModifiedSince?: string | undefined;
  }> = [];
  /** URLs whose answer waits until released (request coalescing). */
  readonly held = new Map<string, Array<() => void>>();
  heldUrls = new Set<string>();
  /** Paths answered 503 from now on. */
  readonly failing = new Set<string>();

  count(url: string): number {
    return this.answered.get(url) ?? 0;
  }

  handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = req.url ?? '/';
    const query = new URL(url, 'http://x').searchParams;
    const path = url.split('?')[0] as string;
    if (this.heldUrls.has(path))
      await new Promise<void>((resolve) => {
        const list = this.held.get(path) ?? [];
        list.push(resolve);
        this.held.set(path, list);
      });
    if (this.failing.has(path)) {
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('down');
      return;
    }
    const etag = query.get('etag');
    const ifNoneMatch = req.headers['if-none-match'];
    const ifModifiedSince = req.headers['if-modified-since'];
    if (ifNoneMatch !== undefined || ifModifiedSince !== undefined)
      this.conditionals.push({ url, ifNoneMatch, ifModifiedSince });
    const headers: Record<string, string | string[]> = { 'content-type': 'application/json' };
    for (const [param, header] of [
      ['cc', 'cache-control'],
      ['vary', 'vary'],
      ['etag', 'etag'],
      ['lm', 'last-modified'],
      ['age', 'age'],
      ['cookie', 'set-cookie'],
    ] as const) {
      const value = query.get(param);
      if (value !== null) headers[header] = value;
    }
    if (etag !== null && ifNoneMatch === etag) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    if (req.method === 'HEAD' || req.method === 'GET') this.answered.set(url, this.count(url) + 1);
    const subject = req.headers['x-tollgate-subject'];
    let body = JSON.stringify({
      url,
      n: this.count(url),
      subject: typeof subject === 'string' ? subject : null,
      method: req.method,
    });
    const size = Number(query.get('size') ?? 0);
    if (size > body.length) body += ' '.repeat(size - body.length);
    headers['content-length'] = String(Buffer.byteLength(body));
    res.writeHead(Number(query.get('status') ?? 200), headers);
    if (query.get('cut') !== null) {
      // Half the announced body, then the connection goes: a response cut by the upstream.
      res.write(body.slice(0, body.length / 2));
      setImmediate(() => res.socket?.destroy());
      return;
    }
    res.end(req.method === 'HEAD' ? undefined : body);
  };

  release(path: string): void {
    this.heldUrls.delete(path);
    for (const resolve of this.held.get(path) ?? []) resolve();
    this.held.delete(path);
  }
}

describe('response cache', () => {
  const origin = new Origin();
  let upstream: Upstream;
  /** The upstream of /sie, closed to show stale-if-error when no server answers. */
  let fragile: Upstream;
  let tollgate: Tollgate;

  const get = (path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<SimpleResponse> =>
    request(`${tollgate.proxyUrl}${path}`, { method, headers: { host: HOST, ...headers } });
  const body = (res: SimpleResponse): Body => {
    assert.equal(res.status, 200, res.body);
    return res.json<Body>();
  };
  const metric = async (family: string, ...labels: string[]) =>
    sumOf(await tollgate.metrics(), family, ...labels);

  before(async () => {
    upstream = await startUpstream({ name: 'origin', handler: origin.handle });
    fragile = await startUpstream({ name: 'fragile', handler: origin.handle });
    const servers = [upstream.address];
    const cache = { max_bytes: '1m', max_object_bytes: '16k' };
    tollgate = await startTollgate({
      main: { access_log: false, masterkey: MASTERKEY, cache: { max_bytes: '4m' } },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/pub': { servers, cache },
              '/ttl': { servers, cache: { ...cache, default_ttl_seconds: 60 } },
              '/plain': { servers },
              '/sie': {
                servers: [fragile.address],
                cache,
                health_check: { path: '/sie/health', interval_seconds: 0.2 },
              },
              '/auth': {
                servers,
                cache,
                authorization: {
                  type: 'basic',
                  users: ['alice', 'bob', 'carol'].map((name) => ({
                    username: name,
                    password: `${name}-pw`,
                  })),
                  allow: { subjects: ['alice', 'bob'] },
                },
              },
              '/jwt': { servers, cache, authorization: { type: 'jwt' } },
            },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
    await fragile?.close();
  });

  it('stores a response with explicit freshness: MISS, then HIT without asking the upstream', async () => {
    const path = '/pub/fresh?cc=max-age%3D60';
    const hitsBefore = await metric('tollgate_cache_hits_total', 'result="hit"');
    const first = await get(path);
    assert.equal(first.headers['x-cache'], 'MISS');
    const second = await get(path);
    assert.equal(second.headers['x-cache'], 'HIT');
    assert.deepEqual(body(second), body(first));
    assert.equal(second.headers['cache-control'], 'max-age=60');
    assert.ok(second.headers.age !== undefined, 'a stored answer says its Age');
    assert.equal(origin.count(path), 1);
    assert.equal((await metric('tollgate_cache_hits_total', 'result="hit"')) - hitsBefore, 1);
    assert.ok((await metric('tollgate_cache_misses_total')) >= 1);
    assert.ok((await metric('tollgate_cache_bytes')) > 0);
    // A route without `cache` has no X-Cache and never stores.
    const plain = await get('/plain/x?cc=max-age%3D60');
    assert.equal(plain.headers['x-cache'], undefined);
  });

  it('no heuristic freshness: without max-age, s-maxage or Expires only default_ttl_seconds stores', async () => {
    const lastModified = 'Sat, 01 Jan 2000 00:00:00 GMT';
    const path = `/pub/heuristic?lm=${encodeURIComponent(lastModified)}`;
    await get(path);
    assert.equal((await get(path)).headers['x-cache'], 'MISS');
    assert.equal(origin.count(path), 2);
    const ttl = '/ttl/default';
    await get(ttl);
    const again = await get(ttl);
    assert.equal(again.headers['x-cache'], 'HIT');
    assert.equal(origin.count(ttl), 1);
    // The client sees the upstream's own Cache-Control (none), not the TTL Tollgate gave the copy.
    assert.equal(again.headers['cache-control'], undefined);
  });

  it('keys by the Vary headers: each variant stored and served to its own kind of request', async () => {
    const path = '/pub/variants?cc=max-age%3D60&vary=Accept-Language';
    const english = body(await get(path, { 'accept-language': 'en' }));
    const french = body(await get(path, { 'accept-language': 'fr' }));
    assert.notDeepEqual(english, french);
    const again = await get(path, { 'accept-language': 'fr' });
    assert.equal(again.headers['x-cache'], 'HIT');
    assert.deepEqual(body(again), french);
    assert.deepEqual(body(await get(path, { 'accept-language': 'en' })), english);
    assert.equal(origin.count(path), 2);
    // The token parameter is not part of the key: the query without it names the same copy.
    assert.equal(
      (await get(`${path}&tollgatetoken=x`, { 'accept-language': 'en' })).headers['x-cache'],
      'HIT',
    );
  });

  it('HEAD is answered from the GET copy; a HEAD alone stores nothing', async () => {
    const path = '/pub/head?cc=max-age%3D60';
    const full = await get(path);
    const head = await get(path, {}, 'HEAD');
    assert.equal(head.headers['x-cache'], 'HIT');
    assert.equal(head.body, '');
    assert.equal(head.headers['content-length'], String(Buffer.byteLength(full.body)));
    const onlyHead = '/pub/head-only?cc=max-age%3D60';
    await get(onlyHead, {}, 'HEAD');
    assert.equal((await get(onlyHead)).headers['x-cache'], 'MISS');
  });

  it('two users of an authenticated route never see each other’s body, whatever the headers short of public', async () => {
    const variants = [
      '',
      'cc=max-age%3D60',
      'cc=max-age%3D60%2C%20private',
      'cc=no-store',
      'cc=max-age%3D60&vary=Authorization',
      'cc=max-age%3D60&cookie=s%3D1',
      'cc=max-age%3D60&vary=Accept',
      'cc=no-cache%2C%20max-age%3D60&etag=%22v1%22',
    ];
    for (const [index, variant] of variants.entries()) {
      const path = `/auth/mine/${index}?${variant}`;
      for (let round = 0; round < 2; round++) {
        for (const user of ['alice', 'bob']) {
          const res = await get(path, { authorization: basic(user), accept: 'application/json' });
          assert.equal(body(res).subject, user, `${variant}: ${user} got someone else's answer`);
        }
      }
    }
    // A per-user copy serves its own user: the second round of max-age=60 was a HIT for each.
    const own = '/auth/mine/1?cc=max-age%3D60';
    assert.equal(origin.count(own), 2);
    assert.equal((await get(own, { authorization: basic('alice') })).headers['x-cache'], 'HIT');
  });

  it('public or s-maxage on an authenticated route: one copy keyed without identity, still behind auth', async () => {
    for (const cc of ['public%2C%20max-age%3D60', 's-maxage%3D60']) {
      const path = `/auth/shared?cc=${cc}`;
      const first = body(await get(path, { authorization: basic('alice') }));
      const bobs = await get(path, { authorization: basic('bob') });
      assert.equal(bobs.headers['x-cache'], 'HIT');
      assert.deepEqual(body(bobs), first);
      assert.equal(origin.count(path), 1);
      // Auth runs first: no credential, a wrong one, or a user the allow rules refuse get no copy.
      assert.equal((await get(path)).status, 401);
      assert.equal((await get(path, { authorization: `Basic ${btoa('alice:wrong')}` })).status, 401);
      assert.equal((await get(path, { authorization: basic('carol') })).status, 403);
    }
  });

  it('answers If-None-Match and If-Modified-Since with 304 from the store', async () => {
    const lastModified = 'Sat, 01 Jan 2000 00:00:00 GMT';
    const path = `/pub/validators?cc=max-age%3D60&etag=%22abc%22&lm=${encodeURIComponent(lastModified)}`;
    await get(path);
    const byTag = await get(path, { 'if-none-match': 'W/"abc"' });
    assert.equal(byTag.status, 304);
    assert.equal(byTag.headers['x-cache'], 'HIT');
    assert.equal(byTag.headers.etag, '"abc"');
    assert.equal(byTag.body, '');
    assert.equal((await get(path, { 'if-modified-since': lastModified })).status, 304);
    assert.equal((await get(path, { 'if-none-match': '"other"' })).status, 200);
    assert.equal(origin.count(path), 1);
  });

  it('revalidates a stale copy with its own validators; a 304 serves the stored body', async () => {
    const path = '/pub/revalidate?cc=max-age%3D0&etag=%22r1%22';
    const first = body(await get(path));
    // The client's own validator never reaches the upstream on a miss: the copy must be whole.
    const second = await get(path, { 'if-none-match': '"client"' });
    assert.equal(second.status, 200);
    assert.deepEqual(body(second), first);
    assert.equal(second.headers['x-cache'], 'MISS');
    assert.equal(origin.count(path), 1, 'the upstream answered 304, not a body');
    const asked = origin.conditionals.filter((entry) => entry.url === path);
    assert.deepEqual(
      asked.map((entry) => entry.ifNoneMatch),
      ['"r1"'],
    );
  });

  it('coalesces concurrent misses into one upstream fetch', async () => {
    const path = '/pub/coalesce';
    const url = `${path}?cc=max-age%3D60`;
    origin.heldUrls.add(path);
    const before = await metric('tollgate_cache_coalesced_total');
    const answers = Array.from({ length: 5 }, () => get(url));
    await waitFor(async () => (await metric('tollgate_cache_coalesced_total')) - before === 4, 20_000);
    origin.release(path);
    const bodies = (await Promise.all(answers)).map(body);
    assert.equal(origin.count(url), 1);
    for (const each of bodies) assert.deepEqual(each, bodies[0]);
  });

  it('stale-while-revalidate: serves the stale copy at once and refreshes it in the background', async () => {
    const path = '/pub/swr?cc=max-age%3D10%2C%20stale-while-revalidate%3D600&age=60';
    assert.equal(body(await get(path)).n, 1);
    const stale = await get(path);
    assert.equal(stale.headers['x-cache'], 'STALE');
    assert.equal(body(stale).n, 1);
    await waitFor(() => origin.count(path) === 2, 10_000);
    // The refreshed copy is served (stale again at once: Age 60 > max-age 10, so refreshed again).
    await waitFor(async () => body(await get(path)).n >= 2, 10_000);
  });

  it('stale-if-error: a 5xx or an unreachable upstream gets the stale copy', async () => {
    const url = '/sie/x?cc=max-age%3D10%2C%20stale-if-error%3D600&age=60';
    assert.equal(body(await get(url)).n, 1);
    const plain = '/sie/y?cc=max-age%3D0&etag=%22y%22';
    await get(plain);
    origin.failing.add('/sie/x').add('/sie/y');
    const on5xx = await get(url);
    assert.equal(on5xx.headers['x-cache'], 'STALE');
    assert.equal(body(on5xx).n, 1);
    // Without stale-if-error the client gets the upstream's error.
    assert.equal((await get(plain)).status, 503);
    await fragile.close();
    const unreachable = await get(url);
    assert.equal(unreachable.headers['x-cache'], 'STALE');
    assert.equal(body(unreachable).n, 1);
    // Once the health checks eject the server, the server choice refuses before any attempt: the
    // stale copy answers that refusal too.
    await waitFor(
      async () => (await metric('tollgate_upstream_up', `server="${fragile.address}"`)) === 0,
      20_000,
    );
    assert.equal((await get(plain)).status, 503);
    const ejected = await get(url);
    assert.equal(ejected.headers['x-cache'], 'STALE');
    assert.equal(body(ejected).n, 1);
  });

  it('a successful unsafe method invalidates the stored GET of its URL', async () => {
    const path = '/pub/item?cc=max-age%3D60';
    await get(path);
    assert.equal((await get(path)).headers['x-cache'], 'HIT');
    const posted = await get(path, { 'content-type': 'text/plain' }, 'DELETE');
    assert.equal(posted.status, 200);
    assert.equal((await get(path)).headers['x-cache'], 'MISS');
    assert.equal(origin.count(path), 2);
  });

  it('never stores the answer to a request that carried the token in its URL', async () => {
    const issued = await request(`${tollgate.apiUrl}/jwt`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ master_key: MASTERKEY, owner: 'dora', valid: 5 }),
    });
    const token = issued.json<{ token: string }>().token;
    const path = '/jwt/page?cc=public%2C%20max-age%3D60';
    const viaUrl = await get(`${path}&tollgatetoken=${token}`);
    assert.equal(viaUrl.status, 200, viaUrl.body);
    assert.equal(viaUrl.headers['cache-control'], 'private, no-store');
    const viaHeader = await get(path, { authorization: `Bearer ${token}` });
    assert.equal(viaHeader.headers['x-cache'], 'MISS');
    assert.equal(origin.count(path), 2);
    // A copy stored for a header request is served to a URL-token request marked private, no-store.
    const hit = await get(`${path}&tollgatetoken=${token}`);
    assert.equal(hit.headers['x-cache'], 'HIT');
    assert.equal(hit.headers['cache-control'], 'private, no-store');
  });

  it('served, not stored: Vary *, a body over max_object_bytes, a body the upstream cut', async () => {
    for (const path of ['/pub/star?cc=max-age%3D60&vary=*', '/pub/large?cc=max-age%3D60&size=20000']) {
      assert.equal((await get(path)).status, 200);
      assert.equal((await get(path)).headers['x-cache'], 'MISS', path);
      assert.equal(origin.count(path), 2, path);
    }
    const cut = '/pub/cut?cc=max-age%3D60&size=4000&cut=1';
    await assert.rejects(get(cut));
    await assert.rejects(get(cut));
    assert.equal(origin.count(cut), 2);
  });

  it('DELETE /cache on the admin port purges a host key under a path prefix, segment-wise', async () => {
    const paths = [
      '/pub/tree/a?cc=max-age%3D60',
      '/pub/tree/b/c?cc=max-age%3D60',
      '/pub/treetop?cc=max-age%3D60',
    ];
    for (const path of paths) await get(path);
    const purge = (query: string, method = 'DELETE') =>
      request(`${tollgate.adminUrl}/cache?${query}`, { method });
    const purged = await purge(`host=${HOST}&prefix=/pub/tree`);
    assert.equal(purged.status, 200, purged.body);
    assert.deepEqual(purged.json(), { purged: 2 });
    assert.equal((await get(paths[0] as string)).headers['x-cache'], 'MISS');
    assert.equal((await get(paths[2] as string)).headers['x-cache'], 'HIT');
    assert.deepEqual((await purge(`host=${HOST}&prefix=/nothing/here`)).json(), { purged: 0 });
    assert.deepEqual((await purge('host=other.test&prefix=/')).json(), { purged: 0 });
    assert.equal((await purge('prefix=/pub')).status, 400);
    assert.equal((await purge(`host=${HOST}&prefix=pub`)).status, 400);
    assert.equal((await purge(`host=${HOST}`, 'GET')).status, 405);
  });
});

describe('response cache: memory stays within the budget under a flood of distinct URLs', () => {
  let upstream: Upstream;
  let tollgate: Tollgate;

  before(async () => {
    const origin = new Origin();
    upstream = await startUpstream({ name: 'flood', handler: origin.handle });
    const servers = [upstream.address];
    tollgate = await startTollgate({
      main: { access_log: false, cache: { max_bytes: '96k' } },
      upstreams: {
        upstreams: {
          [HOST]: {
            paths: {
              '/a': { servers, cache: { max_bytes: '64k', max_object_bytes: '4k' } },
              '/b': { servers, cache: { max_bytes: '64k', max_object_bytes: '4k' } },
            },
          },
        },
      },
    });
  });

  after(async () => {
    await tollgate?.stop();
    await upstream?.close();
  });

  it('each path stays within its max_bytes and all together within main.yaml’s', async () => {
    const bytes = async () => sumOf(await tollgate.metrics(), 'tollgate_cache_bytes');
    let peak = 0;
    for (let i = 0; i < 200; i++) {
      for (const prefix of ['/a', '/b']) {
        const res = await request(`${tollgate.proxyUrl}${prefix}/${i}?cc=max-age%3D600&size=2000`, {
          headers: { host: HOST },
        });
        assert.equal(res.status, 200);
      }
      if (i % 20 === 19) peak = Math.max(peak, await bytes());
    }
    assert.ok(peak > 64 * 1024, `the store filled up (${peak} bytes)`);
    assert.ok(peak <= 96 * 1024, `${peak} bytes is over the global budget`);
    // The oldest URLs were evicted to make room; the newest are served from the store.
    const oldest = await request(`${tollgate.proxyUrl}/a/0?cc=max-age%3D600&size=2000`, {
      headers: { host: HOST },
    });
    assert.equal(oldest.headers['x-cache'], 'MISS');
    const newest = await request(`${tollgate.proxyUrl}/b/199?cc=max-age%3D600&size=2000`, {
      headers: { host: HOST },
    });
    assert.equal(newest.headers['x-cache'], 'HIT');
  });
});
