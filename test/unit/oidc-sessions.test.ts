import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createAllowCheck } from '../../src/auth/allow-rules.ts';
import type { OidcProvider } from '../../src/auth/oidc/provider.ts';
import { createSessionStore, type Session } from '../../src/auth/oidc/session.ts';
import { sameHostTarget } from '../../src/auth/redirect.ts';
import {
  clearedSessionCookies,
  cookiesStartingWith,
  createSealer,
  readSessionValue,
  removeLoginCookies,
  sessionCookies,
} from '../../src/auth/session-cookie.ts';
import { createLogger } from '../../src/log.ts';
import type { ProxyRequest } from '../../src/request/record.ts';

const SECRET_OLD = Buffer.from('the-old-session-secret-0123456789-abcdef');
const SECRET_NEW = Buffer.from('the-new-session-secret-0123456789-abcdef');
const logger = createLogger('silent');

/** A provider nothing may call: these sessions never need one (no refresh token). */
const provider = (name: string) =>
  ({
    settings: { name },
    configuration: () => {
      throw new Error('the provider was asked');
    },
  }) as unknown as OidcProvider;

const session = (overrides: Partial<Session> = {}): Session => ({
  v: 1,
  p: 'corp',
  sub: 'alice',
  em: 'alice@example.com',
  gr: ['staff'],
  cl: {},
  exp: 1_000,
  max: 2_000,
  ...overrides,
});

describe('sealed sessions (auth/session-cookie, auth/oidc/session)', () => {
  it('lives until its tokens expire and never past session_max_age_seconds (clock-driven)', async () => {
    let now = 500;
    const sealer = createSealer([SECRET_OLD]);
    const store = createSessionStore({ sealer, now: () => now, maxAgeSeconds: 3600, logger });
    const sealed = await sealer.seal(session());
    assert.equal((await store.use(sealed, provider('corp')))?.session.sub, 'alice');
    now = 1_000;
    assert.equal(await store.use(sealed, provider('corp')), null, 'tokens expired, no refresh token');
    // A refresh token does not carry a session past its max: expiry at max means no refresh.
    const capped = await sealer.seal(session({ rt: 'refresh', exp: 2_000, max: 2_000 }));
    now = 1_999;
    assert.equal((await store.use(capped, provider('corp')))?.session.sub, 'alice');
    now = 2_000;
    assert.equal(await store.use(capped, provider('corp')), null);
  });

  it("is no session for another provider's routes, tampered, foreign or garbage", async () => {
    const sealer = createSealer([SECRET_OLD]);
    const store = createSessionStore({ sealer, now: () => 0, maxAgeSeconds: 3600, logger });
    const sealed = await sealer.seal(session());
    assert.equal(await store.use(sealed, provider('other')), null);
    const foreign = await createSealer([Buffer.from('somebody-elses-secret-0123456789-abcdefgh')]).seal(
      session(),
    );
    assert.equal(await store.use(foreign, provider('corp')), null);
    const parts = sealed.split('.');
    parts[3] = `${parts[3]?.slice(0, -2)}AA`;
    assert.equal(await store.use(parts.join('.'), provider('corp')), null);
    assert.equal(await store.use('not.a.jwe', provider('corp')), null);
    // A sealed state cookie is not a session either.
    assert.equal(await store.use(await sealer.seal({ k: 'state', s: 'x' }), provider('corp')), null);
  });

  it('rotates: the first secret seals, every secret opens', async () => {
    const before = await createSealer([SECRET_OLD]).seal({ hello: 'old' });
    const rotated = createSealer([SECRET_NEW, SECRET_OLD]);
    assert.deepEqual(await rotated.open(before), { hello: 'old' });
    const after = await rotated.seal({ hello: 'new' });
    assert.equal(await createSealer([SECRET_OLD]).open(after), null);
    assert.deepEqual(await createSealer([SECRET_NEW]).open(after), { hello: 'new' });
  });

  it('splits above 3800 bytes, joins the chunks back, expires stale ones', () => {
    const big = 'x'.repeat(9_000);
    const sent = new Map([
      ['tollgate_session', 'old'],
      ['tollgate_session_4', 'stale'],
    ]);
    const lines = sessionCookies(big, sent, { secure: true, maxAge: 100 });
    const set = lines.filter((line) => !line.includes('Max-Age=0'));
    assert.deepEqual(
      set.map((line) => line.slice(0, line.indexOf('='))),
      ['tollgate_session_1', 'tollgate_session_2', 'tollgate_session_3'],
    );
    for (const line of set) {
      assert.ok(Buffer.byteLength(line) < 4096);
      assert.match(line, /; Path=\/; Max-Age=100; HttpOnly; SameSite=Lax; Secure$/);
    }
    assert.deepEqual(
      lines.filter((line) => line.includes('Max-Age=0')).map((line) => line.slice(0, line.indexOf('='))),
      ['tollgate_session', 'tollgate_session_4'],
    );
    const header = set.map((line) => line.slice(0, line.indexOf(';'))).join('; ');
    assert.equal(readSessionValue(cookiesStartingWith(`a=1; ${header}`, 'tollgate_')), big);
    assert.deepEqual(
      clearedSessionCookies(new Map([['tollgate_session_1', 'x']]), false).map((line) => line.split('=')[0]),
      ['tollgate_session', 'tollgate_session_1'],
    );
  });

  it('takes only the login cookies out of what is forwarded (the sticky cookie stays)', () => {
    const req = {
      headers: {
        cookie: 'a=1; tollgate_session_1=x; tollgate_sticky=s; tollgate_oidc_abc=y; tollgate_session=z',
      },
      rawHeaders: [
        'Cookie',
        'a=1; tollgate_session_1=x; tollgate_sticky=s; tollgate_oidc_abc=y; tollgate_session=z',
      ],
    };
    removeLoginCookies(req as never);
    assert.equal(req.headers.cookie, 'a=1; tollgate_sticky=s');
    assert.deepEqual(req.rawHeaders, ['Cookie', 'a=1; tollgate_sticky=s']);
  });

  it('sends a login back to a same-host path only', () => {
    for (const target of ['/app?x=1', '/a/b#c', '/']) assert.equal(sameHostTarget(target), target);
    for (const target of [
      '//evil.com',
      '/\\evil.com',
      'https://evil.com/',
      '/\t/evil.com',
      '/ /evil.com',
      'evil.com',
      '',
      '/a\\b',
      '/\u0000x',
    ]) {
      assert.equal(sameHostTarget(target), '/', JSON.stringify(target));
    }
  });

  it('allow rules: keys AND, values OR; multi-@ emails match nothing', () => {
    const request = (
      identity: ProxyRequest['identity'],
      subject: string | null = identity?.subject ?? null,
    ) => ({ identity, subject }) as unknown as ProxyRequest;
    const who = (email: string | null, groups: string[] = [], claims: Record<string, unknown> = {}) =>
      request({ subject: 'u', email, groups, claims });
    const check = createAllowCheck({
      subjects: null,
      emails: null,
      emailDomains: ['example.com'],
      groups: ['a', 'b'],
      claims: { tier: ['gold'] },
    });
    assert.equal(check(who('u@EXAMPLE.com', ['b'], { tier: 'gold' })), true);
    assert.equal(check(who('u@example.com@evil.com', ['b'], { tier: 'gold' })), false);
    assert.equal(check(who('u@evil.com', ['b'], { tier: 'gold' })), false);
    assert.equal(check(who('u@example.com', ['c'], { tier: 'gold' })), false);
    assert.equal(check(who('u@example.com', ['a'], { tier: ['x', 'gold'] })), true);
    assert.equal(check(who(null, ['a'], { tier: 'gold' })), false);
    // basic/apikey/forward: the subject as the header carries it, decoded.
    const subjects = createAllowCheck({
      subjects: ['zoë'],
      emails: null,
      emailDomains: null,
      groups: null,
      claims: null,
    });
    assert.equal(subjects(request(null, 'zo%C3%AB')), true);
    assert.equal(subjects(request(null, 'zoe')), false);
  });
});
