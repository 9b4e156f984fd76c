import { isIP } from 'node:net';
import { dirname, resolve } from 'node:path';
import { isScalar, type Node } from 'yaml';
import { parseCidr, parseListenAddress } from './addresses.ts';
import { rememberPosition } from './positions.ts';
import {
  type Http2Limits,
  type KubernetesSettings,
  type ListenAddress,
  type LogLevel,
  MAX_WORKERS,
  type MainConfig,
  type TlsPairFiles,
  type UpstreamLimits,
  type WorkersSetting,
} from './types.ts';
import { readMainCache } from './validate-cache.ts';
import { readClientCertificateSettings } from './validate-client-certificates.ts';
import { OIDC_MAIN_KEYS, readOidcMain } from './validate-oidc.ts';
import { readTracing } from './validate-tracing.ts';
import type { Field, NumberRule, YamlReader } from './yaml-reader.ts';

export const MAIN_KEYS = [
  'proxy_address_http',
  'proxy_address_tls',
  'tls_certificate',
  'tls_key_file',
  'tls_certificates',
  'tls_client_certificates',
  'http2_cleartext',
  'http2',
  'config_address',
  'admin_address',
  'upstreams_conf',
  'log_level',
  'access_log',
  'tracing',
  'masterkey',
  'master_key',
  'masterkey_file',
  'revoked_tokens_file',
  'token_param',
  'max_token_minutes',
  'https_port',
  'trusted_proxies',
  'upstream_connect_timeout_seconds',
  'upstream_response_timeout_seconds',
  'keepalive_timeout_seconds',
  'client_header_timeout_seconds',
  'client_first_byte_timeout_seconds',
  'client_body_timeout_seconds',
  'client_send_timeout_seconds',
  'max_client_connections',
  'upstream_max_connections',
  'upstream_max_connections_per_route',
  'upstream_queue_size',
  'upstream_queue_timeout_seconds',
  'shutdown_delay_seconds',
  'shutdown_grace_seconds',
  'rate_limit_redis',
  'workers',
  'kubernetes',
  'upstream_ca_file',
  'cache',
  ...OIDC_MAIN_KEYS,
] as const;

const HTTP2_KEYS = ['max_concurrent_streams', 'max_header_list_bytes', 'max_resets_per_second'];
export const HTTP2_DEFAULTS: Http2Limits = Object.freeze({
  maxConcurrentStreams: 128,
  maxHeaderListBytes: 16_384,
  maxResetsPerSecond: 100,
});
const KUBERNETES_KEYS = [
  'kubeconfig',
  'namespace',
  'upstreams_configmap',
  'ingress_class',
  'gateway_class',
  'gateway_names',
  'watch_namespaces',
  'publish_service',
  'publish_address',
];
// A namespace is a DNS-1123 label; a ConfigMap name a DNS-1123 subdomain.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'silent'];

const IN_UPSTREAMS_FILE = 'it belongs in upstreams.yaml, the file named by upstreams_conf';
const HEALTH_CHECK_PER_PATH =
  'active health checks are set per path in upstreams.yaml: paths.<prefix>.health_check ' +
  '{path, interval_seconds}';
/** Keys of other files, or of other proxies' main files (Aralez), and where their meaning lives here. */
const MISPLACED_HINTS: Readonly<Record<string, string>> = {
  hc_interval: HEALTH_CHECK_PER_PATH,
  hc_method: HEALTH_CHECK_PER_PATH,
  provider: IN_UPSTREAMS_FILE,
  sticky_sessions: IN_UPSTREAMS_FILE,
  to_https: IN_UPSTREAMS_FILE,
  rate_limit: IN_UPSTREAMS_FILE,
  authorization: IN_UPSTREAMS_FILE,
  upstreams: IN_UPSTREAMS_FILE,
};

/** Longest delay setTimeout honours (2^31-1 ms); anything longer fires at once instead. */
const MAX_SECONDS = 2_147_483;
const TIMEOUT: NumberRule = { min: 0, minExclusive: true, max: MAX_SECONDS };
const DELAY: NumberRule = { min: 0, max: MAX_SECONDS };

/** RFC 3986 unreserved characters: usable in a query string without any encoding. */
const QUERY_PARAM_NAME = /^[A-Za-z0-9._~-]+$/;

export interface MainValidation {
  /** Best effort: fields with problems keep their defaults. Only trustworthy when no issue was found. */
  config: MainConfig;
  /** False when `upstreams_conf` itself was invalid, so the path in `config` is only the default. */
  upstreamsConfKnown: boolean;
  /** `upstreams_conf` as written, or null when it is not set (or not a string). */
  upstreamsConfWritten: string | null;
}

type MainKey = (typeof MAIN_KEYS)[number];

/** Validates main.yaml. `file` is its absolute path: relative paths inside resolve against its dir. */
export function validateMain(r: YamlReader, file: string): MainValidation {
  const dir = dirname(file);
  const root = r.root();
  const fields = r.isNull(root) ? new Map<string, Field>() : r.fields(root, '', MAIN_KEYS, MISPLACED_HINTS);
  const get = (key: MainKey): Field | undefined => r.given(fields, key);
  /** The key's value read by `parse`, or `fallback` when the key is unset (or invalid, then reported). */
  const read = <T, F>(key: MainKey, parse: (field: Field) => T | undefined, fallback: F): T | F => {
    const field = get(key);
    const value = field ? parse(field) : undefined;
    return value === undefined ? fallback : value;
  };
  const listenAddress = (field: Field) => readListenAddress(r, field);
  const filePath = (field: Field) => {
    const value = r.string(field);
    return value === undefined ? undefined : resolve(dir, value);
  };
  const number = (key: MainKey, fallback: number, rule: NumberRule) =>
    read(key, (f) => r.number(f, rule), fallback);
  const milliseconds = (key: MainKey, fallback: number) =>
    Math.max(1, Math.round(number(key, fallback, TIMEOUT) * 1000));

  checkTlsSettings(r, get);
  const positions: Array<[string, Node]> = [];
  const upstreamsConf = read('upstreams_conf', filePath, null);

  const config: MainConfig = {
    file,
    proxyAddressHttp: read('proxy_address_http', listenAddress, { host: '0.0.0.0', port: 8080 }),
    proxyAddressTls: read('proxy_address_tls', listenAddress, null),
    tlsCertificate: read('tls_certificate', filePath, null),
    tlsKeyFile: read('tls_key_file', filePath, null),
    tlsCertificates: read('tls_certificates', (f) => readTlsCertificates(r, f, filePath, positions), []),
    ...optional(
      'tlsClientCertificates',
      read('tls_client_certificates', (f) => readClientCertificateSettings(r, f, filePath, positions), null),
    ),
    http2Cleartext: read('http2_cleartext', (f) => r.boolean(f), false),
    http2: read('http2', (f) => readHttp2Limits(r, f), HTTP2_DEFAULTS),
    configAddress: read('config_address', listenAddress, { host: '0.0.0.0', port: 8081 }),
    adminAddress: read('admin_address', listenAddress, { host: '0.0.0.0', port: 9090 }),
    upstreamsConf: upstreamsConf ?? resolve(dir, 'upstreams.yaml'),
    logLevel: read('log_level', (f) => readLogLevel(r, f), 'info'),
    accessLog: read('access_log', (f) => r.boolean(f), true),
    masterkey: readMasterkey(r, get('masterkey'), get('master_key')),
    masterkeyFile: read('masterkey_file', filePath, null),
    tokenParam: read('token_param', (f) => readTokenParam(r, f), 'tollgatetoken'),
    maxTokenMinutes: number('max_token_minutes', 1440, { integer: true, min: 1 }),
    httpsPort: number('https_port', 443, { integer: true, min: 1, max: 65535 }),
    trustedProxies: read('trusted_proxies', (f) => readTrustedProxies(r, f), []),
    timeouts: {
      upstreamConnectMs: milliseconds('upstream_connect_timeout_seconds', 5),
      upstreamResponseHeadersMs: milliseconds('upstream_response_timeout_seconds', 60),
      clientKeepAliveMs: milliseconds('keepalive_timeout_seconds', 60),
      clientHeadersMs: milliseconds('client_header_timeout_seconds', 30),
      clientFirstByteMs: milliseconds('client_first_byte_timeout_seconds', 10),
      clientBodyIdleMs: milliseconds('client_body_timeout_seconds', 30),
      clientSendMs: milliseconds('client_send_timeout_seconds', 60),
    },
    maxClientConnections: number('max_client_connections', 10_000, { integer: true, min: 1 }),
    upstreamLimits: readUpstreamLimits(r, get, number, milliseconds),
    shutdownDelaySeconds: number('shutdown_delay_seconds', 5, DELAY),
    shutdownGraceSeconds: number('shutdown_grace_seconds', 25, DELAY),
    rateLimitRedis: read('rate_limit_redis', (f) => readRedisUrl(r, f), null),
    // Only when set, so configs without it compare equal to the defaults.
    ...optional('revokedTokensFile', read('revoked_tokens_file', filePath, null)),
    workers: read('workers', (f) => readWorkers(r, f), 1),
    ...optional(
      'kubernetes',
      read('kubernetes', (f) => readKubernetes(r, f, filePath), null),
    ),
    // oidc_providers, session_secret_file, session_max_age_seconds (config/validate-oidc).
    ...readOidcMain(r, get as (key: string) => Field | undefined, dir),
    // Read and checked with the other files main.yaml names (config/file-checks).
    ...optional('upstreamCaFile', read('upstream_ca_file', filePath, null)),
    ...optional(
      'tracing',
      read('tracing', (f) => readTracing(r, f), null),
    ),
    ...optional(
      'cache',
      read('cache', (f) => readMainCache(r, f), null),
    ),
  };
  // Where each tls_certificates file was written, for the file checks run after validation.
  for (const [key, node] of positions) rememberPosition(config, key, { file: r.file, ...r.positionOf(node) });
  return {
    config,
    upstreamsConfKnown: fields !== null && (get('upstreams_conf') === undefined || upstreamsConf !== null),
    upstreamsConfWritten:
      upstreamsConf === null ? null : (read('upstreams_conf', (f) => r.string(f), null) ?? null),
  };
}

/** Connection limits per upstream server; a route's share defaults to three quarters of the total. */
function readUpstreamLimits(
  r: YamlReader,
  get: (key: MainKey) => Field | undefined,
  number: (key: MainKey, fallback: number, rule: NumberRule) => number,
  milliseconds: (key: MainKey, fallback: number) => number,
): UpstreamLimits {
  const perServer = number('upstream_max_connections', 512, { integer: true, min: 1, max: 65_535 });
  const perRoute = number(
    'upstream_max_connections_per_route',
    Math.max(1, Math.floor((perServer * 3) / 4)),
    {
      integer: true,
      min: 1,
      max: 65_535,
    },
  );
  const field = get('upstream_max_connections_per_route');
  if (field !== undefined && perRoute > perServer) {
    r.report(
      r.at(field),
      field.path,
      `${perRoute} is more than upstream_max_connections (${perServer}), so it would never apply`,
    );
  }
  return {
    maxConnectionsPerServer: perServer,
    maxConnectionsPerRoute: Math.min(perRoute, perServer),
    queueSize: number('upstream_queue_size', 256, { integer: true, min: 0, max: 1_000_000 }),
    queueTimeoutMs: milliseconds('upstream_queue_timeout_seconds', 3),
  };
}

function readListenAddress(r: YamlReader, field: Field): ListenAddress | undefined {
  const text = r.string(field);
  if (text === undefined) return undefined;
  const parsed = parseListenAddress(text);
  if (parsed.ok) return parsed.value;
  r.report(r.at(field), field.path, parsed.reason);
  return undefined;
}

/**
 * TLS is on exactly when proxy_address_tls is set, and then needs a certificate: the
 * tls_certificate/tls_key_file pair (both or neither) and/or tls_certificates.
 */
function checkTlsSettings(r: YamlReader, get: (key: MainKey) => Field | undefined): void {
  const address = get('proxy_address_tls');
  const certificate = get('tls_certificate');
  const key = get('tls_key_file');
  const list = get('tls_certificates');
  const clients = get('tls_client_certificates');
  if (address) {
    const missing = [certificate ? null : 'tls_certificate', key ? null : 'tls_key_file'].filter(Boolean);
    // Both unset is fine when tls_certificates lists the certificates; one of the two never is.
    if (missing.length === 1 || (missing.length === 2 && !list)) {
      const alternative = missing.length === 2 ? ' (or tls_certificates)' : '';
      r.report(address.keyNode, address.path, `TLS needs ${missing.join(' and ')}${alternative} as well`);
    }
    return;
  }
  for (const field of [certificate, key, list, clients]) {
    if (field)
      r.report(field.keyNode, field.path, 'is set but proxy_address_tls is not, so TLS would stay off');
  }
}

const TLS_PAIR_KEYS = ['certificate', 'key', 'client_certificates'];

/** `tls_certificates`: a non-empty list of `{certificate, key}` file pairs. */
function readTlsCertificates(
  r: YamlReader,
  field: Field,
  filePath: (field: Field) => string | undefined,
  positions: Array<[string, Node]>,
): TlsPairFiles[] | undefined {
  const items = r.items(field, 'a list of {certificate, key}');
  if (items === null) return undefined;
  if (items.length === 0) {
    r.report(r.at(field), field.path, 'is empty; list at least one {certificate, key}');
    return undefined;
  }
  const pairs: TlsPairFiles[] = [];
  for (const item of items) {
    const fields = r.fields(item.node, item.path, TLS_PAIR_KEYS);
    if (fields === null) continue;
    const path = (name: string) => {
      const entry = fields.get(name);
      if (entry === undefined || r.isNull(entry.node)) {
        r.report(item.node, `${item.path}.${name}`, 'is required');
        return undefined;
      }
      const value = filePath(entry);
      if (value !== undefined && entry.node) positions.push([entry.path, entry.node]);
      return value;
    };
    const certificate = path('certificate');
    const key = path('key');
    const clientsField = fields.get('client_certificates');
    const clients =
      clientsField === undefined || r.isNull(clientsField.node)
        ? null
        : readClientCertificateSettings(r, clientsField, filePath, positions);
    if (certificate !== undefined && key !== undefined && clients !== undefined)
      pairs.push(clients === null ? { certificate, key } : { certificate, key, clientCertificates: clients });
  }
  return pairs;
}

function readLogLevel(r: YamlReader, field: Field): LogLevel | undefined {
  const value = r.string(field);
  if (value === undefined) return undefined;
  const level = LOG_LEVELS.find((candidate) => candidate === value);
  if (level === undefined)
    r.report(r.at(field), field.path, `unknown log level '${value}' (expected ${LOG_LEVELS.join(', ')})`);
  return level;
}

/** `masterkey` and its alias `master_key`: one of them, or both with the same value. */
function readMasterkey(r: YamlReader, masterkey: Field | undefined, alias: Field | undefined): string | null {
  const primary = masterkey ? r.string(masterkey) : undefined;
  const secondary = alias ? r.string(alias) : undefined;
  if (alias && primary !== undefined && secondary !== undefined && primary !== secondary) {
    r.report(
      alias.keyNode,
      alias.path,
      "'masterkey' and its alias 'master_key' are both set, to different values; keep one",
    );
  }
  return primary ?? secondary ?? null;
}

function readTokenParam(r: YamlReader, field: Field): string | undefined {
  const value = r.string(field);
  if (value === undefined || QUERY_PARAM_NAME.test(value)) return value;
  r.report(
    r.at(field),
    field.path,
    `'${value}' is not a usable query parameter name (letters, digits, '.', '_', '~', '-')`,
  );
  return undefined;
}

function readTrustedProxies(r: YamlReader, field: Field): string[] {
  const cidrs: string[] = [];
  for (const item of r.items(field, 'a list of CIDRs such as 10.0.0.0/8') ?? []) {
    const text = r.string(item);
    if (text === undefined) continue;
    const parsed = parseCidr(text);
    if (parsed.ok) cidrs.push(parsed.value);
    else r.report(item.node, item.path, parsed.reason);
  }
  return cidrs;
}

/** The URL may carry a password, so it never appears in a message. */
function readRedisUrl(r: YamlReader, field: Field): string | undefined {
  const value = r.string(field);
  if (value === undefined) return undefined;
  if (!/^rediss?:\/\//.test(value)) {
    r.report(r.at(field), field.path, 'must start with redis:// or rediss://');
    return undefined;
  }
  try {
    if (new URL(value).hostname !== '') return value;
  } catch {
    // reported below
  }
  r.report(r.at(field), field.path, 'is not a valid redis URL (redis://[user:password@]host[:port][/db])');
  return undefined;
}

function optional<K extends string, V>(key: K, value: V | null): { [key in K]?: V } {
  return (value === null ? {} : { [key]: value }) as { [key in K]?: V };
}

/** `workers`: a count of processes, or `auto` (docs/workers.md). */
function readWorkers(r: YamlReader, field: Field): WorkersSetting | undefined {
  const node = field.node;
  if (isScalar(node) && node.value === 'auto') return 'auto';
  if (isScalar(node) && typeof node.value === 'string') {
    r.report(node, field.path, `expected a number of workers or 'auto', got '${node.value}'`);
    return undefined;
  }
  return r.number(field, { integer: true, min: 1, max: MAX_WORKERS });
}

/** The `http2:` block: each key optional, the rest keep their defaults. */
function readHttp2Limits(r: YamlReader, field: Field): Http2Limits | undefined {
  const fields = r.fields(field.node, field.path, HTTP2_KEYS);
  if (fields === null) return undefined;
  const value = (key: string, fallback: number, rule: NumberRule): number => {
    const entry = fields.get(key);
    if (entry === undefined || r.isNull(entry.node)) return fallback;
    return r.number(entry, rule) ?? fallback;
  };
  return {
    // RFC 9113 §6.5.2: a 31-bit value; below 1 no request could ever be made.
    maxConcurrentStreams: value('max_concurrent_streams', HTTP2_DEFAULTS.maxConcurrentStreams, {
      integer: true,
      min: 1,
      max: 2 ** 31 - 1,
    }),
    maxHeaderListBytes: value('max_header_list_bytes', HTTP2_DEFAULTS.maxHeaderListBytes, {
      integer: true,
      min: 1024,
      max: 1_048_576,
    }),
    maxResetsPerSecond: value('max_resets_per_second', HTTP2_DEFAULTS.maxResetsPerSecond, {
      integer: true,
      min: 1,
      max: 100_000,
    }),
  };
}

/** The `kubernetes:` block (docs/kubernetes.md): where the API credentials and the config come from. */
function readKubernetes(
  r: YamlReader,
  field: Field,
  filePath: (field: Field) => string | undefined,
): KubernetesSettings | undefined {
  const fields = r.fields(field.node, field.path, KUBERNETES_KEYS);
  if (fields === null) return undefined;
  const name = (key: string, pattern: RegExp, what: string): string | null => {
    const entry = fields.get(key);
    if (entry === undefined || r.isNull(entry.node)) return null;
    const value = r.string(entry);
    if (value === undefined) return null;
    if (!pattern.test(value)) r.report(r.at(entry), entry.path, `'${value}' is not ${what}`);
    return value;
  };
  const kubeconfig = fields.get('kubeconfig');
  const publishAddressField = fields.get('publish_address');
  if (fields.has('publish_service') && publishAddressField !== undefined) {
    r.report(
      publishAddressField.keyNode,
      publishAddressField.path,
      'set publish_service or publish_address, not both',
    );
  }
  return {
    kubeconfig: kubeconfig && !r.isNull(kubeconfig.node) ? (filePath(kubeconfig) ?? null) : null,
    namespace: name(
      'namespace',
      DNS_LABEL,
      'a namespace name (lower-case letters, digits and -, at most 63)',
    ),
    upstreamsConfigMap: name(
      'upstreams_configmap',
      DNS_SUBDOMAIN,
      'a ConfigMap name (lower-case letters, digits, - and ., at most 253)',
    ),
    ingressClass: name(
      'ingress_class',
      DNS_SUBDOMAIN,
      'an IngressClass name (lower-case letters, digits, - and ., at most 253)',
    ),
    gatewayClass: name(
      'gateway_class',
      DNS_SUBDOMAIN,
      'a GatewayClass name (lower-case letters, digits, - and ., at most 253)',
    ),
    gatewayNames: readGatewayNames(r, fields.get('gateway_names'), fields.has('gateway_class')),
    watchNamespaces: stringList(r, fields.get('watch_namespaces'), (value) =>
      DNS_LABEL.test(value) ? null : `'${value}' is not a namespace name`,
    ),
    publishService: readPublishService(r, fields.get('publish_service')),
    publishAddress: stringList(r, fields.get('publish_address'), (value) =>
      isIP(value) !== 0 || DNS_SUBDOMAIN.test(value)
        ? null
        : `'${value}' is neither an IP address nor a host name`,
    ),
  };
}

/**
 * `gateway_names`: the Gateways (`namespace/name`) this deployment serves, of `gateway_class`
 * (docs/gateway-api.md#one-deployment-per-gateway); null = every Gateway of the class.
 */
function readGatewayNames(r: YamlReader, field: Field | undefined, hasClass: boolean): string[] | null {
  if (field !== undefined && !r.isNull(field.node) && !hasClass)
    r.report(field.keyNode, field.path, 'needs gateway_class: it narrows the Gateways of that class');
  return stringList(r, field, (value) => {
    const [namespace, name, ...rest] = value.split('/');
    return rest.length === 0 &&
      namespace !== undefined &&
      DNS_LABEL.test(namespace) &&
      name !== undefined &&
      DNS_SUBDOMAIN.test(name)
      ? null
      : `'${value}' is not namespace/name of a Gateway`;
  });
}

/** A non-empty list of distinct strings, each checked by `problem`; null when absent. */
function stringList(
  r: YamlReader,
  field: Field | undefined,
  problem: (value: string) => string | null,
): string[] | null {
  if (field === undefined || r.isNull(field.node)) return null;
  const items = r.items(field);
  if (items === null) return null;
  if (items.length === 0) {
    r.report(r.at(field), field.path, 'must list at least one entry (leave the key out for the default)');
    return null;
  }
  const values: string[] = [];
  for (const item of items) {
    const value = r.string(item);
    if (value === undefined) continue;
    const message = problem(value) ?? (values.includes(value) ? `'${value}' is listed twice` : null);
    if (message) r.report(item.node, item.path, message);
    else values.push(value);
  }
  return values;
}

/** `publish_service: namespace/name`. */
function readPublishService(
  r: YamlReader,
  field: Field | undefined,
): { namespace: string; name: string } | null {
  if (field === undefined || r.isNull(field.node)) return null;
  const value = r.string(field);
  if (value === undefined) return null;
  const [namespace, name, extra] = value.split('/');
  if (extra !== undefined || !namespace || !name || !DNS_LABEL.test(namespace) || !DNS_LABEL.test(name)) {
    r.report(r.at(field), field.path, `'${value}' is not a Service written 'namespace/name'`);
    return null;
  }
  return { namespace, name };
}
