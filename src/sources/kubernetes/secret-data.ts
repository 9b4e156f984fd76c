import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';

/** A Secret's values as text: `data` base64-decoded, `stringData` (as a client may send it) on top. */
export function decodeSecret(secret: V1Secret): Record<string, string> {
  const data: Record<string, string> = {};
  for (const [key, value] of Object.entries(secret.data ?? {}))
    data[key] = Buffer.from(value, 'base64').toString('utf8');
  for (const [key, value] of Object.entries(secret.stringData ?? {})) data[key] = value;
  return data;
}

/**
 * The PEM pair of a `kubernetes.io/tls` Secret, or what is wrong with it: checked here, where the
 * Event can name the Secret, rather than failing later inside a TLS context (Ingress TLS, Gateway
 * certificateRefs).
 */
export function tlsPair(secret: V1Secret): { certificate: string; key: string } | string {
  if (secret.type !== undefined && secret.type !== 'kubernetes.io/tls')
    return `is of type ${secret.type}, not kubernetes.io/tls`;
  const data = decodeSecret(secret);
  const certificate = data['tls.crt'];
  const key = data['tls.key'];
  if (!certificate?.includes('-----BEGIN CERTIFICATE-----')) return "'tls.crt' holds no PEM certificate";
  if (!key?.includes('PRIVATE KEY-----')) return "'tls.key' holds no PEM private key";
  try {
    const x509 = new X509Certificate(certificate);
    if (!x509.checkPrivateKey(createPrivateKey(key))) return "'tls.key' is not the key of 'tls.crt'";
  } catch (error) {
    return `holds a certificate or key that does not load (${(error as Error).message})`;
  }
  return { certificate, key };
}
