import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  certificateSubject,
  forwardedClientCert,
  subjectAltNames,
} from '../../src/auth/client-certificate.ts';
import { chainDepth } from '../../src/listeners/client-certificates.ts';
import { hasOpenssl, TestCa } from '../helpers/certs.ts';

/**
 * What a verified client certificate says (docs/authentication.md#client-certificates): SANs read
 * from Node's printed form without letting one value pass for two, the subject by `subject_from`,
 * the X-Forwarded-Client-Cert element, and the depth of a chain.
 */
describe('client certificate identity', { skip: hasOpenssl() ? false : 'no openssl' }, () => {
  const ca = new TestCa('Unit CA');
  const intermediate = new TestCa('Unit Intermediate', ca);
  const tricky = new X509Certificate(
    ca.issue('a "quoted", CN', {
      uris: ['spiffe://td/ns/a,URI:spiffe://td/ns/admin', 'https://second.example/'],
      dns: ['API.Example.test'],
      emails: ['ops@example.test'],
    }).cert,
  );
  const bare = new X509Certificate(ca.issue('only-cn').cert);
  const deep = new X509Certificate(intermediate.issue('deep').cert);

  it('a SAN holding a comma stays one value (Node quotes it); DNS names lower case', () => {
    const sans = subjectAltNames(tricky);
    assert.deepEqual(sans.uri, ['spiffe://td/ns/a,URI:spiffe://td/ns/admin', 'https://second.example/']);
    assert.deepEqual(sans.dns, ['api.example.test']);
    assert.deepEqual(sans.email, ['ops@example.test']);
  });

  it('subject_from: the first source present wins', () => {
    assert.equal(certificateSubject(tricky, ['dns_san', 'uri_san']), 'api.example.test');
    assert.equal(certificateSubject(bare, ['uri_san', 'cn']), 'only-cn');
    assert.equal(certificateSubject(bare, ['uri_san', 'dns_san']), null);
    assert.equal(certificateSubject(tricky, ['cn']), 'a "quoted", CN');
  });

  it('X-Forwarded-Client-Cert quotes values holding , ; = or a quote', () => {
    const [name, value] = forwardedClientCert(tricky);
    assert.equal(name, 'x-forwarded-client-cert');
    // The subject in RFC 2253 form, whose escapes keep quotes and commas inside the value.
    assert.match(value, /^Hash=[0-9a-f]{64};Subject="CN=a \\"quoted\\"\\, CN,O=Tollgate Tests";/);
    assert.ok(
      value.includes(';URI="spiffe://td/ns/a,URI:spiffe://td/ns/admin";URI=https://second.example/;'),
    );
    assert.ok(value.endsWith(';DNS=api.example.test'));
  });

  it('chain depth: 1 issued by a CA of the bundle, 2 through an intermediate (in the bundle or not)', () => {
    const root = new X509Certificate(ca.cert);
    const middle = new X509Certificate(intermediate.cert);
    assert.equal(chainDepth(bare, [root]), 1);
    assert.equal(chainDepth(deep, [root, middle]), 2);
    assert.equal(chainDepth(deep, [root]), 2);
  });
});
