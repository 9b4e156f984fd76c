import { tlsCertificateExpiry } from '../admin/metrics.ts';

/**
 * tollgate_tls_certificate_expiry_timestamp_seconds for the listener's certificates
 * (docs/observability.md): one series per main.yaml pair, replaced when the pair reloads, so an
 * alert and /status always see the certificate being served, never the one it replaced.
 */
const exported = new Map<string, { certificate: string; names: string }>();

export function recordCertificateExpiry(
  certificate: string,
  served: { names: readonly string[]; validTo: string },
): void {
  const notAfterMs = Date.parse(served.validTo);
  if (!Number.isFinite(notAfterMs)) return;
  const labels = { certificate, names: served.names.join(',') };
  const previous = exported.get(certificate);
  if (previous !== undefined && previous.names !== labels.names) tlsCertificateExpiry.remove(previous);
  exported.set(certificate, labels);
  tlsCertificateExpiry.set(labels, Math.floor(notAfterMs / 1000));
}
