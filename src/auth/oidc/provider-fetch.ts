import { rootCertificates } from 'node:tls';
import { Agent, fetch as undiciFetch } from 'undici';
import { readCaBundle } from '../../config/file-checks.ts';

/** A fetch both openid-client and jose accept (each passes its own options object). */
export type ProviderFetch = (url: string, options: object) => Promise<Response>;

/** One connection pool per CA file while its content stays the same (discovery reruns every hour). */
const pools = new Map<string, { pem: string; fetch: ProviderFetch }>();

/**
 * The fetch a provider's requests go through when its `ca_file` names a private CA
 * (docs/authentication.md#openid-connect): discovery, token exchange, refresh, userinfo and its
 * JWKS, with the CA trusted beside the system ones (a provider behind a public CDN still works).
 * Undefined without `ca_file`: the runtime's own fetch and trust store. Reads the file on every
 * discovery, so a CA rotated on disk is picked up at the next one.
 */
export function providerFetch(caFile: string | null | undefined): ProviderFetch | undefined {
  if (caFile == null) return undefined;
  const bundle = readCaBundle(caFile, 'ca_file');
  const pem = bundle.join('\n');
  const kept = pools.get(caFile);
  if (kept !== undefined && kept.pem === pem) return kept.fetch;
  const agent = new Agent({ connect: { ca: [...rootCertificates, ...bundle] } });
  const fetch: ProviderFetch = (url, options) =>
    undiciFetch(url, { ...options, dispatcher: agent }) as unknown as Promise<Response>;
  pools.set(caFile, { pem, fetch });
  // The replaced pool is not closed: metadata discovered with it may still be in use (a failed
  // rediscovery keeps it); its idle connections time out on their own.
  return fetch;
}
