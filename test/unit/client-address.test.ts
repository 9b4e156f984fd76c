import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTrustTest, plainIp, resolveClientAddress } from '../../src/upstream/client-address.ts';

describe('client address', () => {
  const trusted = createTrustTest(['10.0.0.0/8', '::1/128', '192.168.1.7']);

  it('matches CIDRs and single addresses of both families', () => {
    assert.equal(trusted('10.1.2.3'), true);
    assert.equal(trusted('11.1.2.3'), false);
    assert.equal(trusted('::1'), true);
    assert.equal(trusted('192.168.1.7'), true);
    assert.equal(trusted('192.168.1.8'), false);
    assert.equal(createTrustTest([])('10.1.2.3'), false);
  });

  it('ignores X-Forwarded-For from an untrusted peer and replaces it', () => {
    assert.deepEqual(resolveClientAddress('8.8.8.8', '1.2.3.4', trusted), {
      clientIp: '8.8.8.8',
      forwardedFor: '8.8.8.8',
      peerTrusted: false,
    });
  });

  it('believes a trusted peer up to the first untrusted hop, and appends the peer', () => {
    assert.deepEqual(resolveClientAddress('10.0.0.1', '6.6.6.6, 1.2.3.4, 10.0.0.9', trusted), {
      clientIp: '1.2.3.4',
      forwardedFor: '6.6.6.6, 1.2.3.4, 10.0.0.9, 10.0.0.1',
      peerTrusted: true,
    });
  });

  it('stops at a hop that is not an IP address', () => {
    assert.equal(resolveClientAddress('10.0.0.1', '1.2.3.4, garbage', trusted).clientIp, '10.0.0.1');
  });

  it('unwraps IPv4-mapped IPv6 peers', () => {
    assert.equal(plainIp('::ffff:127.0.0.1'), '127.0.0.1');
    assert.equal(plainIp('::1'), '::1');
    assert.equal(plainIp(undefined), '');
  });
});
