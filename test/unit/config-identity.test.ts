import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseMainConfig, parseUpstreamsConfig } from '../../src/config/load.ts';
import { problems, valid, yaml } from '../fixtures/config/problems.ts';

/**
 * The keys of client certificates and external authorization (docs/configuration.md): what they
 * read as, and one clear error at the line of each mistake.
 */

const MAIN = '/etc/tollgate/main.yaml';
const UPSTREAMS = '/etc/tollgate/upstreams.yaml';
const route = (authorization: string) =>
  `upstreams:\n  a.test:\n    paths:\n      /:\n        servers: ["127.0.0.1:3000"]\n        authorization: ${authorization}\n`;

describe('client certificates in main.yaml', () => {
  it('tls_client_certificates and a pair of its own: paths resolved, defaults filled', () => {
    const main = valid(
      parseMainConfig(
        yaml`
          proxy_address_tls: "0.0.0.0:8443"
          tls_certificate: tls.crt
          tls_key_file: tls.key
          tls_client_certificates: { ca_file: clients.pem }
          tls_certificates:
            - certificate: a.crt
              key: a.key
              client_certificates: { ca_file: a-ca.pem, mode: optional, verify_depth: 2, crl_file: a.crl }
        `,
        MAIN,
      ),
    );
    assert.deepEqual(main.tlsClientCertificates, {
      caFile: '/etc/tollgate/clients.pem',
      crlFile: null,
      mode: 'require',
      verifyDepth: 1,
    });
    assert.deepEqual(main.tlsCertificates[0]?.clientCertificates, {
      caFile: '/etc/tollgate/a-ca.pem',
      crlFile: '/etc/tollgate/a.crl',
      mode: 'optional',
      verifyDepth: 2,
    });
  });

  it('a missing ca_file, an unknown mode, a depth of 0, and the key without TLS are refused at their lines', () => {
    assert.deepEqual(
      problems(
        parseMainConfig(
          yaml`
            proxy_address_tls: "0.0.0.0:8443"
            tls_certificates:
              - certificate: a.crt
                key: a.key
                client_certificates: { mode: require }
              - certificate: b.crt
                key: b.key
                client_certificates: { ca_file: ca.pem, mode: sometimes, verify_depth: 0 }
          `,
          MAIN,
        ),
      ),
      [
        "/etc/tollgate/main.yaml:5:5: tls_certificates[0].client_certificates: needs 'ca_file': the CA bundle client certificates must chain to",
        "/etc/tollgate/main.yaml:8:51: tls_certificates[1].client_certificates.mode: unknown mode 'sometimes' (expected require or optional)",
        '/etc/tollgate/main.yaml:8:76: tls_certificates[1].client_certificates.verify_depth: 0 is out of range (must be >= 1 and <= 8)',
      ],
    );
    assert.deepEqual(problems(parseMainConfig('tls_client_certificates: { ca_file: ca.pem }\n', MAIN)), [
      '/etc/tollgate/main.yaml:1:1: tls_client_certificates: is set but proxy_address_tls is not, so TLS would stay off',
    ]);
  });
});

describe('type client_certificate and type ext_authz in upstreams.yaml', () => {
  it('read with their defaults', () => {
    const certificate = valid(parseUpstreamsConfig(route('{ type: client_certificate }'), UPSTREAMS));
    assert.deepEqual(certificate.hosts[0]?.paths[0]?.authorization, {
      type: 'client_certificate',
      users: [],
      keys: [],
      clientCertificate: { subjectFrom: ['uri_san', 'cn'], forward: 'none' },
    });
    const extAuthz = valid(
      parseUpstreamsConfig(route('{ type: ext_authz, grpc: { address: "opa.policy:9191" } }'), UPSTREAMS),
    );
    assert.deepEqual(extAuthz.hosts[0]?.paths[0]?.authorization?.extAuthz, {
      address: 'opa.policy:9191',
      tls: null,
      timeoutMs: 300,
      includeBodyBytes: 0,
      failOpen: false,
    });
  });

  it('mistakes are refused at their lines, and keys of one type on another', () => {
    const refused = (authorization: string) =>
      problems(parseUpstreamsConfig(route(authorization), UPSTREAMS)).map((line) =>
        line.replace(/^\S+ /, ''),
      );
    assert.deepEqual(
      refused('{ type: client_certificate, subject_from: [san], forward_client_certificate: der }'),
      [
        "upstreams.a.test.paths./.authorization.subject_from[0]: unknown subject source 'san' (expected uri_san, dns_san, email_san, cn)",
        "upstreams.a.test.paths./.authorization.forward_client_certificate: unknown form 'der' (expected xfcc, pem or none)",
      ],
    );
    assert.deepEqual(refused('{ type: ext_authz, grpc: { address: "no-port" }, timeout_ms: 0 }'), [
      "upstreams.a.test.paths./.authorization.grpc.address: 'no-port' is not host:port",
      'upstreams.a.test.paths./.authorization.timeout_ms: 0 is out of range (must be >= 1 and <= 60000)',
    ]);
    assert.deepEqual(refused('{ type: ext_authz }'), [
      "upstreams.a.test.paths./.authorization: ext_authz needs 'grpc: { address }': the authorization service to ask",
    ]);
    assert.deepEqual(refused('{ type: jwt, fail_open: true, subject_from: [cn] }'), [
      "upstreams.a.test.paths./.authorization.fail_open: 'fail_open' is for type ext_authz",
      "upstreams.a.test.paths./.authorization.subject_from: 'subject_from' is for type client_certificate",
    ]);
    assert.deepEqual(refused('{ type: client_certificate, allow: { emails: [a@b.test] } }'), [
      "upstreams.a.test.paths./.authorization.allow.emails: client_certificate knows only the subject (a user or key name): use 'subjects', or a jwt/oidc method for 'emails'",
    ]);
  });
});
