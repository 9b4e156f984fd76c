import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normaliseHost } from '../../src/routing/normalise.ts';

/** [Host header, routing host] */
const accepted: [string, string][] = [
  ['example.com', 'example.com'],
  ['api.example.com', 'api.example.com'],
  ['localhost', 'localhost'],
  ['my_service.internal', 'my_service.internal'],
  ['a-b.c-d', 'a-b.c-d'],
  // case
  ['Example.COM', 'example.com'],
  ['API.EXAMPLE.COM:8080', 'api.example.com'],
  // port
  ['example.com:8080', 'example.com'],
  ['example.com:80', 'example.com'],
  ['example.com:65535', 'example.com'],
  ['example.com:0', 'example.com'],
  ['example.com:', 'example.com'], // RFC 3986: port = *DIGIT
  ['example.com:00080', 'example.com'],
  // trailing dot
  ['example.com.', 'example.com'],
  ['example.com.:443', 'example.com'],
  ['Example.Com.:8443', 'example.com'],
  // IPv4
  ['127.0.0.1', '127.0.0.1'],
  ['127.0.0.1:8080', '127.0.0.1'],
  ['10.0.0.5.', '10.0.0.5'],
  // IPv6 literals
  ['[::1]', '::1'],
  ['[::1]:8080', '::1'],
  ['[::1]:', '::1'],
  ['[2001:DB8::1]:443', '2001:db8::1'],
  ['[fe80::a:B:c]', 'fe80::a:b:c'],
  // IPv6 in one canonical spelling; IPv4-mapped IPv6 is the IPv4 host it maps
  ['[0:0:0:0:0:0:0:1]', '::1'],
  ['[0::1]:8080', '::1'],
  ['[0000:0000::0001]', '::1'],
  ['[2001:DB8:0:0:1:0:0:1]', '2001:db8::1:0:0:1'],
  ['[::ffff:192.0.2.1]:80', '192.0.2.1'],
  ['[::ffff:127.0.0.1]', '127.0.0.1'],
  ['[::FFFF:7F00:1]', '127.0.0.1'],
  ['[0:0:0:0:0:ffff:7f00:1]', '127.0.0.1'],
  ['[::127.0.0.1]', '::7f00:1'], // IPv4-compatible (deprecated) is not mapped: stays IPv6
];

/** Host headers the proxy answers with 400. */
const refused: (string | undefined)[] = [
  undefined,
  '',
  ' ',
  '.',
  ':8080',
  '.:80',
  // empty labels: at most one trailing dot, no leading or doubled dot
  'localhost..',
  'localhost..:80',
  'example.com...',
  '.example.com',
  'a..b',
  // numeric names that are not a dotted-quad IPv4 address
  '127.1',
  '1.2.3',
  '1.2.3.4.5',
  '127.0.0.01',
  '256.0.0.1',
  '123',
  'exa mple.com',
  ' example.com',
  'example.com ',
  'example.com/path',
  '/',
  'user@example.com',
  'user:pass@example.com',
  'example.com:8080:9090',
  'example.com:80a',
  'example.com:-1',
  'example.com:65536',
  'example.com:123456',
  'example.com:+80',
  'example.com\\evil',
  'example.com?x',
  'example.com#x',
  'exa%6dple.com',
  'ex*ample.com',
  'exämple.com',
  'example.com\t',
  'example.com\r\nX-Evil: 1',
  // IPv6 without brackets, bad brackets, zone ids, non-IPv6 inside brackets
  '::1',
  '2001:db8::1',
  '[::1',
  '::1]',
  '[]',
  '[:]',
  '[::1]]',
  '[[::1]]',
  '[::1]x',
  '[::1]:x',
  '[::1]:99999',
  '[::1].',
  '[example.com]',
  '[127.0.0.1]',
  '[fe80::1%eth0]',
  '[fe80::1%25eth0]',
  '[v1.fe80::1]',
  '[::g]',
  '[1:2:3:4:5:6:7:8:9]',
  'a[::1]',
  // absurdly long
  `${'a'.repeat(300)}.com`,
];

describe('normaliseHost: accepted', () => {
  for (const [header, host] of accepted) {
    it(`${JSON.stringify(header)} → ${JSON.stringify(host)}`, () => {
      assert.equal(normaliseHost(header), host);
    });
  }
  it('accepts the longest DNS name with a trailing dot and a port', () => {
    const name = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    assert.equal(name.length, 253);
    assert.equal(normaliseHost(`${name.toUpperCase()}.:65535`), name);
  });
  it('never yields the upper-case DEFAULT key', () => {
    assert.equal(normaliseHost('DEFAULT'), 'default');
  });
});

describe('normaliseHost: refused', () => {
  for (const header of refused) {
    it(`${JSON.stringify(header)} → null`, () => {
      assert.equal(normaliseHost(header), null);
    });
  }
});
