import { isIP } from 'node:net';
import { dirname, resolve } from 'node:path';
import { isMap, isScalar } from 'yaml';
import { POLICY_KEYS } from '../policy/request-policies.ts';
import {
  canonicalIPv6,
  DEFAULT_HOST,
  isHostname,
  normaliseHostKey,
  normalisePrefix,
} from '../routing/normalise.ts';
import { parseServerAddress } from './addresses.ts';
import { FileCheckError, readCaBundle, readUpstreamClientPair } from './file-checks.ts';
import { pathConfig } from './path-config.ts';
import { parseServiceRef, type ServiceRef } from './service-ref.ts';
import {
  type HealthCheckConfig,
  type HostConfig,
  type PathConfig,
  type ServerAddress,
  type StickySessions,
  UPSTREAM_PROTOCOLS,
  type UpstreamProtocol,
  type UpstreamsConfig,
  type UpstreamTlsConfig,
} from './types.ts';
import { validateAuthorization } from './validate-auth.ts';
import {
  BACKEND_PATH_KEYS,
  checkWeights,
  readBackendPolicies,
  readWeightedServer,
} from './validate-backend.ts';
import { readHttpUrl } from './validate-forward.ts';
import { HEADER_RULE_KEYS, readHeaderRules } from './validate-headers.ts';
import { MAIN_KEYS } from './validate-main.ts';
import { readMaxBodyBytes, readPathPolicies } from './validate-policies.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

const TOP_KEYS = [
  'provider',
  'masterkey',
  'sticky_sessions',
  'to_https',
  'rate_limit',
  'authorization',
  'auth_failure_limit',
  ...HEADER_RULE_KEYS,
  'max_body_bytes',
  'upstreams',
];
const HOST_KEYS = ['paths'];
const PATH_KEYS = [
  'servers',
  'service',
  'to_https',
  'redirect_to',
  'authorization',
  'auth_failure_limit',
  'rate_limit',
  'health_check',
  ...HEADER_RULE_KEYS,
  'upstream_tls',
  'upstream_protocol',
  ...POLICY_KEYS,
  ...BACKEND_PATH_KEYS,
];
const HEALTH_CHECK_KEYS = ['path', 'interval_seconds'];
const UPSTREAM_TLS_KEYS = ['ca_file', 'server_name', 'certificate', 'key', 'verify'];

const PROVIDERS = ['file', 'kubernetes'] as const;
const DEFAULT_HEALTH_CHECK_INTERVAL_SECONDS = 10;
const MAX_SECONDS = 2_147_483;

/** Hints for keys written at the wrong level, the most likely mistakes in a nested file. */
const TOP_HINTS = Object.freeze({
  ...Object.fromEntries(MAIN_KEYS.map((key) => [key, 'it belongs in main.yaml'])),
  servers: 'servers belong in a path: upstreams.<host>.paths.<prefix>.servers',
  health_check: 'it belongs in a path: upstreams.<host>.paths.<prefix>.health_check',
  paths: 'paths belong under a host: upstreams.<host>.paths',
});
const GLOBAL_ONLY = 'it is a global setting, written at the top of upstreams.yaml';
const HOST_HINTS = Object.freeze({
  ...Object.fromEntries(
    PATH_KEYS.map((key) => [key, `did you forget 'paths:'? ${key} belongs in paths.<prefix>`]),
  ),
  provider: GLOBAL_ONLY,
  masterkey: GLOBAL_ONLY,
  sticky_sessions: GLOBAL_ONLY,
});
const PATH_HINTS = Object.freeze({
  provider: GLOBAL_ONLY,
  masterkey: GLOBAL_ONLY,
  sticky_sessions: GLOBAL_ONLY,
});

/** An upstreams config with no routes and every global setting at its default. */
export function emptyUpstreamsConfig(
  file: string,
  hash: string,
  provider: UpstreamsConfig['provider'],
): UpstreamsConfig {
  return {
    file,
    hash,
    provider,
    masterkey: null,
    stickySessions: null,
    toHttps: false,
    rateLimit: null,
    authorization: null,
    requestHeaders: null,
    responseHeaders: null,
    authFailureLimit: null,
    maxBodyBytes: null,
    hosts: [],
  };
}

/** Validates upstreams.yaml into the domain config; best effort when issues were reported. */
export function validateUpstreams(r: YamlReader, file: string, hash: string): UpstreamsConfig {
  const config = emptyUpstreamsConfig(file, hash, 'file');
  const root = r.root();
  if (r.isNull(root)) {
    r.report(null, '', "the file is empty: 'upstreams' with at least one host is needed");
    return config;
  }
  const fields = r.fields(root, '', TOP_KEYS, TOP_HINTS);
  if (fields === null) return config;
  const get = (key: string): Field | undefined => r.given(fields, key);

  const provider = get('provider');
  if (provider) config.provider = readProvider(r, provider);
  const masterkey = get('masterkey');
  if (masterkey) config.masterkey = r.string(masterkey) ?? null;
  const sticky = get('sticky_sessions');
  if (sticky) config.stickySessions = readStickySessions(r, sticky);
  const toHttps = get('to_https');
  if (toHttps) config.toHttps = r.boolean(toHttps) ?? false;
  const rateLimit = get('rate_limit');
  if (rateLimit) config.rateLimit = readRateLimit(r, rateLimit);
  const authorization = fields.get('authorization');
  if (authorization) config.authorization = validateAuthorization(r, authorization);
  const failureLimit = get('auth_failure_limit');
  if (failureLimit) config.authFailureLimit = readAuthFailureLimit(r, failureLimit);
  Object.assign(config, readHeaderRules(r, fields));
  const maxBody = get('max_body_bytes');
  if (maxBody) config.maxBodyBytes = readMaxBodyBytes(r, maxBody) ?? null;

  const upstreams = fields.get('upstreams');
  if (upstreams === undefined) r.report(root, '', "missing 'upstreams': at least one host is needed");
  else {
    config.hosts = readHosts(r, upstreams, config.provider);
    const size = compiledSize(config);
    if (size > MAX_COMPILED_SIZE)
      r.report(
        upstreams.keyNode,
        'upstreams',
        `the routing table would hold ${size} route servers (hosts × paths × servers), more than ${MAX_COMPILED_SIZE}: ` +
          'refused (blocks repeated by alias count once per use)',
      );
  }
  return config;
}

/**
 * The most route servers (each path of each host, times its servers; a `service:` path counts once)
 * one config may compile to (docs/security.md, "Config files"): bounds compile time and memory.
 */
export const MAX_COMPILED_SIZE = 50_000;

/** The route servers `config` compiles to, as MAX_COMPILED_SIZE counts them. */
export function compiledSize(config: UpstreamsConfig): number {
  let size = 0;
  for (const host of config.hosts) for (const path of host.paths) size += Math.max(1, path.servers.length);
  return size;
}

function readProvider(r: YamlReader, field: Field): UpstreamsConfig['provider'] {
  const value = r.string(field);
  const known = PROVIDERS.find((provider) => provider === value);
  if (known !== undefined) return known;
  if (value === 'consul') {
    r.report(
      r.at(field),
      field.path,
      "'consul' is not supported: use 'kubernetes' (paths name a Service with 'service:') " +
        "or 'file' (paths list 'servers')",
    );
  } else if (value !== undefined) {
    r.report(r.at(field), field.path, `unknown provider '${value}' (expected 'file' or 'kubernetes')`);
  }
  return 'file';
}

/** `true` = session cookie, a number = cookie Max-Age in seconds, `false` = off. */
function readStickySessions(r: YamlReader, field: Field): StickySessions | null {
  const value = isScalar(field.node) ? field.node.value : undefined;
  if (typeof value === 'boolean') return value ? { maxAgeSeconds: null } : null;
  if (typeof value === 'number') {
    const seconds = r.number(field, { integer: true, min: 1 });
    return seconds === undefined ? null : { maxAgeSeconds: seconds };
  }
  r.report(
    r.at(field),
    field.path,
    `expected true, false or a number of seconds, got ${r.describe(field.node)}`,
  );
  return null;
}

// Whole requests per second: the limiter counts whole requests in one-second windows, so 0.5 would
// refuse everything and 1.5 would behave as 1.
function readRateLimit(r: YamlReader, field: Field): number | null {
  return r.number(field, { integer: true, min: 1 }) ?? null;
}

/** Failed authentications per client IP per host per minute (docs/configuration.md#auth_failure_limit). */
function readAuthFailureLimit(r: YamlReader, field: Field): number | null {
  return r.number(field, { integer: true, min: 1, max: 100_000 }) ?? null;
}

/**
 * `redirect_to`: an absolute http(s) URL with no query; the request path and query are appended, so a
 * trailing `/` is dropped (`https://new.example.com/` + `/a` is `https://new.example.com/a`).
 */
function readRedirectTo(r: YamlReader, field: Field): string | null {
  const url = readHttpUrl(r, field);
  if (url === undefined) return null;
  if (url.includes('?')) {
    r.report(r.at(field), field.path, 'must not have a query: the request path and query are appended to it');
    return null;
  }
  return url.endsWith('/') ? url.slice(0, -1) : url;
}

function readHosts(r: YamlReader, field: Field, provider: UpstreamsConfig['provider']): HostConfig[] {
  if (r.isNull(field.node)) {
    r.report(
      field.keyNode,
      field.path,
      'has no hosts: name at least one, or write `upstreams: {}` when Ingresses or Gateway API routes serve every host',
    );
    return [];
  }
  // `upstreams: {}` is a setup whose hosts all come from Ingresses or Gateway API routes
  // (docs/gateway-api.md, docs/ingress.md): no placeholder host is needed.
  const entries = r.entries(field.node, field.path);
  if (entries === null) return [];
  const hosts: HostConfig[] = [];
  // Keyed by routing form, so the duplicate check is one lookup per host whatever the file's size.
  const seen = new Map<string, Field>();
  for (const entry of entries) {
    const normalised = normaliseHostKey(entry.key);
    if (!normalised.ok) {
      r.report(entry.keyNode, entry.path, `'${entry.key}': ${normalised.reason}`);
      continue;
    }
    const name = normalised.value;
    const first = seen.get(name);
    if (first !== undefined) {
      r.report(
        entry.keyNode,
        entry.path,
        `host '${entry.key}' is the same host as '${first.key}' on line ${r.lineOf(first.keyNode)}` +
          (name === DEFAULT_HOST ? '' : ` (both are ${name} when matching the Host header)`),
      );
      continue;
    }
    seen.set(name, entry);
    hosts.push({ name, paths: readHost(r, entry, provider) });
  }
  return hosts;
}

function readHost(r: YamlReader, host: Field, provider: UpstreamsConfig['provider']): PathConfig[] {
  if (r.isNull(host.node)) {
    r.report(host.keyNode, host.path, "is empty: a host needs 'paths'");
    return [];
  }
  const fields = r.fields(host.node, host.path, HOST_KEYS, HOST_HINTS);
  if (fields === null) return [];
  const paths = fields.get('paths');
  if (paths === undefined) {
    r.report(host.keyNode, host.path, "missing 'paths'");
    return [];
  }
  const entries = r.isNull(paths.node) ? [] : r.entries(paths.node, paths.path);
  if (entries === null) return [];
  if (entries.length === 0) r.report(paths.keyNode, paths.path, 'has no paths: at least one is needed');
  const seen = new Map<string, Field>();
  const result: PathConfig[] = [];
  for (const entry of entries) {
    const normalised = normalisePrefix(entry.key);
    if (!normalised.ok) {
      r.report(entry.keyNode, entry.path, `path '${entry.key}' ${normalised.reason}`);
      readPath(r, entry, '', provider); // its settings are still checked, so one run reports every problem
      continue;
    }
    const prefix = normalised.value;
    const first = seen.get(prefix);
    if (first !== undefined) {
      r.report(
        entry.keyNode,
        entry.path,
        `path '${entry.key}' is the same prefix as '${first.key}' on line ${r.lineOf(first.keyNode)}` +
          ` (both are ${prefix} when matching)`,
      );
    } else seen.set(prefix, entry);
    const path = readPath(r, entry, prefix, provider);
    if (path && first === undefined) result.push(path);
  }
  return result;
}

/** `prefix` is the key in routing form. */
function readPath(
  r: YamlReader,
  entry: Field,
  prefix: string,
  provider: UpstreamsConfig['provider'],
): PathConfig | undefined {
  if (r.isNull(entry.node)) {
    r.report(entry.keyNode, entry.path, "is empty: a path needs 'servers'");
    return undefined;
  }
  const fields = r.fields(entry.node, entry.path, PATH_KEYS, PATH_HINTS);
  if (fields === null) return undefined;
  const get = (key: string): Field | undefined => r.given(fields, key);

  const serversField = fields.get('servers');
  const serviceField = fields.get('service');
  const redirectField = get('redirect_to');
  // A path that only redirects needs no server.
  const redirects = redirectField !== undefined || get('redirect') !== undefined;
  if (serversField === undefined && serviceField === undefined && !redirects) {
    r.report(
      entry.keyNode,
      entry.path,
      provider === 'kubernetes' ? "missing 'servers' or 'service'" : "missing 'servers'",
    );
  }
  if (serversField !== undefined && serviceField !== undefined) {
    r.report(serviceField.keyNode, serviceField.path, "a path takes 'servers' or 'service', not both");
  }
  const toHttps = get('to_https');
  const rateLimit = get('rate_limit');
  const authorization = fields.get('authorization');
  const healthCheck = get('health_check');
  const tlsField = get('upstream_tls');
  const protocolField = get('upstream_protocol');
  const servers = serversField ? readServers(r, serversField) : [];
  const upstreamTls = tlsField ? readUpstreamTls(r, tlsField) : null;
  const upstreamProtocol = protocolField ? readUpstreamProtocol(r, protocolField) : 'auto';
  // Listed servers say themselves whether they speak TLS; a service's endpoints do when upstream_tls is set.
  const anyTls = serviceField !== undefined ? tlsField !== undefined : servers.some((server) => server.tls);
  if (tlsField && serversField && servers.length > 0 && !anyTls) {
    r.report(
      tlsField.keyNode,
      tlsField.path,
      'applies to https:// servers, and this path lists none: write the servers as https://host:port',
    );
  }
  if (protocolField && upstreamProtocol === 'h2c' && anyTls) {
    r.report(
      r.at(protocolField),
      protocolField.path,
      'h2c is HTTP/2 without TLS, but this path has TLS servers: use h2 (or auto) for those',
    );
  }
  const failureLimit = get('auth_failure_limit');
  return pathConfig(prefix, {
    servers,
    service: serviceField ? readService(r, serviceField, provider) : null,
    toHttps: (toHttps && r.boolean(toHttps)) ?? false,
    authorization: authorization ? validateAuthorization(r, authorization) : null,
    rateLimit: rateLimit ? readRateLimit(r, rateLimit) : null,
    healthCheck: healthCheck ? readHealthCheck(r, healthCheck) : null,
    redirectTo: redirectField ? readRedirectTo(r, redirectField) : null,
    authFailureLimit: failureLimit ? readAuthFailureLimit(r, failureLimit) : null,
    ...readHeaderRules(r, fields),
    upstreamTls,
    upstreamProtocol,
    ...readPathPolicies(r, fields),
    ...readBackendPolicies(r, fields),
  });
}

function readUpstreamProtocol(r: YamlReader, field: Field): UpstreamProtocol {
  const value = r.string(field);
  const known = UPSTREAM_PROTOCOLS.find((protocol) => protocol === value);
  if (known !== undefined) return known;
  if (value !== undefined) {
    r.report(
      r.at(field),
      field.path,
      `unknown protocol '${value}' (expected ${UPSTREAM_PROTOCOLS.join(', ')})`,
    );
  }
  return 'auto';
}

/**
 * `upstream_tls: { ca_file, server_name, certificate, key, verify }`. The files are read and checked
 * now (docs/traffic.md#tls-to-upstreams), so a missing or broken one stops the start, `validate` or
 * the reload with its line; they are read again whenever they change.
 */
function readUpstreamTls(r: YamlReader, field: Field): UpstreamTlsConfig | null {
  if (!isMap(field.node)) {
    r.report(
      r.at(field),
      field.path,
      `expected { ca_file, server_name, certificate, key, verify }, got ${r.describe(field.node)}`,
    );
    return null;
  }
  const fields = r.fields(field.node, field.path, UPSTREAM_TLS_KEYS);
  if (fields === null) return null;
  const get = (key: string): Field | undefined => r.given(fields, key);
  const caField = get('ca_file');
  const nameField = get('server_name');
  const certField = get('certificate');
  const keyField = get('key');
  const verifyField = get('verify');
  const verify = verifyField ? (r.boolean(verifyField) ?? true) : true;

  const caFile = caField ? checkedPath(r, caField, (path) => readCaBundle(path, 'ca_file')) : null;
  if (caField && verifyField && !verify) {
    r.report(caField.keyNode, caField.path, 'is not used with verify: false; remove one of them');
  }
  let serverName: string | null = null;
  if (nameField) {
    const name = r.string(nameField);
    if (name !== undefined && (isIP(name) !== 0 || isHostname(name))) serverName = name.toLowerCase();
    else if (name !== undefined)
      r.report(r.at(nameField), nameField.path, `'${name}' is neither a host name nor an IP address`);
  }
  let certificateFile: string | null = null;
  let keyFile: string | null = null;
  if ((certField === undefined) !== (keyField === undefined)) {
    const [given, missing] = certField ? [certField, 'key'] : [keyField as Field, 'certificate'];
    r.report(given.keyNode, given.path, `a client certificate needs '${missing}' as well`);
  } else if (certField && keyField) {
    certificateFile = pathOf(r, certField);
    keyFile = pathOf(r, keyField);
    if (certificateFile !== null && keyFile !== null) {
      const pair = { certificate: certField, key: keyField };
      try {
        readUpstreamClientPair(certificateFile, keyFile);
      } catch (error) {
        if (!(error instanceof FileCheckError)) throw error;
        const at = error.key === 'key' ? pair.key : pair.certificate;
        r.report(r.at(at), at.path, error.message);
      }
    }
  }
  return { caFile, serverName, certificateFile, keyFile, verify };
}

/** The absolute path a file key names, relative paths resolving against upstreams.yaml's directory. */
function pathOf(r: YamlReader, field: Field): string | null {
  const value = r.string(field);
  return value === undefined ? null : resolve(dirname(r.file), value);
}

/** Reads the file now with the reader the running process uses; the absolute path, or null when reported. */
function checkedPath(r: YamlReader, field: Field, read: (path: string) => unknown): string | null {
  const path = pathOf(r, field);
  if (path === null) return null;
  try {
    read(path);
  } catch (error) {
    if (!(error instanceof FileCheckError)) throw error;
    r.report(r.at(field), field.path, error.message);
    return null;
  }
  return path;
}

/** `service: "<name>[.<namespace>]:<port or port name>"`, checked offline (docs/kubernetes.md). */
function readService(r: YamlReader, field: Field, provider: UpstreamsConfig['provider']): ServiceRef | null {
  const text = r.string(field);
  if (text === undefined) return null;
  if (provider !== 'kubernetes') {
    r.report(r.at(field), field.path, "'service' needs 'provider: kubernetes' at the top of upstreams.yaml");
    return null;
  }
  const parsed = parseServiceRef(text);
  if (parsed.ok) return parsed.ref;
  r.report(r.at(field), field.path, parsed.message);
  return null;
}

function readServers(r: YamlReader, field: Field): ServerAddress[] {
  if (r.isAbsentOrEmpty(field)) {
    r.report(r.at(field), field.path, 'is empty: a path needs at least one server');
    return [];
  }
  const servers: ServerAddress[] = [];
  const seen = new Set<string>();
  for (const item of r.items(field, 'a list of servers such as ["10.0.0.5:8080"]') ?? []) {
    const weighted = isMap(item.node) ? readWeightedServer(r, item) : null;
    const text = weighted === null ? r.string(item) : weighted?.text;
    if (text === undefined) continue;
    const parsed = parseServerAddress(text);
    if (!parsed.ok) {
      r.report(item.node, item.path, parsed.reason);
      continue;
    }
    const { host, port } = parsed.value;
    const identity = `${host.includes(':') ? canonicalIPv6(host) : host.toLowerCase()}|${port}`;
    if (seen.has(identity)) {
      r.report(item.node, item.path, `server '${text}' is listed twice`);
      continue;
    }
    seen.add(identity);
    servers.push(weighted ? { ...parsed.value, weight: weighted.weight } : parsed.value);
  }
  checkWeights(r, field, servers);
  return servers;
}

/**
 * `{path, interval_seconds}`, or `false` for "no active checks" (the default, spelled out as configs
 * written for Aralez do with `healthcheck: false`). `true` has no path to probe, so it is refused.
 */
function readHealthCheck(r: YamlReader, field: Field): HealthCheckConfig | null {
  if (isScalar(field.node) && typeof field.node.value === 'boolean') {
    if (!field.node.value) return null;
    r.report(
      r.at(field),
      field.path,
      'true is not enough: give the path to probe, e.g. { path: /healthz, interval_seconds: 10 } (false or no key: no active checks)',
    );
    return null;
  }
  if (!isMap(field.node)) {
    r.report(
      r.at(field),
      field.path,
      `expected { path, interval_seconds } or false, got ${r.describe(field.node)}`,
    );
    return null;
  }
  const fields = r.fields(field.node, field.path, HEALTH_CHECK_KEYS);
  if (fields === null) return null;
  const pathField = fields.get('path');
  const intervalField = fields.get('interval_seconds');
  let path: string | undefined;
  if (pathField === undefined || r.isNull(pathField.node))
    r.report(field.keyNode, field.path, "missing 'path'");
  else {
    path = r.string(pathField);
    if (path !== undefined && !path.startsWith('/')) {
      r.report(r.at(pathField), pathField.path, `'${path}' must start with '/'`);
      path = undefined;
    }
  }
  const interval =
    intervalField && !r.isNull(intervalField.node)
      ? r.number(intervalField, { min: 0, minExclusive: true, max: MAX_SECONDS })
      : DEFAULT_HEALTH_CHECK_INTERVAL_SECONDS;
  if (path === undefined || interval === undefined) return null;
  return { path, intervalSeconds: interval };
}
