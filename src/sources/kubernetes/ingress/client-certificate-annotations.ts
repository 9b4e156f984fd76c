import type { V1Secret } from '@kubernetes/client-node';
import { RE2JS } from 're2js';
import { checkClientCaFiles } from '../../../config/file-checks.ts';
import type { AuthorizationConfig } from '../../../config/types.ts';
import { decodeSecret } from '../secret-data.ts';
import type { ClientCheckPem } from './certificates.ts';

/**
 * ingress-nginx's `auth-tls-*` annotations (docs/ingress.md#client-certificates): a client-certificate
 * check on the Ingress's own TLS hosts, its CA bundle from a Secret (`ca.crt`, optional `ca.crl`).
 * The handshake verifies (docs/authentication.md#client-certificates); the paths carry what a
 * handshake cannot: `on` authenticates every request by its verified certificate (a plain-HTTP
 * request has none: 401), `auth-tls-match-cn` an allow rule on its CN, and
 * `auth-tls-pass-certificate-to-upstream` forwards it as `ssl-client-cert`, `auth-tls-error-page`
 * turns `on`'s refusal into a redirect (the handshake then completes without a certificate, and the
 * paths refuse). An unverified
 * certificate is never an identity and never forwarded, `optional_no_ca` included.
 */

export type VerifyClient = 'on' | 'off' | 'optional' | 'optional_no_ca';

/** What the auth-tls annotations fill in (a part of IngressSettings). */
export interface ClientCertificateIngressSettings {
  authTlsSecret?: string;
  authTlsVerifyClient?: VerifyClient;
  authTlsVerifyDepth?: number;
  authTlsPassCertificate?: boolean;
  /** The RE2 expression of `auth-tls-match-cn` after its `CN=`. */
  authTlsMatchCn?: string;
  authTlsErrorPage?: string;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };
const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (message: string): Parsed<never> => ({ ok: false, message });

const SECRET_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?\/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export function secretName(value: string): Parsed<string> {
  if (value.includes(',')) return bad('only one Secret is read (its ca.crt may hold several CAs)');
  return SECRET_NAME.test(value) ? ok(value) : bad(`'${value}' is not a Secret name (namespace/name)`);
}

export function verifyClient(value: string): Parsed<VerifyClient> {
  return value === 'on' || value === 'off' || value === 'optional' || value === 'optional_no_ca'
    ? ok(value)
    : bad(`'${value}' is not one of on, off, optional, optional_no_ca`);
}

export function verifyDepth(value: string): Parsed<number> {
  return /^[1-9][0-9]?$/.test(value) ? ok(Number(value)) : bad('expected a depth from 1 to 99');
}

/** `CN=<RE2 expression>`, matched against the whole CN (ingress-nginx matched anywhere in the DN). */
export function matchCn(value: string): Parsed<string> {
  if (!value.startsWith('CN=')) return bad('must start with CN= (a regular expression on the CN follows)');
  const pattern = value.slice(3);
  if (pattern === '') return bad('names no CN after CN=');
  try {
    RE2JS.compile(pattern);
  } catch (error) {
    return bad(`is not an RE2 expression: ${(error as Error).message}`);
  }
  return ok(pattern);
}

export function errorPage(value: string): Parsed<string> {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return bad('is not an absolute URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return bad('must be an http or https URL');
  return ok(parsed.href);
}

/** Everything a translation needs from the annotations: the TLS check and what the paths carry. */
export interface ClientCertificateOutcome {
  /** The check served with the Ingress's own TLS certificates; null: none. */
  check: ClientCheckPem | null;
  /** The paths' policy (type client_certificate), or null when the paths need none. */
  policy: AuthorizationConfig | null;
  /** Problems closing the paths. */
  problems: string[];
  warnings: string[];
}

const NONE: ClientCertificateOutcome = { check: null, policy: null, problems: [], warnings: [] };

/** Whether any auth-tls annotation is set. */
export function asksForClientCertificates(settings: ClientCertificateIngressSettings): boolean {
  return (
    settings.authTlsSecret !== undefined ||
    settings.authTlsVerifyClient !== undefined ||
    settings.authTlsVerifyDepth !== undefined ||
    settings.authTlsPassCertificate !== undefined ||
    settings.authTlsMatchCn !== undefined ||
    settings.authTlsErrorPage !== undefined
  );
}

/** The auth-tls Secret as `namespace/name` when it is the Ingress's own namespace's (else null). */
export function clientCaSecretKey(value: string, namespace: string): string | null {
  const [first, second] = value.split('/');
  if (second !== undefined && first !== namespace) return null;
  return `${namespace}/${second ?? first}`;
}

/**
 * The check and path policy of one Ingress. `ingressId` is `namespace/name`; `otherAuth` says
 * whether another auth-type is set (the paths carry one method only).
 */
export function clientCertificatesOf(
  settings: ClientCertificateIngressSettings,
  namespace: string,
  ingressId: string,
  secrets: ReadonlyMap<string, V1Secret>,
  otherAuth: boolean,
): ClientCertificateOutcome {
  if (!asksForClientCertificates(settings)) return NONE;
  const mode = settings.authTlsVerifyClient ?? 'on';
  if (mode === 'off') return NONE;
  const outcome: ClientCertificateOutcome = { check: null, policy: null, problems: [], warnings: [] };
  if (settings.authTlsSecret === undefined) {
    outcome.problems.push(
      'auth-tls-* annotations need auth-tls-secret (the CA client certificates must chain to)',
    );
    return outcome;
  }
  const key = clientCaSecretKey(settings.authTlsSecret, namespace);
  if (key === null) {
    outcome.problems.push(
      `auth-tls-secret ${settings.authTlsSecret} is in another namespace (only the Ingress's own is read)`,
    );
    return outcome;
  }
  const secret = secrets.get(key);
  if (secret === undefined) {
    outcome.problems.push(`auth-tls-secret ${key} does not exist`);
    return outcome;
  }
  const data = decodeSecret(secret);
  const ca = data['ca.crt'];
  if (ca === undefined) {
    outcome.problems.push(`auth-tls-secret ${key} has no 'ca.crt' key`);
    return outcome;
  }
  const crl = data['ca.crl'] ?? null;
  const depth = settings.authTlsVerifyDepth ?? 1;
  // optional_no_ca: ingress-nginx passes a certificate it did not verify; Tollgate still verifies.
  // `on` with an error page: the handshake must complete for a redirect to be answered; the paths'
  // policy then refuses (redirects) every request without a verified certificate.
  const errorPage = mode === 'on' ? settings.authTlsErrorPage : undefined;
  const tlsMode = mode === 'on' && errorPage === undefined ? 'require' : 'optional';
  try {
    checkClientCaFiles(
      Buffer.from(ca),
      crl === null ? null : Buffer.from(crl),
      {
        caFile: `Secret ${key} ca.crt`,
        crlFile: crl === null ? null : `Secret ${key} ca.crl`,
        mode: tlsMode,
        verifyDepth: depth,
      },
      'auth-tls-secret',
    );
  } catch (error) {
    outcome.problems.push(`auth-tls-secret ${key}: ${(error as Error).message}`);
    return outcome;
  }
  outcome.check = {
    key: `ingress ${ingressId}`,
    mode: tlsMode,
    verifyDepth: depth,
    ca,
    crl,
  };
  if (mode === 'optional_no_ca')
    outcome.warnings.push(
      'auth-tls-verify-client optional_no_ca: certificates are still verified against auth-tls-secret; one that does not verify is neither an identity nor forwarded',
    );
  if (settings.authTlsErrorPage !== undefined && errorPage === undefined)
    outcome.warnings.push(
      'auth-tls-error-page is used with auth-tls-verify-client on only (a request without a verified certificate is redirected there)',
    );
  const pass = settings.authTlsPassCertificate === true;
  const cn = settings.authTlsMatchCn ?? null;
  // What the handshake alone cannot carry needs the paths' policy, which is this method's alone.
  const needsPolicy = mode === 'on' || pass || cn !== null;
  if (!needsPolicy) return outcome;
  if (otherAuth) {
    outcome.problems.push(
      'auth-tls-verify-client on, auth-tls-match-cn or auth-tls-pass-certificate-to-upstream cannot be combined with auth-type (a path has one method)',
    );
    return outcome;
  }
  outcome.policy = {
    type: 'client_certificate',
    users: [],
    keys: [],
    clientCertificate: {
      subjectFrom: ['uri_san', 'dns_san', 'email_san', 'cn'],
      forward: pass ? 'pem' : 'none',
      // optional: a request without a verified certificate passes, with no subject.
      ...(mode === 'on' ? {} : { anonymous: true }),
      ...(errorPage === undefined ? {} : { errorPage }),
    },
    ...(cn === null
      ? {}
      : {
          allow: {
            subjects: null,
            emails: null,
            emailDomains: null,
            groups: null,
            claims: null,
            commonNames: cn,
          },
        }),
  };
  return outcome;
}
