import { createHash, X509Certificate } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import { checkClientCaFiles } from '../../../config/file-checks.ts';
import type { ClientCertificatePolicy } from '../../../listeners/client-certificates.ts';
import type { Logger } from '../../../log.ts';
import { type CertificateExpiry, recordCertificateExpiry } from '../../../observe/certificates.ts';
import type { CertificateStore, ServedCertificate } from '../../certificate-store.ts';

/** The SNI store's source name for certificates from Ingress TLS Secrets (docs/ingress.md#tls). */
export const INGRESS_CERTIFICATES = 'kubernetes-ingress';

export interface CertificatePem {
  /** Lower-case names it is served for. */
  names: readonly string[];
  certificate: string;
  key: string;
  /**
   * A client-certificate check for its names (Ingress `auth-tls-*`, Gateway `spec.tls.frontend`;
   * docs/authentication.md#client-certificates): the CA bundle and CRL travel with the pair, so
   * workers build the same context as the primary.
   */
  clientCertificates?: ClientCheckPem;
}

/** A client-certificate check as Kubernetes objects give it: PEM text, checked by the translation. */
export interface ClientCheckPem {
  /** Names the check (logs, 421 decisions): the object it comes from. */
  key: string;
  mode: 'require' | 'optional';
  verifyDepth: number;
  /** PEM CA bundle. */
  ca: string;
  /** PEM CRLs, or null. */
  crl: string | null;
}

export interface IngressCertificates {
  /** Makes `store`'s Ingress set exactly `certificates` (contexts reused for unchanged pairs). */
  update(store: CertificateStore, certificates: readonly CertificatePem[]): void;
}

/**
 * Ingress TLS Secrets in the TLS listener's SNI store, beside main.yaml's pairs (which win a name
 * both claim: they are the operator's). A Secret's new content replaces its context at the next
 * handshake; connections already open keep theirs. Contexts are built once per distinct pair.
 */
export function createIngressCertificates(logger: Logger): IngressCertificates {
  let contexts = new Map<string, Built>();
  // notAfter of each pair, read once (docs/observability.md: tollgate_tls_certificate_expiry_timestamp_seconds).
  let expiries = new Map<string, string>();
  return {
    update(store, certificates) {
      const next = new Map<string, Built>();
      const nextExpiries = new Map<string, string>();
      const expiring: CertificateExpiry[] = [];
      const served: ServedCertificate[] = [];
      for (const item of certificates) {
        const check = item.clientCertificates ?? null;
        const id = createHash('sha256')
          .update(item.certificate)
          .update('\0')
          .update(item.key)
          .update('\0')
          .update(check === null ? '' : JSON.stringify(check))
          .digest('hex');
        let context = next.get(id) ?? contexts.get(id);
        if (context === undefined) {
          try {
            context = built(item, check);
          } catch (error) {
            logger.warn(
              { names: item.names, error: (error as Error).message },
              'ingress TLS certificate not loaded',
            );
            continue;
          }
          logger.info({ names: item.names }, 'ingress TLS certificate loaded');
        }
        next.set(id, context);
        served.push({ names: item.names, ...context });
        const validTo = nextExpiries.get(id) ?? expiries.get(id) ?? validToOf(item.certificate);
        nextExpiries.set(id, validTo);
        expiring.push({ names: item.names, validTo });
      }
      contexts = next;
      expiries = nextExpiries;
      recordCertificateExpiry(INGRESS_CERTIFICATE_LABEL, expiring);
      store.set(INGRESS_CERTIFICATES, served);
    },
  };
}

interface Built {
  context: SecureContext;
  clientCertificates: ClientCertificatePolicy | null;
}

/** The pair's context; with a check, trusting its CA bundle and CRL (and only those). */
function built(item: CertificatePem, check: ClientCheckPem | null): Built {
  if (check === null)
    return {
      context: createSecureContext({ cert: item.certificate, key: item.key }),
      clientCertificates: null,
    };
  const label = `Secret of ${check.key}`;
  const files = checkClientCaFiles(
    Buffer.from(check.ca),
    check.crl === null ? null : Buffer.from(check.crl),
    {
      caFile: `${label} (ca.crt)`,
      crlFile: check.crl === null ? null : `${label} (ca.crl)`,
      mode: check.mode,
      verifyDepth: check.verifyDepth,
    },
    check.key,
  );
  const context = createSecureContext({
    cert: item.certificate,
    key: item.key,
    ca: files.ca,
    ...(files.crls.length === 0 ? {} : { crl: files.crls }),
  });
  return {
    context,
    clientCertificates: { key: check.key, mode: check.mode, verifyDepth: check.verifyDepth, files },
  };
}

/** The `certificate` label of the expiry metric for Ingress TLS Secrets (main.yaml's use their key). */
const INGRESS_CERTIFICATE_LABEL = 'ingress';

function validToOf(pem: string): string {
  try {
    return new X509Certificate(pem).validTo;
  } catch {
    return '';
  }
}
