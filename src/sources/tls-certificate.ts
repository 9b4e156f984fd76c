import type { X509Certificate } from 'node:crypto';
import type { Server as TlsServer } from 'node:tls';
import { checkTlsPair, readTlsPair, type TlsPairNames } from '../config/file-checks.ts';
import { sha256Hex } from '../config/load.ts';
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
}

export type TlsContextProviderOptions = (
  | { certFile: string; keyFile: string }
  | { pairs: readonly TlsPairNames[] }
) & { logger: Logger };

export interface TlsContextProvider {
  /** The default pair's material; pass it to the server with `SNICallback: store.sniCallback`. */
  current(): TlsMaterial;
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
    const pair = loaded(read.cert, read.key, read.x509);
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
  const defaultMaterial = () => ({ cert: (live[0] as LoadedPair).cert, key: (live[0] as LoadedPair).key });

  return {
    current: defaultMaterial,
    store,
    attach(server) {
      servers.add(server);
      // The server may have been created from an earlier snapshot; make sure it serves what is live.
      server.setSecureContext(defaultMaterial());
    },
    watch: async (files) => {
      for (const [index, names] of pairs.entries()) {
        const first = live[index] as LoadedPair;
        await files.watchFiles({
          name: metricName(names),
          paths: [names.certFile, names.keyFile],
          liveHashes: [sha256Hex(first.cert), sha256Hex(first.key)],
          parse: ([cert, key]) => {
            const certBytes = Buffer.from(cert ?? '');
            const keyBytes = Buffer.from(key ?? '');
            return loaded(certBytes, keyBytes, checkTlsPair(certBytes, keyBytes, names));
          },
          apply(next) {
            live[index] = next;
            recordCertificateExpiry(metricName(names), next.summary);
            publish();
            if (index === 0) for (const server of servers) server.setSecureContext(defaultMaterial());
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

function loaded(cert: Buffer, key: Buffer, x509: X509Certificate): LoadedPair {
  const served = servedCertificate(cert, key, x509);
  return {
    cert,
    key,
    served,
    summary: {
      subject: x509.subject,
      names: served.names,
      validTo: x509.validTo,
      fingerprint256: x509.fingerprint256,
    },
  };
}
