import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseMainConfig } from '../../src/config/load.ts';
import type { MainConfig } from '../../src/config/types.ts';
import { MAIN_KEYS } from '../../src/config/validate-main.ts';
import { problems, valid, yaml } from '../fixtures/config/problems.ts';

const FILE = '/etc/tollgate/main.yaml';
const parse = (text: string) => parseMainConfig(text, FILE);

const DEFAULTS: MainConfig = {
  file: FILE,
  proxyAddressHttp: { host: '0.0.0.0', port: 8080 },
  proxyAddressTls: null,
  tlsCertificate: null,
  tlsKeyFile: null,
  tlsCertificates: [],
  http2Cleartext: false,
  http2: { maxConcurrentStreams: 128, maxHeaderListBytes: 16384, maxResetsPerSecond: 100 },
  configAddress: { host: '0.0.0.0', port: 8081 },
  adminAddress: { host: '0.0.0.0', port: 9090 },
  upstreamsConf: '/etc/tollgate/upstreams.yaml',
  logLevel: 'info',
  accessLog: true,
  masterkey: null,
  masterkeyFile: null,
  tokenParam: 'tollgatetoken',
  maxTokenMinutes: 1440,
  httpsPort: 443,
  trustedProxies: [],
  timeouts: {
    upstreamConnectMs: 5000,
    upstreamResponseHeadersMs: 60000,
    clientKeepAliveMs: 60000,
    clientHeadersMs: 30000,
    clientFirstByteMs: 10000,
    clientBodyIdleMs: 30000,
    clientSendMs: 60000,
  },
  maxClientConnections: 10000,
  upstreamLimits: {
    maxConnectionsPerServer: 512,
    maxConnectionsPerRoute: 384,
    queueSize: 256,
    queueTimeoutMs: 3000,
  },
  shutdownDelaySeconds: 5,
  shutdownGraceSeconds: 25,
  rateLimitRedis: null,
  workers: 1,
};

describe('main.yaml: valid files', () => {
  it('an empty file (or only comments) means every default', () => {
    assert.deepEqual(valid(parse('')), DEFAULTS);
    assert.deepEqual(valid(parse('# nothing to change\n')), DEFAULTS);
  });

  it('a key with no value keeps its default (how Helm renders an unset value)', () => {
    assert.deepEqual(valid(parse('proxy_address_tls:\nlog_level: ~\n')), DEFAULTS);
  });

  it('reads every key', () => {
    const config = valid(
      parse(yaml`
        proxy_address_http: "10.1.2.3:80"
        proxy_address_tls: "[::]:443"
        tls_certificate: tls/cert.pem
        tls_key_file: /secrets/key.pem
        config_address: "localhost:8081"
        admin_address: ":9090"
        upstreams_conf: ../routes/upstreams.yaml
        log_level: debug
        access_log: false
        masterkey: s3cret
        master_key: s3cret
        masterkey_file: secret/masterkey
        token_param: access_token
        max_token_minutes: 60
        https_port: 8443
        trusted_proxies: [10.0.0.0/8, "192.168.1.1", "fd00::/8", "::1"]
        upstream_connect_timeout_seconds: 2.5
        upstream_response_timeout_seconds: 30
        keepalive_timeout_seconds: 75
        client_header_timeout_seconds: 10
        client_first_byte_timeout_seconds: 5
        client_body_timeout_seconds: 20
        client_send_timeout_seconds: 45
        max_client_connections: 2000
        upstream_max_connections: 100
        upstream_max_connections_per_route: 60
        upstream_queue_size: 10
        upstream_queue_timeout_seconds: 0.5
        shutdown_delay_seconds: 0
        shutdown_grace_seconds: 40
        rate_limit_redis: redis://redis:6379/0
        workers: 3
        tls_certificates:
          - {certificate: a.crt, key: a.key}
          - {certificate: /certs/b.crt, key: /certs/b.key}
        http2_cleartext: true
        http2: {max_concurrent_streams: 64, max_header_list_bytes: 32768, max_resets_per_second: 20}
      `),
    );
    assert.deepEqual(config, {
      file: FILE,
      proxyAddressHttp: { host: '10.1.2.3', port: 80 },
      proxyAddressTls: { host: '::', port: 443 },
      tlsCertificate: '/etc/tollgate/tls/cert.pem',
      tlsKeyFile: '/secrets/key.pem',
      tlsCertificates: [
        { certificate: '/etc/tollgate/a.crt', key: '/etc/tollgate/a.key' },
        { certificate: '/certs/b.crt', key: '/certs/b.key' },
      ],
      http2Cleartext: true,
      http2: { maxConcurrentStreams: 64, maxHeaderListBytes: 32768, maxResetsPerSecond: 20 },
      configAddress: { host: 'localhost', port: 8081 },
      adminAddress: { host: '0.0.0.0', port: 9090 },
      upstreamsConf: '/etc/routes/upstreams.yaml',
      logLevel: 'debug',
      accessLog: false,
      masterkey: 's3cret',
      masterkeyFile: '/etc/tollgate/secret/masterkey',
      tokenParam: 'access_token',
      maxTokenMinutes: 60,
      httpsPort: 8443,
      trustedProxies: ['10.0.0.0/8', '192.168.1.1/32', 'fd00::/8', '::1/128'],
      timeouts: {
        upstreamConnectMs: 2500,
        upstreamResponseHeadersMs: 30000,
        clientKeepAliveMs: 75000,
        clientHeadersMs: 10000,
        clientFirstByteMs: 5000,
        clientBodyIdleMs: 20000,
        clientSendMs: 45000,
      },
      maxClientConnections: 2000,
      upstreamLimits: {
        maxConnectionsPerServer: 100,
        maxConnectionsPerRoute: 60,
        queueSize: 10,
        queueTimeoutMs: 500,
      },
      shutdownDelaySeconds: 0,
      shutdownGraceSeconds: 40,
      rateLimitRedis: 'redis://redis:6379/0',
      workers: 3,
    } satisfies MainConfig);
  });

  it("a route's share of an upstream server's connections defaults to three quarters of them", () => {
    assert.equal(valid(parse('upstream_max_connections: 8\n')).upstreamLimits.maxConnectionsPerRoute, 6);
    assert.equal(valid(parse('upstream_max_connections: 1\n')).upstreamLimits.maxConnectionsPerRoute, 1);
  });

  it('accepts master_key as an alias of masterkey', () => {
    assert.equal(valid(parse('master_key: abc\n')).masterkey, 'abc');
  });

  it('accepts port 0 on listeners (the OS picks one) and rediss:// URLs', () => {
    const config = valid(
      parse('proxy_address_http: "127.0.0.1:0"\nrate_limit_redis: "rediss://u:p@r:6380"\n'),
    );
    assert.deepEqual(config.proxyAddressHttp, { host: '127.0.0.1', port: 0 });
    assert.equal(config.rateLimitRedis, 'rediss://u:p@r:6380');
  });

  it('resolves a relative file name against the directory of main.yaml, not the working directory', () => {
    const config = valid(parseMainConfig('upstreams_conf: up.yaml\n', '/srv/conf/main.yaml'));
    assert.equal(config.upstreamsConf, '/srv/conf/up.yaml');
  });
});

describe('main.yaml: each kind of error names file:line:column and path', () => {
  it('http2: known keys, integers in range; http2_cleartext a boolean', () => {
    assert.deepEqual(
      problems(parse('http2_cleartext: yes please\nhttp2:\n  max_concurrent_streams: 0\n  max_resets: 5\n')),
      [
        `${FILE}:1:18: http2_cleartext: expected true or false, got a string`,
        `${FILE}:3:27: http2.max_concurrent_streams: 0 is out of range (must be >= 1 and <= 2147483647)`,
        `${FILE}:4:3: http2.max_resets: unknown key 'max_resets' (did you mean 'max_resets_per_second'?)`,
      ],
    );
  });

  it('upstream connection limits: positive integers, and a route share no larger than the total', () => {
    assert.deepEqual(
      problems(
        parse('upstream_max_connections: 0\nupstream_queue_size: -1\nupstream_queue_timeout_seconds: 0\n'),
      ),
      [
        `${FILE}:1:27: upstream_max_connections: 0 is out of range (must be >= 1 and <= 65535)`,
        `${FILE}:2:22: upstream_queue_size: -1 is out of range (must be >= 0 and <= 1000000)`,
        `${FILE}:3:33: upstream_queue_timeout_seconds: 0 is out of range (must be > 0 and <= 2147483)`,
      ],
    );
    assert.deepEqual(
      problems(parse('upstream_max_connections: 10\nupstream_max_connections_per_route: 20\n')),
      [
        `${FILE}:2:37: upstream_max_connections_per_route: 20 is more than upstream_max_connections (10), so it would never apply`,
      ],
    );
  });

  it('unknown key, with the closest known key as a suggestion', () => {
    assert.deepEqual(problems(parse('log_level: info\nproxy_adress_http: ":80"\n')), [
      `${FILE}:2:1: proxy_adress_http: unknown key 'proxy_adress_http' (did you mean 'proxy_address_http'?)`,
    ]);
  });

  it('a key of upstreams.yaml written in main.yaml says where it belongs', () => {
    assert.deepEqual(problems(parse('authorization:\n  type: jwt\n')), [
      `${FILE}:1:1: authorization: unknown key 'authorization' (it belongs in upstreams.yaml, the file named by upstreams_conf)`,
    ]);
  });

  it('wrong types are refused instead of converted', () => {
    const text = yaml`
      access_log: "yes"
      max_token_minutes: 1.5
      https_port: "443"
      masterkey: 12345
      trusted_proxies: 10.0.0.0/8
      log_level: [info]
    `;
    assert.deepEqual(problems(parse(text)), [
      `${FILE}:1:13: access_log: expected true or false, got a string`,
      `${FILE}:2:20: max_token_minutes: expected an integer, got 1.5`,
      `${FILE}:3:13: https_port: expected an integer, got a string`,
      `${FILE}:4:12: masterkey: expected a string, got a number (quote the value if it is meant as text)`,
      `${FILE}:5:18: trusted_proxies: expected a list of CIDRs such as 10.0.0.0/8, got a string`,
      `${FILE}:6:12: log_level: expected a string, got a list`,
    ]);
  });

  it('out-of-range numbers', () => {
    const text = yaml`
      https_port: 70000
      max_token_minutes: 0
      upstream_connect_timeout_seconds: 0
      keepalive_timeout_seconds: -1
      client_header_timeout_seconds: 3000000
      shutdown_grace_seconds: -5
    `;
    assert.deepEqual(problems(parse(text)), [
      `${FILE}:1:13: https_port: 70000 is out of range (must be >= 1 and <= 65535)`,
      `${FILE}:2:20: max_token_minutes: 0 is out of range (must be >= 1)`,
      `${FILE}:3:35: upstream_connect_timeout_seconds: 0 is out of range (must be > 0 and <= 2147483)`,
      `${FILE}:4:28: keepalive_timeout_seconds: -1 is out of range (must be > 0 and <= 2147483)`,
      `${FILE}:5:32: client_header_timeout_seconds: 3000000 is out of range (must be > 0 and <= 2147483)`,
      `${FILE}:6:25: shutdown_grace_seconds: -5 is out of range (must be >= 0 and <= 2147483)`,
    ]);
  });

  for (const [address, reason] of [
    ['0.0.0.0', "'0.0.0.0' has no port; expected host:port, [v6]:port or :port, e.g. 0.0.0.0:8080"],
    ['::1:8080', "'::1:8080': IPv6 addresses need brackets, e.g. [::1]:8080"],
    ['[::1]8080', "'[::1]8080': expected host:port, [v6]:port or :port, e.g. 0.0.0.0:8080"],
    ['[10.0.0.1]:80', "'[10.0.0.1]:80': '10.0.0.1' in brackets is not an IPv6 address"],
    ['127.0.0.1:65536', "'127.0.0.1:65536': port must be a number from 0 to 65535"],
    ['127.0.0.1:http', "'127.0.0.1:http': port must be a number from 0 to 65535"],
    ['bad_host!:80', "'bad_host!:80': 'bad_host!' is neither an IP address nor a valid host name"],
    ['300.1.1.1:80', "'300.1.1.1:80': '300.1.1.1' is neither an IP address nor a valid host name"],
  ]) {
    it(`bad listen address '${address}'`, () => {
      assert.deepEqual(problems(parse(`log_level: info\nadmin_address: "${address}"\n`)), [
        `${FILE}:2:16: admin_address: ${reason}`,
      ]);
    });
  }

  it('a bare number as a listen address is refused (write ":8080")', () => {
    assert.deepEqual(problems(parse('proxy_address_http: 8080\n')), [
      `${FILE}:1:21: proxy_address_http: expected a string, got a number (quote the value if it is meant as text)`,
    ]);
  });

  it('bad CIDRs in trusted_proxies, each with its index', () => {
    const text = yaml`
      trusted_proxies:
        - 10.0.0.0/8
        - 10.0.0.0/33
        - fd00::/129
        - proxy.local
        - 10.0.0.0/8/8
        - 10.0.0.0/
    `;
    assert.deepEqual(problems(parse(text)), [
      `${FILE}:3:5: trusted_proxies[1]: '10.0.0.0/33': prefix length must be 0..32`,
      `${FILE}:4:5: trusted_proxies[2]: 'fd00::/129': prefix length must be 0..128`,
      `${FILE}:5:5: trusted_proxies[3]: 'proxy.local' is not an IP address or CIDR such as 10.0.0.0/8 or fd00::/8`,
      `${FILE}:6:5: trusted_proxies[4]: '10.0.0.0/8/8' is not an IP address or CIDR such as 10.0.0.0/8 or fd00::/8`,
      `${FILE}:7:5: trusted_proxies[5]: '10.0.0.0/': prefix length must be 0..32`,
    ]);
  });

  it('unknown log level', () => {
    assert.deepEqual(problems(parse('log_level: verbose\n')), [
      `${FILE}:1:12: log_level: unknown log level 'verbose' (expected trace, debug, info, warn, error, silent)`,
    ]);
  });

  it('token_param must be usable in a query string unencoded', () => {
    assert.deepEqual(problems(parse('token_param: "tok en"\n')), [
      `${FILE}:1:14: token_param: 'tok en' is not a usable query parameter name (letters, digits, '.', '_', '~', '-')`,
    ]);
  });

  it('rate_limit_redis must be a redis URL, and the message never repeats it (it may hold a password)', () => {
    const issues = problems(parse('rate_limit_redis: "http://user:hunter2@redis:6379"\n'));
    assert.deepEqual(issues, [`${FILE}:1:19: rate_limit_redis: must start with redis:// or rediss://`]);
    assert.ok(!issues.join('\n').includes('hunter2'));
  });

  it('TLS needs its address, certificate and key together', () => {
    assert.deepEqual(problems(parse('proxy_address_tls: ":8443"\ntls_certificate: cert.pem\n')), [
      `${FILE}:1:1: proxy_address_tls: TLS needs tls_key_file as well`,
    ]);
    assert.deepEqual(problems(parse('tls_certificate: cert.pem\ntls_key_file: key.pem\n')), [
      `${FILE}:1:1: tls_certificate: is set but proxy_address_tls is not, so TLS would stay off`,
      `${FILE}:2:1: tls_key_file: is set but proxy_address_tls is not, so TLS would stay off`,
    ]);
  });

  it('tls_certificates: a non-empty list of {certificate, key}, enough for TLS on its own', () => {
    assert.deepEqual(
      valid(parse('proxy_address_tls: ":8443"\ntls_certificates: [{certificate: a.crt, key: a.key}]\n'))
        .tlsCertificates,
      [{ certificate: '/etc/tollgate/a.crt', key: '/etc/tollgate/a.key' }],
    );
    assert.deepEqual(problems(parse('proxy_address_tls: ":8443"\n')), [
      `${FILE}:1:1: proxy_address_tls: TLS needs tls_certificate and tls_key_file (or tls_certificates) as well`,
    ]);
    assert.deepEqual(
      problems(
        parse(
          'proxy_address_tls: ":8443"\ntls_certificates:\n  - {certificate: a.crt}\n  - {cert: b.crt, key: b.key}\n  - a.crt\n',
        ),
      ),
      [
        `${FILE}:3:5: tls_certificates[0].key: is required`,
        `${FILE}:4:5: tls_certificates[1].certificate: is required`,
        `${FILE}:4:6: tls_certificates[1].cert: unknown key 'cert' (did you mean 'certificate'?)`,
        `${FILE}:5:5: tls_certificates[2]: expected a mapping, got a string`,
      ],
    );
    assert.deepEqual(problems(parse('proxy_address_tls: ":8443"\ntls_certificates: []\n')), [
      `${FILE}:2:19: tls_certificates: is empty; list at least one {certificate, key}`,
    ]);
    assert.deepEqual(problems(parse('tls_certificates: [{certificate: a.crt, key: a.key}]\n')), [
      `${FILE}:1:1: tls_certificates: is set but proxy_address_tls is not, so TLS would stay off`,
    ]);
  });

  it('masterkey and master_key with different values are an error that does not print them', () => {
    const issues = problems(parse('masterkey: first-secret\nmaster_key: second-secret\n'));
    assert.deepEqual(issues, [
      `${FILE}:2:1: master_key: 'masterkey' and its alias 'master_key' are both set, to different values; keep one`,
    ]);
    assert.ok(!/first-secret|second-secret/.test(issues.join('\n')));
  });

  it('an empty masterkey is refused (it would let an empty master_key mint tokens)', () => {
    assert.deepEqual(problems(parse('masterkey: ""\n')), [`${FILE}:1:12: masterkey: must not be empty`]);
  });

  it('duplicate keys name both lines', () => {
    assert.deepEqual(problems(parse('log_level: info\naccess_log: true\nlog_level: debug\n')), [
      `${FILE}:3:1: log_level: duplicate key 'log_level' (first set on line 1)`,
    ]);
  });

  it('a YAML syntax error has a line and column', () => {
    const issues = problems(parse('log_level: info\ntrusted_proxies: [10.0.0.0/8\naccess_log: true\n'));
    assert.equal(issues.length, 1);
    assert.match(issues[0] ?? '', /^\/etc\/tollgate\/main\.yaml:3:1: invalid YAML: /);
  });

  it('a file that is not a mapping', () => {
    assert.deepEqual(problems(parse('- proxy_address_http: ":80"\n')), [
      `${FILE}:1:1: expected a mapping, got a list`,
    ]);
  });

  it('reports every problem at once, in file order', () => {
    const text = yaml`
      proxy_address_http: "0.0.0.0"
      log_levle: debug
      access_log: 1
      trusted_proxies: [nope]
      https_port: 0
    `;
    assert.deepEqual(problems(parse(text)), [
      `${FILE}:1:21: proxy_address_http: '0.0.0.0' has no port; expected host:port, [v6]:port or :port, e.g. 0.0.0.0:8080`,
      `${FILE}:2:1: log_levle: unknown key 'log_levle' (did you mean 'log_level'?)`,
      `${FILE}:3:13: access_log: expected true or false, got a number`,
      `${FILE}:4:19: trusted_proxies[0]: 'nope' is not an IP address or CIDR such as 10.0.0.0/8 or fd00::/8`,
      `${FILE}:5:13: https_port: 0 is out of range (must be >= 1 and <= 65535)`,
    ]);
  });
});

describe('main.yaml: unknown keys far from any known one', () => {
  it('list the known keys once, on the first of them; the others point back at that line', () => {
    const issues = problems(parseMainConfig('log_level: info\ncache_size: 4\ncolour: blue\n', FILE));
    assert.equal(issues.length, 2);
    const known = MAIN_KEYS.toSorted().join(', ');
    assert.equal(issues[0], `${FILE}:2:1: cache_size: unknown key 'cache_size' (known keys: ${known})`);
    assert.equal(
      issues[1],
      `${FILE}:3:1: colour: unknown key 'colour' (the known keys are listed on line 2)`,
    );
  });
});
