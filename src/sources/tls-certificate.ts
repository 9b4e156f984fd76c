import type { X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { SecureServerOptions } from 'node:http2';
import type { Server as TlsServer } from 'node:tls';
import {
  checkClientCaFiles,
  checkTlsPair,
  readClientCaFiles,
  readTlsPair,
  type TlsPairNames,
} from '../config/file-checks.ts';
import { sha256Hex } from '../config/load.ts';
import {
  type ClientCertificatePolicy,
  connectionPolicyKey,
  createClientVerification,
} from '../listeners/client-certificates.ts';
import type { Logger } from '../log.ts';
import { recordCertificateExpiry } from '../observe/certificates.ts';
import { CertificateStore, type ServedCertificate, servedCertificate } from './certificate-store.ts';
import type { FileWatcher } from './files.ts';

/**
 * The certificates of the TLS listener, each pair reloaded when its files change
 * (docs/traffic.md#tls-listener, #several-certificates).
 *
 * The files are usually a mounted `kubernetes.io/tls` Secret, which the kubelet replaces through the
 * same atomic `..data` symlink swap as a ConfigMap; the shared file watcher sees it. The first pair
 * is the listener's default (set with `server.setSecureContext()`); every pair is in the SNI store
 * under its names. A change applies from the next handshake; connections already established keep
 * theirs. A pair whose new files do not load (unparsable, key not matching the certificate, half
 * written) is logged and counted, and its previous copy keeps serving; the other pairs still rotate.
 */

/** The `file` label of the reload metrics and the name in logs, for tls_certificate/tls_key_file. */
export const TLS_METRIC_NAME = 'tls_certificate';

/** The store's source for main.yaml's pairs; other sources (Kubernetes Secrets) use their own. */
export const FILES_SOURCE = 'files';

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  /** The client-certificate check's trust store, when the pair has one. */
  ca?: Buffer;
  crl?: string[];
}

export type TlsContextProviderOptions = (
  | { certFile: string; keyFile: string }
  | { pairs: readonly TlsPairNames[] }
) & { logger: Logger };

export interface TlsContextProvider {
  /** The default pair's material; pass it to the server with `SNICallback: store.sniCallback`. */
  current(): TlsMaterial;
  /**
   * Everything the TLS server is created with: the default pair, the SNI callback and, when a pair
   * has a client-certificate check, the options that make handshakes ask for one.
   */
  serverOptions(): SecureServerOptions;
  /**
   * A request whose host's client-certificate check is not the one its connection's server name
   * chose (HTTP/2 connection reuse, or an SNI that differs from the Host): it must be answered 421.
   */
  misdirected(req: IncomingMessage): boolean;
  /** Every certificate the listener chooses from by SNI; other sources may add theirs. */
  readonly store: CertificateStore;
  /** Servers whose default context is replaced when the first pair reloads. */
  attach(server: TlsServer): void;
  /** Registers every pair's files with the file watcher: from now on changes are applied. */
  watch(files: FileWatcher): Promise<void>;
  /** Forgets the attached servers. */
  close(): void;
}

interface LoadedPair extends TlsMaterial {
  served: ServedCertificate;
  summary: CertificateSummary;
  policy: ClientCertificatePolicy | null;
}

interface CertificateSummary {
  subject: string;
  names: readonly string[];
  validTo: string;
  fingerprint256: string;
}

/**
 * Loads every pair once, synchronously, and throws when one is unusable: at start-up a broken
 * certificate is a fatal configuration error (fail closed), only reloads fall back to the old one.
 */
export function createTlsContextProvider(options: TlsContextProviderOptions): TlsContextProvider {
  const { logger } = options;
  const pairs: readonly TlsPairNames[] =
    'pairs' in options
      ? options.pairs
      : [
          {
            certFile: options.certFile,
            keyFile: options.keyFile,
            certKey: 'tls_certificate',
            keyKey: 'tls_key_file',
          },
        ];
  if (pairs.length === 0) throw new Error('no TLS certificate is configured');
  // The reader and checks validation uses (config/file-checks): a pair that validated loads here.
  const live: LoadedPair[] = pairs.map((names) => {
    const read = readTlsPair(names);
    const clients = names.clientCertificates ?? null;
    const pair = loaded(
      read.cert,
      read.key,
      read.x509,
      clients === null ? null : policyOf(clients, readClientCaFiles(clients.settings, clients.key)),
    );
    recordCertificateExpiry(metricName(names), pair.summary);
    logger.info({ certificate: pair.summary, certFile: names.certFile }, 'TLS certificate loaded');
    return pair;
  });
  const store = new CertificateStore();
  const publish = () =>
    store.set(
      FILES_SOURCE,
      live.map((pair) => pair.served),
    );
  publish();
  const servers = new Set<TlsServer>();
  const defaultMaterial = (): TlsMaterial => {
    const { cert, key, ca, crl } = live[0] as LoadedPair;
    return { cert, key, ...(ca === undefined ? {} : { ca }), ...(crl === undefined ? {} : { crl }) };
  };
  const defaultPolicy = () => (live[0] as LoadedPair).policy;
  const verification = createClientVerification({
    anyPolicy: pairs.some((names) => names.clientCertificates),
    defaultPolicy,
    logger,
  });
  // setSecureContext() rebuilds the server's own context from these options alone: without
  // secureOptions, a reload of the first pair would turn session tickets back on.
  // Kubernetes-sourced checks (Ingress auth-tls-*, Gateway frontend validation) arrive in the store
  // later: the first one turns checking on, and tickets off, from the next handshake.
  store.onChange(() => {
    if (store.anyClientCertificates && verification.enforce())
      for (const server of servers) server.setSecureContext(defaultContext());
  });
  const defaultContext = () => ({
    ...defaultMaterial(),
    ...(verification.serverOptions === null
      ? {}
      : { secureOptions: verification.serverOptions.secureOptions }),
  });
  /**
   * The certificate a handshake for `name` is served, null for the default pair. A catch-all (`*`)
   * replaces the default pair only where the default checks no client certificate: it must never
   * lift that check for a name the default pair serves.
   */
  const chosenFor = (name: string) =>
    store.served(name) ?? (defaultPolicy() === null ? store.catchAll() : null);
  /** The check of handshakes for a name: the served pair's, or the default pair's for other names. */
  const policyFor = (name: string): ClientCertificatePolicy | null => {
    const served = chosenFor(name);
    return served === null ? defaultPolicy() : (served.clientCertificates ?? null);
  };

  return {
    current: defaultMaterial,
    serverOptions: () => ({
      ...defaultMaterial(),
      ...verification.serverOptions,
      SNICallback: verification.sniCallback((name) => {
        const served = chosenFor(name);
        return served === null
          ? null
          : { context: served.context, policy: served.clientCertificates ?? null };
      }),
    }),
    misdirected(req) {
      if (!verification.enforcing) return false;
      const hostPolicy = policyFor(requestHostName(req));
      return (hostPolicy?.key ?? null) !== connectionPolicyKey(req, defaultPolicy);
    },
    store,
    attach(server) {
      servers.add(server);
      verification.attach(server);
      // The server may have been created from an earlier snapshot; make sure it serves what is live.
      server.setSecureContext(defaultContext());
    },
    watch: async (files) => {
      for (const [index, names] of pairs.entries()) {
        const first = live[index] as LoadedPair;
        await files.watchFiles({
          name: metricName(names),
          // A client-certificate check's CA bundle and CRL reload with the pair they belong to.
          paths: [names.certFile, names.keyFile, ...clientFiles(names)],
          liveHashes: [
            sha256Hex(first.cert),
            sha256Hex(first.key),
            ...(first.policy === null ? [] : [sha256Hex(first.policy.files.ca)]),
            ...(first.policy?.files.crl ? [sha256Hex(first.policy.files.crl)] : []),
          ],
          parse: ([cert, key, ca, crl]) => {
            const certBytes = Buffer.from(cert ?? '');
            const keyBytes = Buffer.from(key ?? '');
            const x509 = checkTlsPair(certBytes, keyBytes, names);
            const clients = names.clientCertificates ?? null;
            if (clients === null) return loaded(certBytes, keyBytes, x509, null);
            const crlBytes = clients.settings.crlFile === null ? null : Buffer.from(crl ?? '');
            const files = checkClientCaFiles(Buffer.from(ca ?? ''), crlBytes, clients.settings, clients.key);
            return loaded(certBytes, keyBytes, x509, policyOf(clients, files));
          },
          apply(next) {
            live[index] = next;
            recordCertificateExpiry(metricName(names), next.summary);
            publish();
            if (index === 0) for (const server of servers) server.setSecureContext(defaultContext());
          },
          describe: (pair) => ({ certificate: pair.summary }),
          messages: {
            applied: 'TLS certificate reloaded',
            rejected:
              'TLS certificate not reloaded: new files are not usable, the previous certificate keeps serving',
          },
        });
      }
    },
    close() {
      servers.clear();
    },
  };
}

/** `tls_certificate` for the single pair, `tls_certificates[i]` for the list's. */
function metricName(names: TlsPairNames): string {
  return names.certKey === 'tls_certificate' ? TLS_METRIC_NAME : names.certKey.replace(/\.certificate$/, '');
}

/** The CA bundle and CRL files of a pair's client-certificate check, in the watcher's order. */
function clientFiles(names: TlsPairNames): string[] {
  const settings = names.clientCertificates?.settings;
  if (settings === undefined) return [];
  return settings.crlFile === null ? [settings.caFile] : [settings.caFile, settings.crlFile];
}

function policyOf(
  clients: NonNullable<TlsPairNames['clientCertificates']>,
  files: ClientCertificatePolicy['files'],
): ClientCertificatePolicy {
  return { key: clients.key, mode: clients.settings.mode, verifyDepth: clients.settings.verifyDepth, files };
}

/** A request's host name without its port (`[v6]` forms stay as they are: no certificate names them). */
function requestHostName(req: IncomingMessage): string {
  const raw = req.headers[':authority'] ?? req.headers.host;
  if (typeof raw !== 'string' || raw.startsWith('[')) return '';
  return raw.replace(/:\d*$/, '');
}

function loaded(
  cert: Buffer,
  key: Buffer,
  x509: X509Certificate,
  policy: ClientCertificatePolicy | null,
): LoadedPair {
  const served = servedCertificate(cert, key, x509, policy);
  return {
    cert,
    key,
    ...(policy === null ? {} : { ca: policy.files.ca }),
    ...(policy?.files.crl ? { crl: policy.files.crls } : {}),
    policy,
    served,
    summary: {
      subject: x509.subject,
      names: served.names,
      validTo: x509.validTo,
      fingerprint256: x509.fingerprint256,
    },
  };
}
