import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { forbiddenPage, signInPage, wantsPage } from '../../src/auth/oidc/pages.ts';
import { clearedSessionCookies, sessionCookieDomain, setCookie } from '../../src/auth/session-cookie.ts';

const req = (headers: Record<string, string>, method = 'GET') =>
  ({ headers, method }) as unknown as IncomingMessage;

describe('refusal pages for browsers (auth/oidc/pages)', () => {
  it('only a browser asking for a page gets one', () => {
    assert.equal(wantsPage(req({ accept: 'text/html,*/*' })), true);
    assert.equal(wantsPage(req({ accept: 'text/html', 'sec-fetch-mode': 'navigate' }, 'POST')), true);
    assert.equal(wantsPage(req({ accept: 'application/json' })), false);
    assert.equal(wantsPage(req({ accept: 'text/html', 'x-requested-with': 'XMLHttpRequest' })), false);
    assert.equal(wantsPage(req({ accept: 'text/html', 'sec-fetch-mode': 'cors' })), false);
  });

  it('escapes who it names and where it returns; no script; a CSP', () => {
    const page = forbiddenPage(
      { subject: '<img src=x onerror=alert(1)>', email: 'a"b@x.test', groups: [], claims: {} },
      '/a?b="c"&d=<e>',
    );
    const html = page.denial.body.toString();
    assert.equal(page.denial.status, 403);
    assert.equal(page.reason, 'forbidden');
    assert.ok(!html.includes('<img'));
    assert.match(html, /&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.match(html, /a&quot;b@x\.test/);
    assert.match(html, /rd=%2Fa%3Fb%3D%22c%22%26d%3D%3Ce%3E/);
    assert.doesNotMatch(html, /<script/i);
    assert.match(String(page.denial.headers['content-security-policy']), /default-src 'none'/);
    assert.equal(signInPage('/').denial.status, 401);
  });
});

describe('shared sessions (cookie_domain)', () => {
  it('the domain only for the host itself and hosts under it', () => {
    assert.equal(sessionCookieDomain('corp.test', 'corp.test'), 'corp.test');
    assert.equal(sessionCookieDomain('corp.test', 'app.corp.test'), 'corp.test');
    assert.equal(sessionCookieDomain('corp.test', 'a.b.corp.test'), 'corp.test');
    assert.equal(sessionCookieDomain('corp.test', 'evilcorp.test'), undefined);
    assert.equal(sessionCookieDomain('corp.test', 'corp.test.evil'), undefined);
    assert.equal(sessionCookieDomain(null, 'app.corp.test'), undefined);
  });

  it('Domain on the cookie line; a logout clears both the shared and the host-only cookie', () => {
    assert.match(
      setCookie('n', 'v', { secure: true, maxAge: 5, domain: 'corp.test' }),
      /; Domain=corp\.test;/,
    );
    const cleared = clearedSessionCookies(new Map(), false, 'corp.test');
    assert.equal(cleared.length, 2);
    assert.equal(cleared.filter((line) => line.includes('Domain=corp.test')).length, 1);
  });
});
