import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readErrorReason } from './read-error.ts';

/**
 * The PEM files upstream TLS reads (docs/traffic.md#tls-to-upstreams): CA bundles, client
 * certificates and their keys. One check used by validation (so `validate` and the start refuse a
 * broken file with its line) and by the reload of each file (so a broken change keeps the last good
 * copy). Messages never contain key material.
 */

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The certificates of a PEM bundle, each checked; throws when there is none or one does not parse. */
export function parseCaBundle(text: string): string[] {
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new Error('holds no PEM certificate (-----BEGIN CERTIFICATE-----)');
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch {
      throw new Error('holds a certificate that does not parse');
    }
  }
  return blocks;
}

/** A client certificate (chain) and its private key: both parse and the key matches the first certificate. */
export function checkCertificatePair(cert: string, key: string): void {
  const blocks = cert.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new Error('the certificate file holds no PEM certificate');
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(blocks[0] as string);
  } catch {
    throw new Error('the certificate does not parse');
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new Error('the key file holds no usable private key (PEM, unencrypted)');
  }
  if (!x509.checkPrivateKey(privateKey)) throw new Error('the private key does not match the certificate');
}

/** The file's text, or a sentence saying why it cannot be read. */
export function readTextFile(path: string): { ok: true; text: string } | { ok: false; reason: string } {
  try {
    return { ok: true, text: readFileSync(path, 'utf8') };
  } catch (error) {
    return { ok: false, reason: readErrorReason(error) };
  }
}
