import assert from 'node:assert/strict';
import { test } from 'node:test';
import { recordableQuery, takeQueryParam } from '../../src/auth/query.ts';

const NAME = 'tollgatetoken';

test('absent parameter: query returned untouched', () => {
  assert.deepEqual(takeQueryParam('', NAME), { value: null, rest: '' });
  assert.deepEqual(takeQueryParam('a=1&b=%2F', NAME), { value: null, rest: 'a=1&b=%2F' });
  assert.deepEqual(takeQueryParam('xtollgatetoken=1&tollgatetokenx=2', NAME), {
    value: null,
    rest: 'xtollgatetoken=1&tollgatetokenx=2',
  });
});

test('the parameter is removed and the rest kept byte for byte', () => {
  assert.deepEqual(takeQueryParam('tollgatetoken=abc', NAME), { value: 'abc', rest: '' });
  assert.deepEqual(takeQueryParam('a=1&tollgatetoken=abc&b=x%20y+z&&c', NAME), {
    value: 'abc',
    rest: 'a=1&b=x%20y+z&&c',
  });
  assert.deepEqual(takeQueryParam('a=%zz&tollgatetoken=abc', NAME), { value: 'abc', rest: 'a=%zz' });
});

test('every occurrence is removed; the first value is used', () => {
  assert.deepEqual(takeQueryParam('tollgatetoken=one&a=1&tollgatetoken=two', NAME), {
    value: 'one',
    rest: 'a=1',
  });
});

test('a percent-encoded name or value is recognised', () => {
  assert.deepEqual(takeQueryParam('tollgate%74oken=a%2Eb&z=1', NAME), { value: 'a.b', rest: 'z=1' });
});

test('present without a usable value: empty string, still removed', () => {
  assert.deepEqual(takeQueryParam('tollgatetoken&a=1', NAME), { value: '', rest: 'a=1' });
  assert.deepEqual(takeQueryParam('tollgatetoken=&a=1', NAME), { value: '', rest: 'a=1' });
  assert.deepEqual(takeQueryParam('tollgatetoken=%E0%A4%A&a=1', NAME), { value: '', rest: 'a=1' });
});

test('a custom parameter name', () => {
  assert.deepEqual(takeQueryParam('proxytoken=t&tollgatetoken=u', 'proxytoken'), {
    value: 't',
    rest: 'tollgatetoken=u',
  });
});

test('spaces around the name (plain, + or encoded) are the parameter itself, token included', () => {
  for (const spelled of [
    '%20tollgatetoken',
    'tollgatetoken%20',
    '+tollgatetoken',
    ' tollgatetoken',
    '%09tollgatetoken+',
  ])
    assert.deepEqual(
      takeQueryParam(`a=1&${spelled}=abc&b=2`, NAME),
      { value: 'abc', rest: 'a=1&b=2' },
      spelled,
    );
  // Variants with spaces are removed (never accepted), in matrix form too.
  assert.deepEqual(takeQueryParam('%20TOLLGATETOKEN[]=x&a=1;+tollgatetoken=y', NAME), {
    value: null,
    rest: 'a=1',
  });
  // A space inside the name is another name.
  assert.deepEqual(takeQueryParam('tollgate%20token=x', NAME), { value: null, rest: 'tollgate%20token=x' });
});

test("recordableQuery: the token parameter everywhere, a login callback's code and state on login paths", () => {
  const query = 'code=c&state=s&iss=i&%20tollgatetoken=t';
  assert.equal(recordableQuery(query, '/.tollgate/oidc/callback', NAME), 'iss=i');
  assert.equal(recordableQuery('CODE=c&state[]=s', '/.tollgate/oidc/other', NAME), '');
  assert.equal(recordableQuery(query, '/app/callback', NAME), 'code=c&state=s&iss=i');
});
