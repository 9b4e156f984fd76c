import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCidr, parseListenAddress, parseServerAddress } from '../../src/config/addresses.ts';
import { ConfigError, formatIssue } from '../../src/config/issues.ts';
import { closestKey } from '../../src/config/suggest.ts';

describe('formatIssue', () => {
  it('file:line:column: path: message', () => {
    const issue = {
      file: 'upstreams.yaml',
      line: 12,
      column: 5,
      path: 'upstreams.a.paths./v1.servers[2]',
      message: 'bad',
    };
    assert.equal(formatIssue(issue), 'upstreams.yaml:12:5: upstreams.a.paths./v1.servers[2]: bad');
  });

  it('a document-level issue has no path part', () => {
    assert.equal(
      formatIssue({ file: 'u.yaml', line: 1, column: 1, path: '', message: 'empty' }),
      'u.yaml:1:1: empty',
    );
  });

  it('an issue without a position names the file once', () => {
    assert.equal(
      formatIssue({
        file: '/x/main.yaml',
        line: 0,
        column: 0,
        path: '',
        message: 'cannot read /x/main.yaml: no such file',
      }),
      'cannot read /x/main.yaml: no such file',
    );
    assert.equal(
      formatIssue({ file: '/x/u.yaml', line: 0, column: 0, path: '', message: 'gone' }),
      '/x/u.yaml: gone',
    );
  });
});

describe('ConfigError', () => {
  it('carries every issue and prints them one per line', () => {
    const issues = [
      { file: 'a.yaml', line: 1, column: 1, path: 'x', message: 'one' },
      { file: 'a.yaml', line: 2, column: 3, path: 'y', message: 'two' },
    ];
    const error = new ConfigError(issues);
    assert.ok(error instanceof Error);
    assert.equal(error.issues, issues);
    assert.equal(error.message, 'a.yaml:1:1: x: one\na.yaml:2:3: y: two');
  });
});

describe('closestKey', () => {
  const known = ['authorization', 'to_https', 'rate_limit', 'tls_certificate', 'servers'];
  it('finds near misses, abbreviations and case slips', () => {
    assert.equal(closestKey('authorisation', known), 'authorization');
    assert.equal(closestKey('Authorization', known), 'authorization');
    assert.equal(closestKey('ratelimit', known), 'rate_limit');
    assert.equal(closestKey('tls_cert', known), 'tls_certificate');
    assert.equal(closestKey('server', known), 'servers');
  });
  it('suggests nothing for unrelated words', () => {
    assert.equal(closestKey('timeout', known), undefined);
    assert.equal(closestKey('x', known), undefined);
  });
});

describe('addresses', () => {
  it('listen addresses', () => {
    assert.deepEqual(parseListenAddress(':8080'), { ok: true, value: { host: '0.0.0.0', port: 8080 } });
    assert.deepEqual(parseListenAddress('[::]:0'), { ok: true, value: { host: '::', port: 0 } });
    assert.deepEqual(parseListenAddress('localhost:1'), { ok: true, value: { host: 'localhost', port: 1 } });
    assert.equal(parseListenAddress('[]:80').ok, false);
    assert.equal(parseListenAddress('1.2.3.4:-1').ok, false);
    assert.equal(parseListenAddress('1.2.3.4:').ok, false);
  });

  it('server addresses keep the raw text and drop IPv6 brackets', () => {
    assert.deepEqual(parseServerAddress('[2001:db8::1]:443'), {
      ok: true,
      value: { raw: '[2001:db8::1]:443', host: '2001:db8::1', port: 443 },
    });
    assert.deepEqual(parseServerAddress('svc_name.ns:8080'), {
      ok: true,
      value: { raw: 'svc_name.ns:8080', host: 'svc_name.ns', port: 8080 },
    });
    assert.equal(parseServerAddress(`${'a'.repeat(64)}.com:80`).ok, false);
    assert.equal(parseServerAddress('[fe80::1%eth0]:80').ok, false);
    assert.equal(parseServerAddress('host:08080x').ok, false);
  });

  it('CIDRs come back with an explicit prefix length', () => {
    assert.deepEqual(parseCidr('10.1.2.3'), { ok: true, value: '10.1.2.3/32' });
    assert.deepEqual(parseCidr('0.0.0.0/0'), { ok: true, value: '0.0.0.0/0' });
    assert.deepEqual(parseCidr('2001:db8::/32'), { ok: true, value: '2001:db8::/32' });
    assert.equal(parseCidr('10.0.0.0/8x').ok, false);
    assert.equal(parseCidr('').ok, false);
  });
});
