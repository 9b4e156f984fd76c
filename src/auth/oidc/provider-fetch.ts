import { rootCertificates } from 'node:tls';
import { Agent, fetch as undiciFetch } from 'undici';
import { readCaBundle } from '../../config/file-checks.ts';

/**
 * The fetch a provider's requests go through when its `ca_file` names a private CA
 * (docs/authentication.md#openid-connect): discovery, token exchange, refresh, userinfo and its
 * JWKS, with the CA trusted beside the system ones (a provider behind a public CDN still works).
 * Undefined without `ca_file`: the runtime's own fetch and trust store. Reads the file now: a CA
 * rotated on disk is picked up at the next discovery.
 */
/** A fetch both openid-client and jose accept (each passes its own options object). */
export type ProviderFetch = (url: string, options: object) => Promise<Response>;

export function providerFetch(caFile: string | null | undefined): ProviderFetch | undefined {
  if (caFile == null) return undefined;
  const agent = new Agent({ connect: { ca: [...rootCertificates, ...readCaBundle(caFile, 'ca_file')] } });
  return (url, options) =>
    undiciFetch(url, { ...options, dispatcher: agent }) as unknown as Promise<Response>;
}
