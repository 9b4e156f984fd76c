import { tlsCertificateExpiry } from './metrics.ts';

/**
 * tollgate_tls_certificate_expiry_timestamp_seconds for the listener's certificates
 * (docs/observability.md): one series per certificate served, replaced when it reloads, so an alert
 * and /status always see the certificate being served, never the one it replaced.
 */
type Labels = { certificate: string; names: string };
const exported = new Map<string, Labels[]>();

export interface CertificateExpiry {
  readonly names: readonly string[];
  /** As X509Certificate#validTo gives it. */
  readonly validTo: string;
}

/**
 * The certificates now served under `certificate` (a main.yaml key such as `tls_certificate`, or
 * `ingress` for those of Ingress TLS Secrets): its earlier series go.
 */
export function recordCertificateExpiry(
  certificate: string,
  served: CertificateExpiry | readonly CertificateExpiry[],
): void {
  for (const labels of exported.get(certificate) ?? []) tlsCertificateExpiry.remove(labels);
  const now: Labels[] = [];
  for (const item of Array.isArray(served) ? served : [served as CertificateExpiry]) {
    const notAfterMs = Date.parse(item.validTo);
    if (!Number.isFinite(notAfterMs)) continue;
    const labels = { certificate, names: item.names.join(',') };
    tlsCertificateExpiry.set(labels, Math.floor(notAfterMs / 1000));
    now.push(labels);
  }
  exported.set(certificate, now);
}
