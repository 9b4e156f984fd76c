import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { parseCaBundle } from '../../../config/file-checks.ts';
import type { FixedRedirect, PathConfig, UpstreamTlsConfig } from '../../../config/types.ts';
import { decodeSecret } from '../secret-data.ts';
import type { IngressSettings } from './annotations.ts';
import type { IngressNotice } from './reports.ts';

/**
 * The backend annotations of one Ingress (backend-annotations.ts) as upstreams.yaml's path keys
 * (docs/ingress.md#backend-annotations): `backend-protocol` + `proxy-ssl-*` → `upstream_tls` /
 * `upstream_protocol`, `proxy-*-timeout` → `timeouts`, `upstream-vhost` → `upstream_host`,
 * `permanent-redirect` / `temporal-redirect` → `redirect`. Problems leave the Ingress out (the Event
 * names the annotation); warnings are Events only.
 */
export interface BackendOutcome {
  path: Partial<
    Pick<PathConfig, 'upstreamTls' | 'upstreamProtocol' | 'timeouts' | 'upstreamHost' | 'redirect'>
  >;
  problems: string[];
  /** Annotations accepted but not (fully) executed: the `Ignored` Event. */
  warnings: string[];
  /** Served, with something to know: an unverified upstream certificate. */
  notices: IngressNotice[];
}

const A = 'nginx.ingress.kubernetes.io/';

export function backendPoliciesOf(
  settings: IngressSettings,
  namespace: string,
  secrets: ReadonlyMap<string, V1Secret>,
): BackendOutcome {
  const outcome: BackendOutcome = { path: {}, problems: [], warnings: [], notices: [] };
  const protocol = settings.backendProtocol ?? 'HTTP';
  const tls = protocol === 'HTTPS' || protocol === 'GRPCS';
  if (protocol === 'GRPC' || protocol === 'H2C') outcome.path.upstreamProtocol = 'h2c';
  if (protocol === 'GRPCS') outcome.path.upstreamProtocol = 'h2';
  const tlsKeys = (
    ['proxySslSecret', 'proxySslVerify', 'proxySslName', 'proxySslServerName'] as const
  ).filter((key) => settings[key] !== undefined);
  if (tls) outcome.path.upstreamTls = upstreamTlsOf(settings, namespace, secrets, outcome);
  else if (tlsKeys.length > 0)
    outcome.warnings.push(`${A}proxy-ssl-* ignored: backend-protocol is ${protocol}, not HTTPS or GRPCS`);

  const connect = settings.connectTimeoutSeconds;
  const read = settings.readTimeoutSeconds;
  if (connect !== undefined || read !== undefined)
    outcome.path.timeouts = {
      connectMs: connect === undefined ? null : connect * 1000,
      responseMs: read === undefined ? null : read * 1000,
      idleMs: read === undefined ? null : read * 1000,
    };
  if (settings.sendTimeoutSeconds !== undefined)
    outcome.warnings.push(
      `${A}proxy-send-timeout has no separate timer in Tollgate: an upstream that stops reading the body is cut by proxy-read-timeout`,
    );
  if (settings.upstreamVhost !== undefined) outcome.path.upstreamHost = settings.upstreamVhost;

  const redirect = redirectOf(settings, outcome.problems);
  if (redirect !== null) outcome.path.redirect = redirect;
  return outcome;
}

/**
 * HTTPS / GRPCS: TLS to the Service's endpoints. Unverified by default, as ingress-nginx does
 * (`proxy-ssl-verify: "on"` verifies, against the Secret's ca.crt when it has one), so a pod with a
 * self-signed certificate (ArgoCD, the Kubernetes dashboard) works as it did; the Event says so.
 */
function upstreamTlsOf(
  settings: IngressSettings,
  namespace: string,
  secrets: ReadonlyMap<string, V1Secret>,
  outcome: BackendOutcome,
): UpstreamTlsConfig {
  const verify = settings.proxySslVerify === true;
  if (!verify)
    outcome.notices.push({
      reason: 'UpstreamNotVerified',
      message: `${A}backend-protocol ${settings.backendProtocol}: the upstream's certificate is not verified (as ingress-nginx; set proxy-ssl-verify: "on" to verify it)`,
    });
  if (settings.proxySslServerName === false)
    outcome.warnings.push(
      `${A}proxy-ssl-server-name "off" ignored: Tollgate always sends the server name (SNI) when it is a host name`,
    );
  const config: UpstreamTlsConfig = {
    caFile: null,
    serverName: settings.proxySslName ?? null,
    certificateFile: null,
    keyFile: null,
    verify,
  };
  if (settings.proxySslSecret !== undefined) {
    const inline = secretMaterial(settings.proxySslSecret, namespace, secrets, outcome.problems);
    if (inline !== null) config.inline = inline;
  }
  return config;
}

/** The Secret named by `proxy-ssl-secret`, read through the Ingress source's Secret watch. */
function secretMaterial(
  name: string,
  namespace: string,
  secrets: ReadonlyMap<string, V1Secret>,
  problems: string[],
): NonNullable<UpstreamTlsConfig['inline']> | null {
  const where = `${A}proxy-ssl-secret`;
  const key = proxySslSecretKey(name, namespace);
  if (key === null) {
    problems.push(`${where}: ${name} is in another namespace (only the Ingress's own is read)`);
    return null;
  }
  const secret = secrets.get(key);
  if (secret === undefined) {
    problems.push(`${where}: Secret ${key} does not exist`);
    return null;
  }
  const data = decodeSecret(secret);
  const ca = data['ca.crt'] ?? null;
  const cert = data['tls.crt'] ?? null;
  const privateKey = data['tls.key'] ?? null;
  if (ca === null && cert === null) {
    problems.push(`${where}: Secret ${key} has neither ca.crt nor tls.crt`);
    return null;
  }
  try {
    if (ca !== null) parseCaBundle(ca, `Secret ${key}`, 'ca.crt');
  } catch (error) {
    problems.push(`${where}: ca.crt: ${(error as Error).message}`);
    return null;
  }
  if ((cert === null) !== (privateKey === null)) {
    problems.push(`${where}: Secret ${key} needs both tls.crt and tls.key for a client certificate`);
    return null;
  }
  if (cert !== null && privateKey !== null) {
    try {
      if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(privateKey))) {
        problems.push(`${where}: in Secret ${key}, tls.key is not the key of tls.crt`);
        return null;
      }
    } catch {
      problems.push(`${where}: Secret ${key}: tls.crt or tls.key does not load`);
      return null;
    }
  }
  return { ca, cert, key: privateKey };
}

/** `namespace/name` of a `proxy-ssl-secret` in the Ingress's own namespace, or null for another's. */
export function proxySslSecretKey(name: string, namespace: string): string | null {
  const [first, second] = name.split('/');
  if (second !== undefined && first !== namespace) return null;
  return `${namespace}/${second ?? first}`;
}

function redirectOf(settings: IngressSettings, problems: string[]): FixedRedirect | null {
  if (settings.permanentRedirect !== undefined && settings.temporalRedirect !== undefined) {
    problems.push(`${A}permanent-redirect and ${A}temporal-redirect are both set: keep one`);
    return null;
  }
  if (settings.permanentRedirectCode !== undefined && settings.permanentRedirect === undefined)
    problems.push(`${A}permanent-redirect-code is set without permanent-redirect`);
  if (settings.temporalRedirectCode !== undefined && settings.temporalRedirect === undefined)
    problems.push(`${A}temporal-redirect-code is set without temporal-redirect`);
  if (settings.permanentRedirect !== undefined)
    return {
      url: settings.permanentRedirect,
      code: (settings.permanentRedirectCode ?? 301) as FixedRedirect['code'],
    };
  if (settings.temporalRedirect !== undefined)
    return {
      url: settings.temporalRedirect,
      code: (settings.temporalRedirectCode ?? 302) as FixedRedirect['code'],
    };
  return null;
}
