import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBrowserLinks } from '../../src/auth/browser-links.ts';
import { takeQueryParam } from '../../src/auth/query.ts';
import { parseRevokedTokens } from '../../src/auth/revocation.ts';
import { refererWithoutToken, takeCookie } from '../../src/auth/token-carriers.ts';
import type { ProxyRequest } from '../../src/request/record.ts';

const NAME = 'tollgatetoken';

test('every spelling an upstream framework could read as the token parameter is removed', () => {
  for (const variant of [
    'TOLLGATETOKEN',
    'TollgateToken',
    'tollgatetoken[]',
    'tollgatetoken[0]',
    'TOLLGATETOKEN[]',
    'tollgate%54oken',
    'tollgatetoken%5B%5D',
  ]) {
    assert.deepEqual(
      takeQueryParam(`a=1&${variant}=secret&b=2`, NAME),
      { value: null, rest: 'a=1&b=2' },
      variant,
    );
  }
  // Only the exact name is accepted as the token; lookalikes stay.
  assert.deepEqual(takeQueryParam('TOLLGATETOKEN=x&tollgatetoken=y', NAME), { value: 'y', rest: '' });
  assert.deepEqual(takeQueryParam('tollgatetokens=1&xtollgatetoken=2', NAME), {
    value: null,
    rest: 'tollgatetokens=1&xtollgatetoken=2',
  });
});

test('Referer: the token parameter leaves the query, the rest stays', () => {
  assert.equal(refererWithoutToken('https://a.example/r/42?tollgatetoken=t', NAME), 'https://a.example/r/42');
  assert.equal(
    refererWithoutToken('https://a.example/r?x=1&TOLLGATETOKEN=t&y=2', NAME),
    'https://a.example/r?x=1&y=2',
  );
  assert.equal(refererWithoutToken('https://a.example/r?x=1', NAME), 'https://a.example/r?x=1');
  assert.equal(refererWithoutToken('https://a.example/r', NAME), 'https://a.example/r');
});

test('Cookie: the link cookie is taken, every other cookie kept', () => {
  assert.deepEqual(takeCookie('a=1; tollgatetoken=abc; b=2', NAME), { value: 'abc', rest: 'a=1; b=2' });
  assert.deepEqual(takeCookie('tollgatetoken=first; tollgatetoken=second', NAME), {
    value: 'first',
    rest: '',
  });
  assert.deepEqual(takeCookie('xtollgatetoken=1; a=2', NAME), { value: null, rest: 'xtollgatetoken=1; a=2' });
});

test('revoked_tokens_file: one id per line, comments and blanks ignored, junk lines reported', () => {
  const parsed = parseRevokedTokens('# revoked\n\n  id-1  \nid-2 # leaked in a ticket\r\nnot an id\n#id-3\n');
  assert.deepEqual([...parsed.revoked], ['id-1', 'id-2']);
  assert.deepEqual(parsed.badLines, [5]);
});

test('link cookie: Secure on TLS, Path cut before a ";" segment, expiring with the token', () => {
  const links = createBrowserLinks({ cookieName: NAME, now: () => 1_000 });
  const request = (secure: boolean, prefix: string) =>
    ({ path: '/r/1', forwardQuery: 'x=1', secure, route: { prefix } }) as unknown as ProxyRequest;
  const check = { ok: true, owner: 'o', expiresAt: 1_600, jti: 'j', scope: null } as const;
  const tls = links.exchange(request(true, '/r'), 'tok', check, null);
  assert.equal(tls.redirect, '/r/1?x=1');
  assert.equal(
    tls.setCookie,
    `${NAME}=tok; Path=/r; Max-Age=600; Expires=${new Date(1_600_000).toUTCString()}; HttpOnly; SameSite=Lax; Secure`,
  );
  const plain = links.exchange(request(false, '/'), 'tok', check, { host: null, prefix: '/a/b;v=1/c' });
  assert.match(plain.setCookie, /; Path=\/a; /);
  assert.doesNotMatch(plain.setCookie, /Secure/);
});
