import { createHash, type X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { RE2JS } from 're2js';
import type { ClientCertificateAuth, SubjectSource } from '../config/types.ts';
import { peerIdentityOf } from '../listeners/client-certificates.ts';
import type { Authenticator, AuthOutcome } from './authenticator.ts';
import { subjectHeaderValue } from './authenticator.ts';

/**
 * `type: client_certificate` (docs/authentication.md#client-certificates): the request's connection
 * must carry a client certificate that the TLS listener verified for its server name (the handshake
 * did the verifying: CA bundle, CRL, depth). Its subject comes from the first of `subject_from`
 * present (URI SAN, DNS SAN, email SAN, CN); `forward_client_certificate` sends the certificate
 * upstream as Envoy's X-Forwarded-Client-Cert or ingress-nginx's ssl-client-cert. Client copies of
 * both headers never reach an upstream (header-names.ts OURS), whatever the route.
 */

/** The subject alternative names of a certificate, by kind, decoded from Node's printed form. */
export interface SubjectAltNames {
  readonly uri: readonly string[];
  readonly dns: readonly string[];
  readonly email: readonly string[];
}

/**
 * Node prints SANs as `DNS:a, URI:b, email:c`, quoting a value (as a JSON string) when it holds a
 * comma, a quote or anything unusual, so no value can pass for two entries.
 */
const SAN_ENTRY = /([A-Za-z ]+):("(?:[^"\\]|\\.)*"|[^,]*)(?:, |$)/y;

const sanCache = new WeakMap<X509Certificate, SubjectAltNames>();

export function subjectAltNames(certificate: X509Certificate): SubjectAltNames {
  const cached = sanCache.get(certificate);
  if (cached !== undefined) return cached;
  const names = { uri: [] as string[], dns: [] as string[], email: [] as string[] };
  const text = certificate.subjectAltName ?? '';
  SAN_ENTRY.lastIndex = 0;
  while (SAN_ENTRY.lastIndex < text.length) {
    const match = SAN_ENTRY.exec(text);
    if (match === null) break;
    const kind = match[1] as string;
    const value = unquote(match[2] as string);
    if (value === null) continue;
    if (kind === 'URI') names.uri.push(value);
    else if (kind === 'DNS') names.dns.push(value.toLowerCase());
    else if (kind === 'email') names.email.push(value);
  }
  sanCache.set(certificate, names);
  return names;
}

/**
 * The subject's common name (the last CN, the most specific), or null. Node prints the subject one
 * attribute a line with RFC 2253 escapes (`\,`, `\"`, `\0A` for a control character): undone here.
 */
export function commonName(certificate: X509Certificate): string | null {
  let cn: string | null = null;
  for (const line of certificate.subject.split('\n')) {
    if (line.startsWith('CN=')) cn = unescape2253(line.slice(3));
  }
  return cn;
}

function unescape2253(value: string): string {
  return value.replace(/\\([0-9A-Fa-f]{2}|.)/g, (_, escaped: string) =>
    escaped.length === 2 ? String.fromCharCode(Number.parseInt(escaped, 16)) : escaped,
  );
}

function unquote(value: string): string | null {
  if (!value.startsWith('"')) return value;
  try {
    return JSON.parse(value) as string;
  } catch {
    return null;
  }
}

/** The subject by `sources`, the first one present. */
export function certificateSubject(
  certificate: X509Certificate,
  sources: readonly SubjectSource[],
): string | null {
  const sans = subjectAltNames(certificate);
  for (const source of sources) {
    const value =
      source === 'uri_san'
        ? sans.uri[0]
        : source === 'dns_san'
          ? sans.dns[0]
          : source === 'email_san'
            ? sans.email[0]
            : (commonName(certificate) ?? undefined);
    if (value !== undefined && value !== '') return value;
  }
  return null;
}

/** The verified client certificate of the request's connection, or null. */
export function verifiedClientCertificate(req: IncomingMessage): X509Certificate | null {
  return peerIdentityOf(req)?.certificate ?? null;
}

export function createClientCertificateAuthenticator(settings: ClientCertificateAuth): Authenticator {
  // auth-tls-error-page: the refusal is a redirect to the page (still counted as a refusal).
  const refused: AuthOutcome =
    settings.errorPage === undefined
      ? 'client_certificate_required'
      : {
          denial: {
            status: 302,
            headers: { location: settings.errorPage, 'cache-control': 'no-store' },
            body: Buffer.alloc(0),
          },
          reason: 'client_certificate_required',
        };
  return (request) => {
    const identity = peerIdentityOf(request.req);
    const certificate = identity?.certificate ?? null;
    if (certificate === null) {
      if (settings.anonymous === true) return null;
      request.authDetail =
        identity === null
          ? 'no client-certificate check on this TLS host'
          : (identity.error ?? 'no certificate');
      return refused;
    }
    const subject = certificateSubject(certificate, settings.subjectFrom);
    if (subject === null && settings.anonymous !== true) {
      request.authDetail = `the certificate has none of ${settings.subjectFrom.join(', ')}`;
      return refused;
    }
    if (subject !== null) request.subject = subjectHeaderValue(subject);
    if (settings.forward !== 'none') {
      const header =
        settings.forward === 'xfcc' ? forwardedClientCert(certificate) : sslClientCert(certificate);
      request.upstreamHeaders = [...(request.upstreamHeaders ?? []), ...header];
    }
    return null;
  };
}

/**
 * Envoy's `X-Forwarded-Client-Cert` element: `Hash` (SHA-256 of the DER, hex), `Subject` (RFC 2253
 * order, quoted), then each `URI` and `DNS` SAN. A value holding `,;="` is quoted, `"` and `\` escaped.
 */
export function forwardedClientCert(certificate: X509Certificate): [string, string] {
  const sans = subjectAltNames(certificate);
  const hash = createHash('sha256').update(certificate.raw).digest('hex');
  // RFC 2253 order, most specific first; Node's escapes already keep `"` and `,` inside values.
  const subject = certificate.subject.split('\n').reverse().join(',');
  const parts = [`Hash=${hash}`, `Subject="${headerSafe(subject)}"`];
  for (const uri of sans.uri) parts.push(`URI=${maybeQuoted(uri)}`);
  for (const dns of sans.dns) parts.push(`DNS=${maybeQuoted(dns)}`);
  return ['x-forwarded-client-cert', parts.join(';')];
}

/** ingress-nginx's `ssl-client-cert`: the certificate's PEM, URL-encoded ($ssl_client_escaped_cert). */
export function sslClientCert(certificate: X509Certificate): [string, string] {
  return ['ssl-client-cert', encodeURIComponent(certificate.toString())];
}

function quoted(value: string): string {
  return `"${headerSafe(value).replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

function maybeQuoted(value: string): string {
  return /[,;="\\]/.test(value) ? quoted(value) : headerSafe(value);
}

/** Anything outside printable ASCII percent-encoded (UTF-8): a header value must not carry it raw. */
function headerSafe(value: string): string {
  return value.replace(/[^\x20-\x7e]/gu, (c) => encodeURIComponent(c));
}

/**
 * `allow.commonNames` (Ingress `auth-tls-match-cn`): the verified certificate's whole CN matches an
 * RE2 expression (linear time, as every regex read from Kubernetes objects). Without a verified
 * certificate nothing matches. null when not set.
 */
export function commonNameCheck(pattern: string | null): ((req: IncomingMessage) => boolean) | null {
  if (pattern === null) return null;
  const expression = RE2JS.compile(`^(?:${pattern})$`);
  return (req) => {
    const certificate = verifiedClientCertificate(req);
    const cn = certificate === null ? null : commonName(certificate);
    return cn !== null && expression.matches(cn);
  };
}

/**
 * `allow.uri_sans` / `allow.dns_sans` (docs/authentication.md#who-may-pass): one of the verified
 * certificate's URI (DNS) SANs must match one pattern. In a URI pattern `*` stands for any
 * characters (`spiffe://cluster.local/ns/payments/*`); in a DNS pattern for one label
 * (`*.payments.svc`). Without a verified certificate nothing matches. null when neither is set.
 */
export function sanPatternCheck(
  uriPatterns: readonly string[] | null,
  dnsPatterns: readonly string[] | null,
): ((req: IncomingMessage) => boolean) | null {
  if (uriPatterns === null && dnsPatterns === null) return null;
  const uri = uriPatterns === null ? null : patternsRegExp(uriPatterns, '.+', false);
  const dns = dnsPatterns === null ? null : patternsRegExp(dnsPatterns, '[^.]+', true);
  return (req) => {
    const certificate = verifiedClientCertificate(req);
    if (certificate === null) return false;
    const sans = subjectAltNames(certificate);
    if (uri !== null && !sans.uri.some((value) => uri.test(value))) return false;
    if (dns !== null && !sans.dns.some((value) => dns.test(value))) return false;
    return true;
  };
}

function patternsRegExp(patterns: readonly string[], star: string, ignoreCase: boolean): RegExp {
  const alternatives = patterns.map((pattern) =>
    pattern
      .split('*')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
      .join(star),
  );
  return new RegExp(`^(?:${alternatives.join('|')})$`, ignoreCase ? 'i' : '');
}
