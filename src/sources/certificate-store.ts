import type { X509Certificate } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { ClientCertificatePolicy } from '../listeners/client-certificates.ts';

/**
 * The certificates the TLS listener chooses from by SNI (docs/traffic.md#several-certificates).
 *
 * Certificates come in sets, one per source: `files` (main.yaml's tls_certificate and
 * tls_certificates, each pair reloaded on its own), and whatever else registers one (Kubernetes
 * Secrets, say). A source replaces its whole set at once with `set`, or removes it with `delete`;
 * the others are untouched. A handshake's server name is looked up as an exact name first (a
 * certificate's DNS subject alternative names, else its common name), then as a one-label wildcard
 * (`*.example.com` for `a.example.com`, not `a.b.example.com`); with no match (or no SNI) the
 * listener's default, the first pair of main.yaml, is served. When several certificates claim a
 * name, the earlier source wins, then the earlier certificate of the set. The name `*` claims every
 * name nothing else claims (a Gateway's HTTPS listener without `hostname`, docs/gateway-api.md#gateways):
 * `catchAll` gives it, for the TLS listener to serve instead of its default where that is safe.
 */
export interface ServedCertificate {
  /** Lower-case DNS names it is served for; `*.` prefixes are wildcards. */
  readonly names: readonly string[];
  readonly context: SecureContext;
  /** The client-certificate check of handshakes for its names; absent = none (docs/authentication.md#client-certificates). */
  readonly clientCertificates?: ClientCertificatePolicy | null;
}

export class CertificateStore {
  readonly #sources = new Map<string, readonly ServedCertificate[]>();
  #exact = new Map<string, ServedCertificate>();
  #wildcard = new Map<string, ServedCertificate>();
  #listeners: Array<() => void> = [];
  #anyClientCertificates = false;

  /** Some certificate of some source carries a client-certificate check. */
  get anyClientCertificates(): boolean {
    return this.#anyClientCertificates;
  }

  /** Called after every change of the store (a source set or deleted). */
  onChange(listener: () => void): void {
    this.#listeners.push(listener);
  }

  /** Replaces every certificate of `source` (order: earlier wins a name two certificates claim). */
  set(source: string, certificates: readonly ServedCertificate[]): void {
    this.#sources.set(source, certificates);
    this.#index();
  }

  delete(source: string): void {
    if (this.#sources.delete(source)) this.#index();
  }

  /** The context for a handshake's server name, or null for the listener's default. */
  select(servername: string): SecureContext | null {
    return this.served(servername)?.context ?? null;
  }

  /** The certificate served for a server name (or a request's host), or null for the listener's default. */
  served(servername: string): ServedCertificate | null {
    const name = servername.toLowerCase().replace(/\.$/, '');
    const exact = this.#exact.get(name);
    if (exact !== undefined) return exact;
    const dot = name.indexOf('.');
    if (dot <= 0) return null;
    return this.#wildcard.get(name.slice(dot + 1)) ?? null;
  }

  /** The certificate claiming every other name (`*`), or null. */
  catchAll(): ServedCertificate | null {
    return this.#catchAll;
  }

  /** For TLS servers' `SNICallback`. */
  readonly sniCallback = (
    servername: string,
    callback: (error: Error | null, context?: SecureContext) => void,
  ) => {
    callback(null, this.select(servername) ?? undefined);
  };

  /** The first certificate naming `*`: every name nothing else claims. */
  #catchAll: ServedCertificate | null = null;

  #index(): void {
    const exact = new Map<string, ServedCertificate>();
    const wildcard = new Map<string, ServedCertificate>();
    let catchAll: ServedCertificate | null = null;
    for (const certificates of this.#sources.values()) {
      for (const served of certificates) {
        for (const name of served.names) {
          if (name === '*') catchAll ??= served;
          else if (name.startsWith('*.')) {
            const parent = name.slice(2);
            if (!wildcard.has(parent)) wildcard.set(parent, served);
          } else if (!exact.has(name)) {
            exact.set(name, served);
          }
        }
      }
    }
    this.#catchAll = catchAll;
    this.#exact = exact;
    this.#wildcard = wildcard;
    this.#anyClientCertificates = [...this.#sources.values()].some((certificates) =>
      certificates.some((served) => (served.clientCertificates ?? null) !== null),
    );
    for (const listener of this.#listeners) listener();
  }
}

/**
 * A certificate and key as served: its names and a ready context (the pair was checked before); with
 * a client-certificate check, the context trusts its CA bundle and CRL (and only those).
 */
export function servedCertificate(
  cert: Buffer,
  key: Buffer,
  x509: X509Certificate,
  clientCertificates: ClientCertificatePolicy | null = null,
): ServedCertificate {
  const names = certificateNames(x509);
  if (clientCertificates === null) return { names, context: createSecureContext({ cert, key }) };
  const { ca, crls } = clientCertificates.files;
  return {
    names,
    context: createSecureContext({ cert, key, ca, ...(crls.length === 0 ? {} : { crl: crls }) }),
    clientCertificates,
  };
}

/** The DNS names a certificate is valid for: its DNS subject alternative names, else its CN. */
export function certificateNames(x509: X509Certificate): string[] {
  const names: string[] = [];
  for (const entry of (x509.subjectAltName ?? '').split(',')) {
    const trimmed = entry.trim();
    if (trimmed.startsWith('DNS:')) names.push(trimmed.slice(4).toLowerCase());
  }
  if (names.length > 0) return names;
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x509.subject)?.[1];
  return cn ? [cn.trim().toLowerCase()] : [];
}
