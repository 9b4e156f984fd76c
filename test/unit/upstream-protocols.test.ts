import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseServerAddress } from '../../src/config/addresses.ts';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import { compileRoutingTable } from '../../src/routing/compile.ts';
import { classifyUpstreamError } from '../../src/upstream/failure.ts';
import { parseGrpcTimeout } from '../../src/upstream/forward.ts';
import { wireFor } from '../../src/upstream/pools.ts';
import { problems, valid, yaml } from '../fixtures/config/problems.ts';
import { hasOpenssl, selfSigned } from '../helpers/certs.ts';

const dir = mkdtempSync(join(tmpdir(), 'tollgate-upstream-protocols-'));
const FILE = join(dir, 'upstreams.yaml');
const parse = (text: string) => parseUpstreamsConfig(text, FILE);
const write = (name: string, content: string | Buffer) => {
  writeFileSync(join(dir, name), content);
  return name;
};

describe('https:// server addresses', () => {
  it('reads https://host:port as a TLS server and keeps host:port plain', () => {
    assert.deepEqual(parseServerAddress('https://api.internal:8443'), {
      ok: true,
      value: { raw: 'https://api.internal:8443', host: 'api.internal', port: 8443, tls: true },
    });
    assert.deepEqual(parseServerAddress('HTTPS://[::1]:443'), {
      ok: true,
      value: { raw: 'HTTPS://[::1]:443', host: '::1', port: 443, tls: true },
    });
    assert.deepEqual(parseServerAddress('10.0.0.1:80'), {
      ok: true,
      value: { raw: '10.0.0.1:80', host: '10.0.0.1', port: 80 },
    });
  });

  it('refuses other schemes, paths and credentials', () => {
    assert.equal(parseServerAddress('http://10.0.0.1:80').ok, false);
    assert.equal(parseServerAddress('grpc://10.0.0.1:80').ok, false);
    assert.equal(parseServerAddress('https://10.0.0.1:443/api').ok, false);
    assert.equal(parseServerAddress('https://user:pw@10.0.0.1:443').ok, false);
    assert.equal(parseServerAddress('https://10.0.0.1').ok, false);
  });
});

describe('upstream_tls and upstream_protocol in upstreams.yaml', {
  skip: hasOpenssl() ? false : 'no openssl',
}, () => {
  it('accepts the settings, resolving files against the file, and compiles them onto the servers', () => {
    const ca = selfSigned('ca.test');
    const client = selfSigned('client.test');
    write('ca.pem', ca.cert);
    write('client.pem', client.cert);
    write('client.key', client.key);
    const config = valid(
      parse(yaml`
        upstreams:
          app.test:
            paths:
              /:
                servers: ["https://10.0.0.1:8443", "https://10.0.0.2:8443"]
                upstream_tls: { ca_file: ca.pem, server_name: Backend.Internal, certificate: client.pem, key: client.key }
                upstream_protocol: h2
              /plain:
                servers: ["10.0.0.1:8080"]
                upstream_protocol: h2c
      `),
    );
    const [tlsPath, plainPath] = config.hosts[0]?.paths ?? [];
    assert.deepEqual(tlsPath?.upstreamTls, {
      caFile: join(dir, 'ca.pem'),
      serverName: 'backend.internal',
      certificateFile: join(dir, 'client.pem'),
      keyFile: join(dir, 'client.key'),
      verify: true,
    });
    assert.equal(tlsPath?.upstreamProtocol, 'h2');
    assert.equal(plainPath?.upstreamTls, null);
    const table = compileRoutingTable(config);
    const [secure] = table.routes.find((route) => route.prefix === '/')?.servers ?? [];
    assert.equal(secure?.origin, 'https://10.0.0.1:8443');
    assert.equal(secure?.transport.tls?.serverName, 'backend.internal');
    assert.equal(secure?.transport.protocol, 'h2');
    const [plain] = table.routes.find((route) => route.prefix === '/plain')?.servers ?? [];
    assert.equal(plain?.origin, 'http://10.0.0.1:8080');
    assert.equal(plain?.transport.tls, null);
    // The same address under other transport settings is another pool; the same settings share one.
    assert.notEqual(secure?.poolKey, plain?.poolKey);
  });

  it('reports every mistake at its line', () => {
    const ca = selfSigned('ca.test');
    const other = selfSigned('other.test');
    write('good-ca.pem', ca.cert);
    write('not-a-ca.pem', 'hello\n');
    write('mismatch.pem', ca.cert);
    write('mismatch.key', other.key);
    const at = (prefix: string) => `upstreams.app.test.paths.${prefix}`;
    assert.deepEqual(
      problems(
        parse(yaml`
          upstreams:
            app.test:
              paths:
                /a:
                  servers: ["https://10.0.0.1:443"]
                  upstream_tls: { ca_file: missing.pem }
                /b:
                  servers: ["https://10.0.0.1:443"]
                  upstream_tls: { ca_file: not-a-ca.pem, verify: false }
                /c:
                  servers: ["10.0.0.1:80"]
                  upstream_tls: { verify: false }
                /d:
                  servers: ["https://10.0.0.1:443"]
                  upstream_tls: { certificate: mismatch.pem }
                /e:
                  servers: ["https://10.0.0.1:443"]
                  upstream_tls: { certificate: mismatch.pem, key: mismatch.key, server_name: "bad name" }
                /f:
                  servers: ["https://10.0.0.1:443"]
                  upstream_protocol: h2c
                /g:
                  servers: ["10.0.0.1:80"]
                  upstream_protocol: http3
                /h:
                  servers: ["https://10.0.0.1:443"]
                  upstream_tls: { ca_file: good-ca.pem, verify: false, sni: x }
        `),
      ),
      [
        `${FILE}:6:34: ${at('/a')}.upstream_tls.ca_file: cannot read ${join(dir, 'missing.pem')}: no such file`,
        `${FILE}:9:25: ${at('/b')}.upstream_tls.ca_file: is not used with verify: false; remove one of them`,
        `${FILE}:9:34: ${at('/b')}.upstream_tls.ca_file: ${join(dir, 'not-a-ca.pem')} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
        `${FILE}:12:9: ${at('/c')}.upstream_tls: applies to https:// servers, and this path lists none: write the servers as https://host:port`,
        `${FILE}:15:25: ${at('/d')}.upstream_tls.certificate: a client certificate needs 'key' as well`,
        `${FILE}:18:57: ${at('/e')}.upstream_tls.key: the private key in ${join(dir, 'mismatch.key')} does not match the certificate in ${join(dir, 'mismatch.pem')}`,
        `${FILE}:18:84: ${at('/e')}.upstream_tls.server_name: 'bad name' is neither a host name nor an IP address`,
        `${FILE}:21:28: ${at('/f')}.upstream_protocol: h2c is HTTP/2 without TLS, but this path has TLS servers: use h2 (or auto) for those`,
        `${FILE}:24:28: ${at('/g')}.upstream_protocol: unknown protocol 'http3' (expected auto, http1, h2, h2c)`,
        `${FILE}:27:25: ${at('/h')}.upstream_tls.ca_file: is not used with verify: false; remove one of them`,
        `${FILE}:27:62: ${at('/h')}.upstream_tls.sni: unknown key 'sni' (known keys: ca_file, server_name, certificate, key, verify)`,
      ],
    );
  });
});

describe('the protocol to a server', () => {
  const serverFor = (servers: string, extra = '') => {
    const config = valid(
      parse(`upstreams:\n  h:\n    paths:\n      /:\n        servers: [${servers}]\n${extra}`),
    );
    return compileRoutingTable(config).routes[0]?.servers[0] as Parameters<typeof wireFor>[0];
  };

  it('auto: HTTP/1.1 to plain servers except gRPC (h2c), ALPN to TLS servers', () => {
    const plain = serverFor('"10.0.0.1:80"');
    assert.equal(wireFor(plain, false), 'h1');
    assert.equal(wireFor(plain, true), 'h2c');
    const secure = serverFor('"https://10.0.0.1:443"', '        upstream_tls: { verify: false }\n');
    assert.equal(wireFor(secure, false), 'alpn');
    assert.equal(wireFor(secure, true), 'alpn');
  });

  it('a written protocol applies to every request', () => {
    for (const [servers, protocol, expected] of [
      ['"10.0.0.1:80"', 'http1', 'h1'],
      ['"10.0.0.1:80"', 'h2', 'h2c'],
      ['"10.0.0.1:80"', 'h2c', 'h2c'],
      ['"https://10.0.0.1:443"', 'http1', 'h1'],
      ['"https://10.0.0.1:443"', 'h2', 'h2'],
    ] as const) {
      const server = serverFor(servers, `        upstream_protocol: ${protocol}\n`);
      assert.equal(wireFor(server, false), expected, `${servers} ${protocol}`);
      assert.equal(wireFor(server, true), expected, `${servers} ${protocol} gRPC`);
    }
  });
});

describe('failure classes of TLS and HTTP/2 upstreams', () => {
  const error = (code: string, message = code) => Object.assign(new Error(message), { code });

  it('a failed TLS handshake is its own class; nothing was sent, so another server may be tried', () => {
    for (const code of [
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      'DEPTH_ZERO_SELF_SIGNED_CERT',
      'ERR_TLS_CERT_ALTNAME_INVALID',
      'CERT_HAS_EXPIRED',
      'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
      'ERR_SSL_WRONG_VERSION_NUMBER',
    ]) {
      assert.deepEqual(
        classifyUpstreamError(error(code)),
        { kind: 'tls', unreachable: false, notSent: true, staleConnection: false, answer: 'bad_gateway' },
        code,
      );
    }
  });

  it('GOAWAY and REFUSED_STREAM say the stream was never processed (retryable)', () => {
    const goaway = classifyUpstreamError(
      error('UND_ERR_SOCKET', 'HTTP/2: "GOAWAY" frame received with code 0'),
    );
    assert.equal(goaway.notSent, true);
    const refused = classifyUpstreamError(
      error('ERR_HTTP2_STREAM_ERROR', 'Stream closed with error code NGHTTP2_REFUSED_STREAM'),
    );
    assert.equal(refused.notSent, true);
    assert.equal(classifyUpstreamError(error('ERR_HTTP2_GOAWAY_SESSION')).notSent, true);
    // Any other stream reset may have reached the application.
    assert.equal(
      classifyUpstreamError(
        error('ERR_HTTP2_STREAM_ERROR', 'Stream closed with error code NGHTTP2_INTERNAL_ERROR'),
      ).notSent,
      false,
    );
  });
});

describe('grpc-timeout', () => {
  it('reads every unit, and nothing malformed', () => {
    assert.equal(parseGrpcTimeout('1S'), 1000);
    assert.equal(parseGrpcTimeout('250m'), 250);
    assert.equal(parseGrpcTimeout('2M'), 120_000);
    assert.equal(parseGrpcTimeout('1H'), 3_600_000);
    assert.equal(parseGrpcTimeout('1500u'), 2);
    assert.equal(parseGrpcTimeout('5n'), 1);
    assert.equal(parseGrpcTimeout('123456789S'), null, 'at most 8 digits');
    assert.equal(parseGrpcTimeout('1s'), null);
    assert.equal(parseGrpcTimeout(' 1S'), null);
    assert.equal(parseGrpcTimeout(undefined), null);
    assert.equal(parseGrpcTimeout(['1S', '2S']), null);
  });
});
