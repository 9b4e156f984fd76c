import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimMatches, emailIsVerified, identityFromClaims } from '../../src/auth/allow-rules.ts';
import { idTokenRefusal } from '../../src/auth/issuers.ts';

describe('identity claims are read strictly (auth/allow-rules)', () => {
  it('email_verified: only true or "true" verify; a missing claim unless required', () => {
    assert.equal(emailIsVerified(true, false), true);
    assert.equal(emailIsVerified('true', true), true);
    for (const value of [false, 'false', 'True', 'TRUE', 1, 0, 'yes', null, {}, [true], ''])
      assert.equal(emailIsVerified(value, false), false, JSON.stringify(value));
    assert.equal(emailIsVerified(undefined, false), true);
    assert.equal(emailIsVerified(undefined, true), false);
  });

  it('an identity carries the email only when verified', () => {
    const claims = { email: 'a@example.com', groups: ['x'] };
    assert.equal(identityFromClaims('a', claims, 'groups').email, 'a@example.com');
    assert.equal(identityFromClaims('a', claims, 'groups', true).email, null);
    assert.equal(identityFromClaims('a', { ...claims, email_verified: 'false' }, 'groups').email, null);
    assert.equal(
      identityFromClaims('a', { ...claims, email_verified: 'true' }, 'groups', true).email,
      'a@example.com',
    );
  });
});

describe('a Bearer token on an OpenID route must be an ID token for the client (auth/issuers)', () => {
  it('typ absent or JWT (any case, application/ optional); any other type refused', () => {
    for (const typ of [undefined, 'JWT', 'jwt', 'application/jwt'])
      assert.equal(idTokenRefusal(typ, 'app', undefined, 'app'), null, String(typ));
    for (const typ of ['at+jwt', 'logout+jwt', 'application/at+jwt', 'JWS', '', 1])
      assert.equal(idTokenRefusal(typ, 'app', undefined, 'app'), 'wrong_type', String(typ));
  });

  it('azp: when present it is the client_id; several audiences need it', () => {
    assert.equal(idTokenRefusal(undefined, ['app', 'x'], 'app', 'app'), null);
    assert.equal(idTokenRefusal(undefined, ['app'], undefined, 'app'), null);
    assert.equal(idTokenRefusal(undefined, ['app', 'x'], 'x', 'app'), 'wrong_authorized_party');
    assert.equal(idTokenRefusal(undefined, ['app', 'x'], undefined, 'app'), 'wrong_authorized_party');
    assert.equal(idTokenRefusal(undefined, 'app', 'x', 'app'), 'wrong_authorized_party');
  });
});

describe('allow.claims matches top-level values only (auth/allow-rules)', () => {
  const allowed = new Set(['blue', '7', 'true']);
  it('a string, a number or boolean as text, or a list holding one', () => {
    for (const value of ['blue', 7, true, ['red', 'blue'], [7]])
      assert.equal(claimMatches(value, allowed), true, JSON.stringify(value));
  });
  it('nothing nested, nothing else', () => {
    for (const value of [
      [['blue']],
      ['red', ['blue']],
      { v: 'blue' },
      [{ v: 'blue' }],
      'red',
      null,
      undefined,
    ])
      assert.equal(claimMatches(value, allowed), false, JSON.stringify(value));
  });
});
