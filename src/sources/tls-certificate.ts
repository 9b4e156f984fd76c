import type { X509Certificate } from 'node:crypto';
import type { Server as TlsServer } from 'node:tls';
import { checkTlsPair, readTlsPair } from '../config/file-checks.ts';
import { sha256Hex } from '../config/load.ts';
import type { Logger } from '../log.ts';
import type { FileWatcher } from './files.ts';

/**
 * The certificate and key of the TLS listener, reloaded when the files change (docs/traffic.md#tls-listener).
 *
 * The files are usually a mounted `kubernetes.io/tls` Secret, which the kubelet replaces through the
 * same atomic `..data` symlink swap as a ConfigMap; the shared file watcher sees it. A change is
 * applied with `server.setSecureContext()`: the next handshake gets the new certificate, connections
 * already established keep theirs. Files that do not load (unparsable, key not matching the
 * certificate, half written) are logged and counted, and the previous certificate keeps serving.
 */

/** The `file` label of the reload metrics and the name in logs. */
export const TLS_METRIC_NAME = 'tls_certificate';

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
}

export interface TlsContextProviderOptions {
  certFile: string;
  keyFile: string;
  logger: Logger;
}

export interface TlsContextProvider {
  /** The material currently served; pass it to `https.createServer({ ...provider.current() })`. */
  current(): TlsMaterial;
  /** Servers whose context is replaced on every successful reload. */
  attach(server: TlsServer): void;
  /** Registers the certificate and key with the file watcher: from now on changes are applied. */
  watch(files: FileWatcher): Promise<void>;
  /** Forgets the attached servers. */
  close(): void;
}

interface LoadedMaterial extends TlsMaterial {
  summary: CertificateSummary;
}

interface CertificateSummary {
  subject: string;
  validTo: string;
  fingerprint256: string;
}

/**
 * Loads the files once, synchronously, and throws when they are unusable: at start-up a broken
 * certificate is a fatal configuration error (fail closed), only reloads fall back to the old one.
 */
export function createTlsContextProvider(options: TlsContextProviderOptions): TlsContextProvider {
  const { certFile, keyFile, logger } = options;
  // The reader and checks validation uses (config/file-checks): a pair that validated loads here.
  const names = { certFile, keyFile, certKey: 'tls_certificate', keyKey: 'tls_key_file' };
  const first = readTlsPair(names);
  let live = loaded(first.cert, first.key, first.x509);
  const loadedHashes = [sha256Hex(live.cert), sha256Hex(live.key)];
  const servers = new Set<TlsServer>();
  logger.info({ certificate: live.summary, certFile }, 'TLS certificate loaded');

  return {
    current: () => ({ cert: live.cert, key: live.key }),
    attach(server) {
      servers.add(server);
      // The server may have been created from an earlier snapshot; make sure it serves what is live.
      server.setSecureContext({ cert: live.cert, key: live.key });
    },
    watch: (files) =>
      files.watchFiles({
        name: TLS_METRIC_NAME,
        paths: [certFile, keyFile],
        liveHashes: loadedHashes,
        parse: ([cert, key]) => {
          const certBytes = Buffer.from(cert ?? '');
          const keyBytes = Buffer.from(key ?? '');
          return loaded(certBytes, keyBytes, checkTlsPair(certBytes, keyBytes, names));
        },
        apply(next) {
          for (const server of servers) server.setSecureContext({ cert: next.cert, key: next.key });
          live = next;
        },
        describe: (material) => ({ certificate: material.summary }),
        messages: {
          applied: 'TLS certificate reloaded',
          rejected:
            'TLS certificate not reloaded: new files are not usable, the previous certificate keeps serving',
        },
      }),
    close() {
      servers.clear();
    },
  };
}

function loaded(cert: Buffer, key: Buffer, x509: X509Certificate): LoadedMaterial {
  return {
    cert,
    key,
    summary: { subject: x509.subject, validTo: x509.validTo, fingerprint256: x509.fingerprint256 },
  };
}
