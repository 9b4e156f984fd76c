import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext, type Server as TlsServer } from 'node:tls';
import type { Logger } from '../log.ts';

/**
 * The certificate and key of the TLS listener, reloaded when the files change (issue 5 point 2).
 *
 * The files are usually a mounted `kubernetes.io/tls` Secret: the kubelet replaces them through the
 * same atomic `..data` symlink swap as a ConfigMap, so watching the files themselves misses updates.
 * We watch their directory (debounced), and also poll slowly because inotify can miss events on some
 * volume types. A change is applied with `server.setSecureContext()`: the next handshake gets the new
 * certificate, connections already established keep theirs. Files that do not load (unparsable, key
 * not matching the certificate, half written) are logged and the previous certificate keeps serving.
 */

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
}

export interface TlsContextProviderOptions {
  certFile: string;
  keyFile: string;
  logger: Logger;
  /** Trailing-edge debounce after a change in the watched directory. */
  debounceMs?: number;
  /** Safety-net poll; 0 disables it. */
  pollIntervalMs?: number;
}

export interface TlsContextProvider {
  /** The material currently served; pass it to `https.createServer({ ...provider.current() })`. */
  current(): TlsMaterial;
  /** Servers whose context is replaced on every successful reload. */
  attach(server: TlsServer): void;
  /** Re-reads the files now; resolves true when a new certificate was applied. */
  reload(): Promise<boolean>;
  /** Stops watching and polling. */
  close(): void;
}

interface LoadedMaterial extends TlsMaterial {
  /** sha256 over both files: unchanged files are never reapplied nor re-logged. */
  hash: string;
  summary: CertificateSummary;
}

interface CertificateSummary {
  subject: string;
  validTo: string;
  fingerprint256: string;
}

const DEFAULT_DEBOUNCE_MS = 200;
const DEFAULT_POLL_INTERVAL_MS = 30_000;

/**
 * Loads the files once, synchronously, and throws when they are unusable: at start-up a broken
 * certificate is a fatal configuration error (fail closed), only reloads fall back to the old one.
 */
export function createTlsContextProvider(options: TlsContextProviderOptions): TlsContextProvider {
  const { certFile, keyFile, logger } = options;
  let live = validate(readFileSync(certFile), readFileSync(keyFile));
  let lastRejectedHash: string | null = null;
  const servers = new Set<TlsServer>();
  logger.info({ certificate: live.summary, certFile }, 'TLS certificate loaded');

  let reloading: Promise<boolean> | null = null;
  let again = false;
  async function reloadOnce(): Promise<boolean> {
    let cert: Buffer;
    let key: Buffer;
    try {
      [cert, key] = await Promise.all([readFile(certFile), readFile(keyFile)]);
    } catch (err) {
      // A missing file mid-swap is transient; the next event or poll retries.
      logFailure(`unreadable: ${(err as Error).message}`, err);
      return false;
    }
    const hash = materialHash(cert, key);
    if (hash === live.hash || hash === lastRejectedHash) return false;
    let next: LoadedMaterial;
    try {
      next = validate(cert, key);
    } catch (err) {
      logFailure(hash, err);
      return false;
    }
    for (const server of servers) server.setSecureContext({ cert: next.cert, key: next.key });
    live = next;
    lastRejectedHash = null;
    logger.info({ certificate: next.summary, certFile }, 'TLS certificate reloaded');
    return true;
  }

  /** Logs once per distinct bad state (`failure` is a content hash or a read error), not per event. */
  function logFailure(failure: string, err: unknown): void {
    if (failure === lastRejectedHash) return;
    lastRejectedHash = failure;
    logger.error(
      { certFile, keyFile, err: err instanceof Error ? err.message : String(err) },
      'TLS certificate not reloaded: new files are not usable, the previous certificate keeps serving',
    );
  }

  // Serialise reloads: a burst of events while one runs collapses into a single follow-up.
  function reload(): Promise<boolean> {
    if (reloading) {
      again = true;
      return reloading;
    }
    reloading = reloadOnce().finally(() => {
      reloading = null;
      if (again) {
        again = false;
        void reload();
      }
    });
    return reloading;
  }

  const debounceMs = options.debounceMs ?? DEFAULT_DEBOUNCE_MS;
  let debounceTimer: NodeJS.Timeout | null = null;
  const schedule = () => {
    if (debounceTimer) clearTimeout(debounceTimer);
    debounceTimer = setTimeout(() => {
      debounceTimer = null;
      void reload();
    }, debounceMs);
    debounceTimer.unref();
  };

  const watchers: FSWatcher[] = [];
  for (const dir of new Set([dirname(certFile), dirname(keyFile)])) {
    try {
      const watcher = watch(dir, { persistent: false }, schedule);
      watcher.on('error', (err) =>
        logger.warn({ dir, err: err.message }, 'TLS directory watch failed; polling only'),
      );
      watchers.push(watcher);
    } catch (err) {
      logger.warn({ dir, err: (err as Error).message }, 'cannot watch TLS directory; polling only');
    }
  }
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
  const poll = pollIntervalMs > 0 ? setInterval(() => void reload(), pollIntervalMs).unref() : null;

  return {
    current: () => ({ cert: live.cert, key: live.key }),
    attach(server) {
      servers.add(server);
      // The server may have been created from an earlier snapshot; make sure it serves what is live.
      server.setSecureContext({ cert: live.cert, key: live.key });
    },
    reload,
    close() {
      for (const watcher of watchers) watcher.close();
      if (poll) clearInterval(poll);
      if (debounceTimer) clearTimeout(debounceTimer);
      servers.clear();
    },
  };
}

/**
 * Checks everything a handshake will need, so a reload is all-or-nothing: the certificate parses,
 * the key parses (an empty key does NOT make createSecureContext throw), the key matches the
 * certificate, and OpenSSL accepts the pair as a context.
 */
function validate(cert: Buffer, key: Buffer): LoadedMaterial {
  const x509 = new X509Certificate(cert);
  const privateKey = createPrivateKey(key);
  if (!x509.checkPrivateKey(privateKey)) throw new Error('the private key does not match the certificate');
  createSecureContext({ cert, key });
  return {
    cert,
    key,
    hash: materialHash(cert, key),
    summary: { subject: x509.subject, validTo: x509.validTo, fingerprint256: x509.fingerprint256 },
  };
}

function materialHash(cert: Buffer, key: Buffer): string {
  return createHash('sha256').update(cert).update('\0').update(key).digest('hex');
}
