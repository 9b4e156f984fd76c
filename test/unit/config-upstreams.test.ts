import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { parseUpstreamsConfig } from '../../src/config/load.ts';
import type { UpstreamsConfig } from '../../src/config/types.ts';
import { problems, valid, yaml } from '../fixtures/config/problems.ts';

const FILE = 'upstreams.yaml';
const parse = (text: string) => parseUpstreamsConfig(text, FILE);
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The path fields these files never write, at the values the first test spells out. */
const UNWRITTEN = {
  exact: false,
  unavailable: null,
  stickySessions: null,
  origin: null,
  upstreamTls: null,
  upstreamProtocol: 'auto',
  policies: null,
  timeouts: null,
  upstreamHost: null,
  redirect: null,
  canary: null,
  conditions: null,
  backendError: null,
  backendErrorShare: null,
  requestRedirect: null,
  retry: null,
  mirrors: null,
} as const;

const MINIMAL = 'upstreams:\n  DEFAULT:\n    paths:\n      /:\n        servers: ["127.0.0.1:3000"]\n';

describe('upstreams.yaml: valid files', () => {
  it('a minimal file gets every default', () => {
    const config = valid(parse(MINIMAL));
    assert.deepEqual(config, {
      file: `${process.cwd()}/upstreams.yaml`,
      hash: sha256(MINIMAL),
      provider: 'file',
      masterkey: null,
      stickySessions: null,
      toHttps: false,
      rateLimit: null,
      authorization: null,
      requestHeaders: null,
      responseHeaders: null,
      authFailureLimit: null,
      maxBodyBytes: null,
      hosts: [
        {
          name: 'DEFAULT',
          paths: [
            {
              prefix: '/',
              servers: [{ raw: '127.0.0.1:3000', host: '127.0.0.1', port: 3000 }],
              service: null,
              toHttps: false,
              authorization: null,
              rateLimit: null,
              healthCheck: null,
              exact: false,
              unavailable: null,
              stickySessions: null,
              origin: null,
              requestHeaders: null,
              responseHeaders: null,
              redirectTo: null,
              authFailureLimit: null,
              upstreamTls: null,
              upstreamProtocol: 'auto',
              policies: null,
              timeouts: null,
              upstreamHost: null,
              redirect: null,
              canary: null,
              conditions: null,
              backendError: null,
              backendErrorShare: null,
              requestRedirect: null,
              retry: null,
              mirrors: null,
            },
          ],
        },
      ],
    } satisfies UpstreamsConfig);
  });

  it('reads every key, in file order', () => {
    const text = yaml`
      provider: file
      masterkey: s3cret
      sticky_sessions: 3600
      to_https: true
      rate_limit: 12
      authorization:
        type: basic
        creds: "admin:pa:ss"
      upstreams:
        api.example.com:
          paths:
            /v1:
              servers: ["10.0.0.1:8080", "[fd00::1]:8080", "api-v1.default.svc.cluster.local:80"]
              to_https: true
              rate_limit: 5
              health_check: { path: /healthz, interval_seconds: 2.5 }
              authorization: { type: api, data: k3y }
            /:
              servers: ["10.0.0.9:80"]
        DEFAULT:
          paths:
            /:
              servers: ["127.0.0.1:3000"]
              health_check: { path: /ping }
    `;
    const config = valid(parse(text));
    assert.deepEqual(config, {
      file: `${process.cwd()}/upstreams.yaml`,
      hash: sha256(text),
      provider: 'file',
      masterkey: 's3cret',
      stickySessions: { maxAgeSeconds: 3600 },
      toHttps: true,
      rateLimit: 12,
      authorization: {
        type: 'basic',
        users: [{ username: 'admin', password: 'pa:ss', passwordHash: null }],
        keys: [],
      },
      requestHeaders: null,
      responseHeaders: null,
      authFailureLimit: null,
      maxBodyBytes: null,
      hosts: [
        {
          name: 'api.example.com',
          paths: [
            {
              prefix: '/v1',
              servers: [
                { raw: '10.0.0.1:8080', host: '10.0.0.1', port: 8080 },
                { raw: '[fd00::1]:8080', host: 'fd00::1', port: 8080 },
                {
                  raw: 'api-v1.default.svc.cluster.local:80',
                  host: 'api-v1.default.svc.cluster.local',
                  port: 80,
                },
              ],
              service: null,
              toHttps: true,
              authorization: { type: 'apikey', users: [], keys: [{ name: 'apikey', key: 'k3y' }] },
              rateLimit: 5,
              healthCheck: { path: '/healthz', intervalSeconds: 2.5 },
              requestHeaders: null,
              responseHeaders: null,
              redirectTo: null,
              authFailureLimit: null,
              ...UNWRITTEN,
            },
            {
              prefix: '/',
              servers: [{ raw: '10.0.0.9:80', host: '10.0.0.9', port: 80 }],
              service: null,
              toHttps: false,
              authorization: null,
              rateLimit: null,
              healthCheck: null,
              requestHeaders: null,
              responseHeaders: null,
              redirectTo: null,
              authFailureLimit: null,
              ...UNWRITTEN,
            },
          ],
        },
        {
          name: 'DEFAULT',
          paths: [
            {
              prefix: '/',
              servers: [{ raw: '127.0.0.1:3000', host: '127.0.0.1', port: 3000 }],
              service: null,
              toHttps: false,
              authorization: null,
              rateLimit: null,
              healthCheck: { path: '/ping', intervalSeconds: 10 },
              requestHeaders: null,
              responseHeaders: null,
              redirectTo: null,
              authFailureLimit: null,
              ...UNWRITTEN,
            },
          ],
        },
      ],
    } satisfies UpstreamsConfig);
  });

  it('sticky_sessions: true is a session cookie, false is off', () => {
    assert.deepEqual(valid(parse(`sticky_sessions: true\n${MINIMAL}`)).stickySessions, {
      maxAgeSeconds: null,
    });
    assert.equal(valid(parse(`sticky_sessions: false\n${MINIMAL}`)).stickySessions, null);
  });

  it('host keys are normalised the way routing normalises a Host header; DEFAULT keeps its spelling', () => {
    const text = yaml`
      upstreams:
        API.Example.COM.:
          paths: { /: { servers: ["a:1"] } }
        "[FD00::1]":
          paths: { /: { servers: ["a:1"] } }
        "10.0.0.1":
          paths: { /: { servers: ["a:1"] } }
        DEFAULT:
          paths: { /: { servers: ["a:1"] } }
    `;
    assert.deepEqual(
      valid(parse(text)).hosts.map((host) => host.name),
      ['api.example.com', 'fd00::1', '10.0.0.1', 'DEFAULT'],
    );
  });

  it('anchors and aliases are followed', () => {
    const text = yaml`
      upstreams:
        a.example.com:
          paths:
            /: &backend { servers: ["10.0.0.1:80"], to_https: true }
        b.example.com:
          paths:
            /: *backend
    `;
    const hosts = valid(parse(text)).hosts;
    assert.deepEqual(hosts[1]?.paths[0], hosts[0]?.paths[0]);
    assert.equal(hosts[1]?.paths[0]?.toHttps, true);
  });

  it('hash is the sha256 of the text, so an unchanged file is recognised on reload', () => {
    assert.equal(valid(parse(MINIMAL)).hash, sha256(MINIMAL));
    assert.notEqual(valid(parse(`${MINIMAL}# comment\n`)).hash, sha256(MINIMAL));
  });
});

describe('upstreams.yaml: each kind of error names file:line:column and path', () => {
  it("a misspelt 'authorization' is an error with a suggestion, never silently no auth", () => {
    const text = yaml`
      authorisation:
        type: basic
        creds: "admin:secret"
      upstreams:
        api.example.com:
          paths:
            /v1:
              servers: ["10.0.0.1:80"]
              authorisation: { type: jwt }
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:1:1: authorisation: unknown key 'authorisation' (did you mean 'authorization'?)",
      "upstreams.yaml:9:9: upstreams.api.example.com.paths./v1.authorisation: unknown key 'authorisation' (did you mean 'authorization'?)",
    ]);
  });

  it('keys at the wrong level say where they belong', () => {
    const text = yaml`
      log_level: debug
      upstreams:
        api.example.com:
          servers: ["10.0.0.1:80"]
          paths:
            /:
              servers: ["10.0.0.1:80"]
              sticky_sessions: true
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:1:1: log_level: unknown key 'log_level' (it belongs in main.yaml)",
      "upstreams.yaml:4:5: upstreams.api.example.com.servers: unknown key 'servers' (did you forget 'paths:'? servers belongs in paths.<prefix>)",
      "upstreams.yaml:8:9: upstreams.api.example.com.paths./.sticky_sessions: unknown key 'sticky_sessions' (it is a global setting, written at the top of upstreams.yaml)",
    ]);
  });

  it('wrong types', () => {
    const text = yaml`
      to_https: "yes"
      rate_limit: fast
      upstreams:
        api.example.com:
          paths:
            /:
              servers: "10.0.0.1:80"
              to_https: 1
    `;
    assert.deepEqual(problems(parse(text)), [
      'upstreams.yaml:1:11: to_https: expected true or false, got a string',
      'upstreams.yaml:2:13: rate_limit: expected an integer, got a string',
      'upstreams.yaml:7:18: upstreams.api.example.com.paths./.servers: expected a list of servers such as ["10.0.0.5:8080"], got a string',
      'upstreams.yaml:8:19: upstreams.api.example.com.paths./.to_https: expected true or false, got a number',
    ]);
  });

  it('bad server addresses, in every form, each pointing at its list index', () => {
    const text = yaml`
      upstreams:
        api.example.com:
          paths:
            /v1:
              servers:
                - "10.0.0.1:80"
                - "10.0.0.1"
                - "::1:8080"
                - "[::1]:0"
                - "[10.0.0.1]:80"
                - "http://10.0.0.1:80"
                - "10.0.0.256:80"
                - "bad_host!.local:80"
                - "-leading.dash:80"
                - "host:65536"
                - ":80"
                - 8080
    `;
    const at = 'upstreams.api.example.com.paths./v1.servers';
    assert.deepEqual(problems(parse(text)), [
      `upstreams.yaml:7:13: ${at}[1]: '10.0.0.1' has no port; expected ip:port, [v6]:port or hostname:port, e.g. 10.0.0.5:8080`,
      `upstreams.yaml:8:13: ${at}[2]: '::1:8080': IPv6 addresses need brackets, e.g. [::1]:8080`,
      `upstreams.yaml:9:13: ${at}[3]: '[::1]:0': port must be a number from 1 to 65535`,
      `upstreams.yaml:10:13: ${at}[4]: '[10.0.0.1]:80': '10.0.0.1' in brackets is not an IPv6 address`,
      `upstreams.yaml:11:13: ${at}[5]: 'http://10.0.0.1:80': only https:// may be written; a plain server is host:port, e.g. 10.0.0.5:8080`,
      `upstreams.yaml:12:13: ${at}[6]: '10.0.0.256:80': '10.0.0.256' is neither an IP address nor a valid host name`,
      `upstreams.yaml:13:13: ${at}[7]: 'bad_host!.local:80': 'bad_host!.local' is neither an IP address nor a valid host name`,
      `upstreams.yaml:14:13: ${at}[8]: '-leading.dash:80': '-leading.dash' is neither an IP address nor a valid host name`,
      `upstreams.yaml:15:13: ${at}[9]: 'host:65536': port must be a number from 1 to 65535`,
      `upstreams.yaml:16:13: ${at}[10]: ':80' has no host`,
      `upstreams.yaml:17:13: ${at}[11]: expected a string, got a number (quote the value if it is meant as text)`,
    ]);
  });

  it('the same server twice in one list', () => {
    const text = 'upstreams:\n  a:\n    paths:\n      /:\n        servers: ["web:80", "WEB:80"]\n';
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:5:29: upstreams.a.paths./.servers[1]: server 'WEB:80' is listed twice",
    ]);
  });

  it('empty or missing servers', () => {
    const text = yaml`
      upstreams:
        a.example.com:
          paths:
            /empty:
              servers: []
            /null:
              servers:
            /missing:
              to_https: true
    `;
    assert.deepEqual(problems(parse(text)), [
      'upstreams.yaml:5:18: upstreams.a.example.com.paths./empty.servers: is empty: a path needs at least one server',
      'upstreams.yaml:7:9: upstreams.a.example.com.paths./null.servers: is empty: a path needs at least one server',
      "upstreams.yaml:8:7: upstreams.a.example.com.paths./missing: missing 'servers'",
    ]);
  });

  it("path keys must start with '/' and be distinct prefixes once normalised", () => {
    const text = yaml`
      upstreams:
        a.example.com:
          paths:
            v1:
              servers: ["a:1"]
            /v2:
              servers: ["a:1"]
            /v2/:
              servers: ["a:1"]
            /x%2Fy:
              servers: ["a:1"]
            /z;v=1:
              servers: ["a:1"]
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:4:7: upstreams.a.example.com.paths.v1: path 'v1' must start with '/'",
      "upstreams.yaml:8:7: upstreams.a.example.com.paths./v2/: path '/v2/' is the same prefix as '/v2' on line 6 (both are /v2 when matching)",
      "upstreams.yaml:10:7: upstreams.a.example.com.paths./x%2Fy: path '/x%2Fy' is not a valid path (an encoded slash or a backslash)",
      "upstreams.yaml:12:7: upstreams.a.example.com.paths./z;v=1: path '/z;v=1' must not contain ';'",
    ]);
  });

  it('unknown provider', () => {
    assert.deepEqual(problems(parse(`provider: consul\n${MINIMAL}`)), [
      "upstreams.yaml:1:11: provider: 'consul' is not supported: use 'kubernetes' (paths name a Service with 'service:') or 'file' (paths list 'servers')",
    ]);
  });

  it('sticky_sessions must be a boolean or a positive number of seconds', () => {
    assert.deepEqual(problems(parse(`sticky_sessions: 0\n${MINIMAL}`)), [
      'upstreams.yaml:1:18: sticky_sessions: 0 is out of range (must be >= 1)',
    ]);
    assert.deepEqual(problems(parse(`sticky_sessions: "on"\n${MINIMAL}`)), [
      'upstreams.yaml:1:18: sticky_sessions: expected true, false or a number of seconds, got a string',
    ]);
  });

  it('rate_limit must be a whole number of requests per second, at least 1', () => {
    assert.deepEqual(problems(parse(`rate_limit: 0\n${MINIMAL}`)), [
      'upstreams.yaml:1:13: rate_limit: 0 is out of range (must be >= 1)',
    ]);
    assert.deepEqual(problems(parse(`rate_limit: 2.5\n${MINIMAL}`)), [
      'upstreams.yaml:1:13: rate_limit: expected an integer, got 2.5',
    ]);
  });

  it('health_check needs a path starting with / and a positive interval', () => {
    const text = yaml`
      upstreams:
        a:
          paths:
            /:
              servers: ["a:1"]
              health_check: { path: healthz, interval_seconds: 0, timeout: 1 }
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:6:31: upstreams.a.paths./.health_check.path: 'healthz' must start with '/'",
      'upstreams.yaml:6:58: upstreams.a.paths./.health_check.interval_seconds: 0 is out of range (must be > 0 and <= 2147483)',
      "upstreams.yaml:6:61: upstreams.a.paths./.health_check.timeout: unknown key 'timeout' (known keys: path, interval_seconds)",
    ]);
  });

  it('host keys: case-insensitive duplicates, a mis-capitalised DEFAULT, a port, a bad name', () => {
    const text = yaml`
      upstreams:
        api.example.com:
          paths: { /: { servers: ["a:1"] } }
        API.example.com:
          paths: { /: { servers: ["a:1"] } }
        Default:
          paths: { /: { servers: ["a:1"] } }
        "api.example.com:8080":
          paths: { /: { servers: ["a:1"] } }
        "*.example.com":
          paths: { /: { servers: ["a:1"] } }
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:4:3: upstreams.API.example.com: host 'API.example.com' is the same host as 'api.example.com' on line 2 (both are api.example.com when matching the Host header)",
      "upstreams.yaml:6:3: upstreams.Default: 'Default': the catch-all host is spelled 'DEFAULT' (capitals)",
      "upstreams.yaml:8:3: upstreams.api.example.com:8080: 'api.example.com:8080': host keys have no port (the port is ignored when matching the Host header)",
      "upstreams.yaml:10:3: upstreams.*.example.com: '*.example.com': is neither a host name nor an IP address",
    ]);
  });

  it('host keys are canonical: IPv6 spellings, IPv4-mapped IPv6 and a trailing dot are one host', () => {
    const text = yaml`
      upstreams:
        ::1:
          paths: { /: { servers: ["a:1"] } }
        0::1:
          paths: { /: { servers: ["a:1"] } }
        "[0:0:0:0:0:0:0:1]":
          paths: { /: { servers: ["a:1"] } }
        127.0.0.1:
          paths: { /: { servers: ["a:1"] } }
        "[::ffff:127.0.0.1]":
          paths: { /: { servers: ["a:1"] } }
        localhost.:
          paths: { /: { servers: ["a:1"] } }
        LOCALHOST:
          paths: { /: { servers: ["a:1"] } }
        "localhost..":
          paths: { /: { servers: ["a:1"] } }
        "a..b":
          paths: { /: { servers: ["a:1"] } }
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:4:3: upstreams.0::1: host '0::1' is the same host as '::1' on line 2 (both are ::1 when matching the Host header)",
      "upstreams.yaml:6:3: upstreams.[0:0:0:0:0:0:0:1]: host '[0:0:0:0:0:0:0:1]' is the same host as '::1' on line 2 (both are ::1 when matching the Host header)",
      "upstreams.yaml:10:3: upstreams.[::ffff:127.0.0.1]: host '[::ffff:127.0.0.1]' is the same host as '127.0.0.1' on line 8 (both are 127.0.0.1 when matching the Host header)",
      "upstreams.yaml:14:3: upstreams.LOCALHOST: host 'LOCALHOST' is the same host as 'localhost.' on line 12 (both are localhost when matching the Host header)",
      "upstreams.yaml:16:3: upstreams.localhost..: 'localhost..': is not a host name: at most one trailing dot",
      "upstreams.yaml:18:3: upstreams.a..b: 'a..b': is neither a host name nor an IP address",
    ]);
  });

  it('the validated config carries host keys and prefixes in routing form', () => {
    const text = yaml`
      upstreams:
        "[2001:DB8:0:0:0:0:0:1]":
          paths:
            /v1//:
              servers: ["a:1"]
            /café:
              servers: ["a:1"]
        Api.Example.COM.:
          paths:
            /a/./b/../c/:
              servers: ["a:1"]
    `;
    const config = valid(parse(text));
    assert.deepEqual(
      config.hosts.map((host) => [host.name, host.paths.map((path) => path.prefix)]),
      [
        ['2001:db8::1', ['/v1', '/caf%C3%A9']],
        ['api.example.com', ['/a/c']],
      ],
    );
  });

  it('servers: two spellings of one IPv6 address are listed twice', () => {
    const text = yaml`
      upstreams:
        a:
          paths:
            /:
              servers: ["[::1]:80", "[0:0::1]:80"]
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:5:31: upstreams.a.paths./.servers[1]: server '[0:0::1]:80' is listed twice",
    ]);
  });

  it('at least one host (or `upstreams: {}` on purpose), and at least one path per host', () => {
    assert.deepEqual(problems(parse('provider: file\n')), [
      "upstreams.yaml:1:1: missing 'upstreams': at least one host is needed",
    ]);
    assert.deepEqual(problems(parse('upstreams:\n')), [
      'upstreams.yaml:1:1: upstreams: has no hosts: name at least one, or write `upstreams: {}` when Ingresses or Gateway API routes serve every host',
    ]);
    // Every host from Ingresses or Gateway API routes: an empty map, written on purpose, is valid.
    assert.deepEqual(valid(parse('upstreams: {}\n')).hosts, []);
    assert.deepEqual(problems(parse('upstreams:\n  a:\n    paths: {}\n')), [
      'upstreams.yaml:3:5: upstreams.a.paths: has no paths: at least one is needed',
    ]);
    assert.deepEqual(problems(parse('')), [
      "upstreams.yaml:1:1: the file is empty: 'upstreams' with at least one host is needed",
    ]);
  });

  it('duplicate keys', () => {
    const text = yaml`
      upstreams:
        a:
          paths:
            /:
              servers: ["a:1"]
              to_https: true
              servers: ["b:1"]
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:7:9: upstreams.a.paths./.servers: duplicate key 'servers' (first set on line 5)",
    ]);
  });

  it('YAML syntax errors are reported with their position', () => {
    const issues = problems(
      parse('upstreams:\n  a:\n    paths:\n     /: {servers: ["a:1"]}\n    /x: 1\n  b: [\n'),
    );
    assert.ok(issues.length >= 1);
    for (const issue of issues) assert.match(issue, /^upstreams\.yaml:\d+:\d+: invalid YAML: /);
  });

  it('reports every problem of the file at once, in file order', () => {
    const text = yaml`
      provider: files
      sticky_sessions: -1
      upstreams:
        api.example.com:
          paths:
            /v1:
              servers: ["10.0.0.1:80", "10.0.0.2"]
              authorization: { type: oauth }
            v2:
              servers: []
    `;
    assert.deepEqual(problems(parse(text)), [
      "upstreams.yaml:1:11: provider: unknown provider 'files' (expected 'file' or 'kubernetes')",
      'upstreams.yaml:2:18: sticky_sessions: -1 is out of range (must be >= 1)',
      "upstreams.yaml:7:34: upstreams.api.example.com.paths./v1.servers[1]: '10.0.0.2' has no port; expected ip:port, [v6]:port or hostname:port, e.g. 10.0.0.5:8080",
      "upstreams.yaml:8:32: upstreams.api.example.com.paths./v1.authorization.type: unknown authorization type 'oauth' (expected basic, apikey, api, jwt, forward, oidc, client_certificate or ext_authz)",
      "upstreams.yaml:9:7: upstreams.api.example.com.paths.v2: path 'v2' must start with '/'",
      'upstreams.yaml:10:18: upstreams.api.example.com.paths.v2.servers: is empty: a path needs at least one server',
    ]);
  });
});
