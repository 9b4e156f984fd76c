import { type X509Certificate as Certificate, createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { parseDocument } from 'yaml';
import { issueAt } from './positions.ts';
import { readErrorReason } from './read-error.ts';
import type { ClientCertificateSettings, ConfigIssue, MainConfig, UpstreamsConfig } from './types.ts';

/**
 * The files the config names and the running process reads (docs/configuration.md "What validate
 * checks"): each has ONE reader here, which both the checks below (run by `validate`, `start` and
 * every upstreams.yaml reload, through config/load) and the runtime code that loads the file at start
 * or on rotation call. So a config that validates starts, and `validate` cannot drift from `start`.
 *
 * Adding a file read at runtime: write its reader here (throwing FileCheckError with the config key
 * and a message naming the file), call it from the runtime code, and add one entry to
 * RUNTIME_FILE_CHECKS. The masterkey_file is decided by config/masterkey (the same resolver runs at
 * load and in the running process) and checked there.
 */

/** A file named by the config that cannot be used; `key` is the config key naming it. */
export class FileCheckError extends Error {
  override name = 'FileCheckError';
  readonly key: string;
  constructor(key: string, message: string) {
    super(message);
    this.key = key;
  }
}

function readBytes(key: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new FileCheckError(key, `cannot read ${path}: ${readErrorReason(error)}`);
  }
}

/** `revoked_tokens_file` as bytes (parsed by auth/revocation); throws when it cannot be read. */
export function readRevokedTokensFile(path: string): Buffer {
  return readBytes('revoked_tokens_file', path);
}

/** Which config keys name a TLS pair's two files, for messages and positions. */
export interface TlsPairNames {
  certFile: string;
  keyFile: string;
  certKey: string;
  keyKey: string;
  /** Its client-certificate check and the key of the block that sets it (its own, or the listener's default). */
  clientCertificates?: { settings: ClientCertificateSettings; key: string } | null;
}

/** A client-certificate check's files as a handshake uses them (docs/authentication.md#client-certificates). */
export interface ClientCaFiles {
  ca: Buffer;
  crl: Buffer | null;
  /** Each CRL of `crl` (OpenSSL would read only the first of one buffer). */
  crls: string[];
  /** The certificates of `ca`, parsed: to measure a verified chain's depth. */
  authorities: Certificate[];
}

/**
 * The CA bundle and CRL of a client-certificate check (`key` names its block): every certificate of
 * the bundle parses, and OpenSSL accepts the bundle and the CRL as a context's trust store.
 */
export function readClientCaFiles(settings: ClientCertificateSettings, key: string): ClientCaFiles {
  const ca = readBytes(`${key}.ca_file`, settings.caFile);
  const crl = settings.crlFile === null ? null : readBytes(`${key}.crl_file`, settings.crlFile);
  return checkClientCaFiles(ca, crl, settings, key);
}

/** The checks of readClientCaFiles on bytes already read (a reload reads them through the watcher). */
export function checkClientCaFiles(
  ca: Buffer,
  crl: Buffer | null,
  settings: ClientCertificateSettings,
  key: string,
): ClientCaFiles {
  const blocks = parseCaBundle(ca.toString('utf8'), settings.caFile, `${key}.ca_file`);
  const crls = crl === null ? [] : (crl.toString('utf8').match(PEM_CRL) ?? []);
  if (crl !== null) {
    try {
      if (crls.length === 0) throw new Error('no -----BEGIN X509 CRL----- block');
      createSecureContext({ ca, crl: crls });
    } catch (error) {
      throw new FileCheckError(
        `${key}.crl_file`,
        `${settings.crlFile} holds no CRL OpenSSL accepts (PEM, -----BEGIN X509 CRL-----): ${(error as Error).message}`,
      );
    }
  }
  return { ca, crl, crls, authorities: blocks.map((block) => new X509Certificate(block)) };
}

/**
 * Everything a handshake will need, so a start and a reload are all-or-nothing: the certificate
 * parses, the key parses (an empty key does NOT make createSecureContext throw), the key matches the
 * certificate, and OpenSSL accepts the pair as a context. Messages never contain key material.
 */
export function checkTlsPair(cert: Buffer, key: Buffer, names: TlsPairNames): Certificate {
  let x509: Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new FileCheckError(names.certKey, `${names.certFile} holds no PEM certificate that can be parsed`);
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new FileCheckError(names.keyKey, `${names.keyFile} holds no PEM private key that can be parsed`);
  }
  if (!x509.checkPrivateKey(privateKey)) {
    throw new FileCheckError(
      names.keyKey,
      `the private key in ${names.keyFile} does not match the certificate in ${names.certFile}`,
    );
  }
  try {
    createSecureContext({ cert, key });
  } catch (error) {
    throw new FileCheckError(
      names.certKey,
      `${names.certFile} and ${names.keyFile} are refused by OpenSSL: ${(error as Error).message}`,
    );
  }
  return x509;
}

/** Reads and checks a TLS pair from its files. */
export function readTlsPair(names: TlsPairNames): { cert: Buffer; key: Buffer; x509: Certificate } {
  const cert = readBytes(names.certKey, names.certFile);
  const key = readBytes(names.keyKey, names.keyFile);
  return { cert, key, x509: checkTlsPair(cert, key, names) };
}

/** Every TLS pair main.yaml names, with the keys that name its files. */
export function tlsPairsOf(main: MainConfig): TlsPairNames[] {
  if (!main.proxyAddressTls) return [];
  const pairs: TlsPairNames[] = [];
  const listenerDefault = main.tlsClientCertificates
    ? { settings: main.tlsClientCertificates, key: 'tls_client_certificates' }
    : null;
  if (main.tlsCertificate && main.tlsKeyFile) {
    pairs.push({
      certFile: main.tlsCertificate,
      keyFile: main.tlsKeyFile,
      certKey: 'tls_certificate',
      keyKey: 'tls_key_file',
      clientCertificates: listenerDefault,
    });
  }
  // Configs built in code (tests, workers) may predate the key.
  (main.tlsCertificates ?? []).forEach((pair, index) => {
    const own = pair.clientCertificates ?? null;
    pairs.push({
      certFile: pair.certificate,
      keyFile: pair.key,
      certKey: `tls_certificates[${index}].certificate`,
      keyKey: `tls_certificates[${index}].key`,
      clientCertificates:
        own === null
          ? listenerDefault
          : { settings: own, key: `tls_certificates[${index}].client_certificates` },
    });
  });
  return pairs;
}

/** A `jwks_file`: JSON holding a JSON Web Key Set (`{"keys": [...]}`). */
export function readJwksFile(path: string): JSONWebKeySet {
  const bytes = readBytes('jwks_file', path);
  let jwks: unknown;
  try {
    jwks = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new FileCheckError('jwks_file', `${path} is not JSON`);
  }
  try {
    createLocalJWKSet(jwks as JSONWebKeySet);
  } catch {
    throw new FileCheckError('jwks_file', `${path} is not a JSON Web Key Set ({"keys": [...]})`);
  }
  return jwks as JSONWebKeySet;
}

const PEM_CRL = /-----BEGIN X509 CRL-----[\s\S]+?-----END X509 CRL-----/g;
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * A CA bundle trusted for upstream TLS (`upstream_ca_file`, a path's `upstream_tls.ca_file`): every
 * PEM certificate in it, each parsed; `key` is the config key naming the file.
 */
export function parseCaBundle(text: string, path: string, key: string): string[] {
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0)
    throw new FileCheckError(key, `${path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch {
      throw new FileCheckError(key, `${path} holds a certificate that cannot be parsed`);
    }
  }
  return blocks;
}

/** Reads and checks a CA bundle for upstream TLS. */
export function readCaBundle(path: string, key: string): string[] {
  return parseCaBundle(readBytes(key, path).toString('utf8'), path, key);
}

/** The client certificate and key of a path's `upstream_tls` (mTLS), read and checked as a pair. */
export function readUpstreamClientPair(certFile: string, keyFile: string): { cert: Buffer; key: Buffer } {
  const names = { certFile, keyFile, certKey: 'certificate', keyKey: 'key' };
  const cert = readBytes(names.certKey, certFile);
  const key = readBytes(names.keyKey, keyFile);
  checkTlsPair(cert, key, names);
  return { cert, key };
}

/**
 * `kubernetes.kubeconfig`, checked as far as a start needs it before it talks to the API: readable,
 * YAML, its entries shaped as the Kubernetes client library requires them (each cluster a name and a
 * server, each context a name and a cluster, each user a name), and a current context naming one of
 * its clusters. Read with `yaml`, never with the client library, so `validate` and processes that do
 * not use the API never load it (docs/architecture.md); sources/kubernetes/kubeconfig calls this
 * before handing the file to the library. Messages never quote the file: it holds credentials.
 */
export function checkKubeconfigFile(path: string): void {
  const key = 'kubernetes.kubeconfig';
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new FileCheckError(key, `kubeconfig ${path} does not exist`);
    throw new FileCheckError(key, `cannot read kubeconfig ${path}: ${readErrorReason(error)}`);
  }
  const document = parseDocument(text);
  const error = document.errors[0];
  if (error !== undefined) {
    // The parser's message quotes the offending source line: only where it is may be said.
    const where = error.linePos?.[0];
    throw new FileCheckError(key, `kubeconfig ${path} is not YAML${where ? ` (line ${where.line})` : ''}`);
  }
  const config: unknown = document.toJS({ maxAliasCount: 100 });
  const fail = (problem: string) => new FileCheckError(key, `kubeconfig ${path}: ${problem}`);
  if (!isRecord(config)) throw fail('is not a mapping');
  const list = (name: string): Record<string, unknown>[] => {
    const entries = config[name];
    // As the client library reads it: anything but a list counts as none.
    if (!Array.isArray(entries)) return [];
    return entries.map((entry, index) => {
      if (!isRecord(entry) || !entry.name) throw fail(`${name}[${index}].name is missing`);
      return entry;
    });
  };
  const clusters = list('clusters');
  clusters.forEach((entry, index) => {
    if (!isRecord(entry.cluster)) throw fail(`clusters[${index}].cluster is missing`);
    if (!entry.cluster.server) throw fail(`clusters[${index}].cluster.server is missing`);
  });
  const contexts = list('contexts');
  contexts.forEach((entry, index) => {
    if (!isRecord(entry.context)) throw fail(`contexts[${index}].context is missing`);
    if (!entry.context.cluster) throw fail(`contexts[${index}].context.cluster is missing`);
  });
  list('users');
  const current = contexts.find((entry) => entry.name === config['current-context']);
  const cluster = isRecord(current?.context) ? current.context.cluster : undefined;
  if (!clusters.some((entry) => entry.name === cluster)) throw fail('the current context names no cluster');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Whether a start talks to the API and so reads `kubernetes.kubeconfig` (the rule of
 * sources/kubernetes/use.ts, which config/ may not import); `upstreams` is null when upstreams.yaml
 * could not be read, and then only main.yaml decides.
 */
function readsKubeconfig(main: MainConfig, upstreams: UpstreamsConfig | null): boolean {
  return (
    upstreams?.provider === 'kubernetes' ||
    Boolean(main.kubernetes?.upstreamsConfigMap) ||
    Boolean(main.kubernetes?.ingressClass)
  );
}

/** Shortest session secret accepted: 32 bytes, the AES-256 key size (docs/configuration.md). */
export const MIN_SESSION_SECRET_BYTES = 32;

/**
 * `session_secret_file`: one secret a line, each at least 32 bytes; the first seals new sessions,
 * every line opens them (a rotation adds the new one on top). Blank lines and `#` comments are skipped.
 */
export function readSessionSecrets(path: string): Buffer[] {
  const lines = readBytes('session_secret_file', path)
    .toString('utf8')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  if (lines.length === 0)
    throw new FileCheckError('session_secret_file', `${path} holds no secret (one a line, each >= 32 bytes)`);
  lines.forEach((line, index) => {
    if (Buffer.byteLength(line) < MIN_SESSION_SECRET_BYTES)
      throw new FileCheckError(
        'session_secret_file',
        `secret ${index + 1} in ${path} is shorter than ${MIN_SESSION_SECRET_BYTES} bytes (openssl rand -base64 48 makes one)`,
      );
  });
  return lines.map((line) => Buffer.from(line));
}

/** An OpenID provider's `client_secret_file`: its text, trimmed, not empty. */
export function readClientSecret(path: string): string {
  const secret = readBytes('client_secret_file', path).toString('utf8').trim();
  if (secret === '') throw new FileCheckError('client_secret_file', `${path} is empty`);
  return secret;
}

export interface RuntimeFileCheck {
  /** What it checks, as docs/configuration.md lists it. */
  readonly name: string;
  /**
   * Which file's keys name the files: `main` checks run when both files load (validate, start);
   * `upstreams` checks also run on every upstreams.yaml change (file or ConfigMap), so a reload that
   * names a broken file is refused and the old config keeps serving.
   */
  readonly in: 'main' | 'upstreams';
  /**
   * Every problem, each an issue at the line of the key naming the file. `upstreams` is null for a
   * `main` check run while upstreams.yaml itself has problems (validate reports both in one pass).
   */
  readonly check: (main: MainConfig, upstreams: UpstreamsConfig | null) => ConfigIssue[];
}

/** Runs `read`; a FileCheckError becomes one issue at `owner`'s `key` (its recorded position). */
function attempt(owner: object, fallbackFile: string, read: () => unknown, path?: (key: string) => string) {
  try {
    read();
    return [];
  } catch (error) {
    if (!(error instanceof FileCheckError)) throw error;
    return [issueAt(owner, error.key, fallbackFile, error.message, path?.(error.key))];
  }
}

/** The registry: one entry per kind of file read at runtime. */
export const RUNTIME_FILE_CHECKS: readonly RuntimeFileCheck[] = [
  {
    name: 'revoked_tokens_file',
    in: 'main',
    check: (main) =>
      main.revokedTokensFile
        ? attempt(main, main.file, () => readRevokedTokensFile(main.revokedTokensFile as string))
        : [],
  },
  {
    name: 'TLS certificate and key pairs',
    in: 'main',
    check: (main) => tlsPairsOf(main).flatMap((pair) => attempt(main, main.file, () => readTlsPair(pair))),
  },
  {
    name: 'client certificate CA bundles and CRLs',
    in: 'main',
    check: (main) => {
      // Each block once, though the listener's default serves several pairs.
      const blocks = new Map(
        tlsPairsOf(main).flatMap((pair) =>
          pair.clientCertificates
            ? [[pair.clientCertificates.key, pair.clientCertificates.settings] as const]
            : [],
        ),
      );
      return [...blocks].flatMap(([key, settings]) =>
        attempt(main, main.file, () => readClientCaFiles(settings, key)),
      );
    },
  },
  {
    // A path's upstream_tls files are read by validation itself (config/validate-upstreams), at their line.
    name: 'upstream_ca_file',
    in: 'main',
    check: (main) =>
      main.upstreamCaFile
        ? attempt(main, main.file, () => readCaBundle(main.upstreamCaFile as string, 'upstream_ca_file'))
        : [],
  },
  {
    name: 'kubernetes.kubeconfig',
    in: 'main',
    check: (main, upstreams) => {
      const file = main.kubernetes?.kubeconfig;
      return file && readsKubeconfig(main, upstreams)
        ? attempt(main, main.file, () => checkKubeconfigFile(file))
        : [];
    },
  },
  {
    name: 'session_secret_file',
    in: 'main',
    check: (main) =>
      main.sessionSecretFile
        ? attempt(main, main.file, () => readSessionSecrets(main.sessionSecretFile as string))
        : [],
  },
  {
    name: "OpenID providers' client_secret_file",
    in: 'main',
    check: (main) =>
      Object.values(main.oidcProviders ?? {}).flatMap((provider) =>
        attempt(
          provider,
          main.file,
          () => readClientSecret(provider.clientSecretFile),
          () => `oidc_providers.${provider.name}.client_secret_file`,
        ),
      ),
  },
  {
    name: "OpenID providers' ca_file",
    in: 'main',
    check: (main) =>
      Object.values(main.oidcProviders ?? {}).flatMap((provider) =>
        provider.caFile
          ? attempt(
              provider,
              main.file,
              () => readCaBundle(provider.caFile as string, 'ca_file'),
              () => `oidc_providers.${provider.name}.ca_file`,
            )
          : [],
      ),
  },
];

/** The problems of the files `scope`'s checks cover (config/load runs both), in registry order. */
export function checkRuntimeFiles(
  main: MainConfig,
  upstreams: UpstreamsConfig | null,
  scope: RuntimeFileCheck['in'],
): ConfigIssue[] {
  return RUNTIME_FILE_CHECKS.filter((entry) => entry.in === scope).flatMap((entry) =>
    entry.check(main, upstreams),
  );
}
