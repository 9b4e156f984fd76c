import { redirectUrlProblem, upstreamHostProblem } from '../../../config/validate-backend.ts';
import { unconfigurableHeaderReason } from '../../../header-names.ts';
import { signinUrlProblem } from '../../../policy/signin-url.ts';

/**
 * The ingress-nginx annotations of backend-side policies (docs/ingress.md#backend-annotations):
 * upstream protocol and TLS, timeouts, the Host sent upstream, fixed redirects and canaries. They
 * join annotations.ts's table as entries of the same shape; backend.ts and canary.ts turn them into
 * path config.
 */

const NGINX = 'nginx.ingress.kubernetes.io/';

export const BACKEND_PROTOCOLS = ['HTTP', 'HTTPS', 'GRPC', 'GRPCS', 'H2C'] as const;
export type BackendProtocol = (typeof BACKEND_PROTOCOLS)[number];

/** What the backend annotations of one Ingress ask for. Absent = not set. */
export interface BackendSettings {
  backendProtocol?: BackendProtocol;
  /** `namespace/name` or `name` of a Secret holding ca.crt and/or tls.crt + tls.key. */
  proxySslSecret?: string;
  proxySslVerify?: boolean;
  proxySslName?: string;
  proxySslServerName?: boolean;
  connectTimeoutSeconds?: number;
  readTimeoutSeconds?: number;
  sendTimeoutSeconds?: number;
  upstreamVhost?: string;
  permanentRedirect?: string;
  permanentRedirectCode?: number;
  temporalRedirect?: string;
  temporalRedirectCode?: number;
  canary?: boolean;
  canaryWeight?: number;
  canaryWeightTotal?: number;
  canaryByHeader?: string;
  canaryByHeaderValue?: string;
  canaryByCookie?: string;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };
const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (message: string): Parsed<never> => ({ ok: false, message });

/**
 * One row of the annotation table, in annotations.ts's shape (typed by BackendSettings, which
 * IngressSettings extends: this module needs nothing of annotations.ts).
 */
export interface BackendAnnotationSpec {
  target: keyof BackendSettings;
  names: string[];
  parse(value: string): Parsed<BackendSettings[keyof BackendSettings]>;
  auth: boolean;
}

const SECRET_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?\/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$/;
const MAX_SECONDS = 2_147_483;

/** nginx's on/off (and true/false, which people write). */
const onOff = (value: string): Parsed<boolean> =>
  value === 'on' || value === 'true'
    ? ok(true)
    : value === 'off' || value === 'false'
      ? ok(false)
      : bad('expected "on" or "off"');

/** Whole seconds, as ingress-nginx reads its timeout annotations. */
const seconds = (value: string): Parsed<number> => {
  const match = /^([0-9]{1,7})s?$/.exec(value);
  const number = Number(match?.[1]);
  return match !== null && number >= 1 && number <= MAX_SECONDS
    ? ok(number)
    : bad('expected a whole number of seconds ≥ 1');
};

const integer =
  (min: number, max: number) =>
  (value: string): Parsed<number> =>
    /^[0-9]{1,9}$/.test(value) && Number(value) >= min && Number(value) <= max
      ? ok(Number(value))
      : bad(`expected a whole number from ${min} to ${max}`);

const redirectCode = (value: string): Parsed<number> =>
  ['301', '302', '303', '307', '308'].includes(value)
    ? ok(Number(value))
    : bad('expected 301, 302, 303, 307 or 308');

const redirectUrl = (value: string): Parsed<string> => {
  const problem = redirectUrlProblem(value);
  return problem === null ? ok(value) : bad(problem);
};

const hostName = (value: string): Parsed<string> => {
  const problem = upstreamHostProblem(value);
  return problem === null ? ok(value.toLowerCase()) : bad(problem);
};

const protocol = (value: string): Parsed<BackendProtocol> => {
  const upper = value.toUpperCase();
  const known = BACKEND_PROTOCOLS.find((candidate) => candidate === upper);
  if (known !== undefined) return ok(known);
  if (upper === 'AJP' || upper === 'FCGI')
    return bad(`${upper} is not supported (Tollgate speaks HTTP to upstreams)`);
  return bad(`'${value}' is not one of ${BACKEND_PROTOCOLS.join(', ')}`);
};

/**
 * `auth-signin`: an http(s) URL that may use `$scheme`, `$host`, `$request_uri` and
 * `$escaped_request_uri` (auth/signin-url); any other `$variable` closes the paths, named. The
 * characters with no business in a URL stay refused (ingress-nginx rendered this into nginx.conf,
 * CVE-2025-24514; here it is only ever a URL), `$` aside, which starts a variable.
 */
export const signinUrl = (value: string): Parsed<string> => {
  const problem = signinUrlProblem(value);
  if (problem !== null) return bad(problem);
  if (/[\s"'`{};\\]/.test(value)) return bad('contains characters a URL does not need');
  // Without variables it is read as before they existed: the URL in its normal form.
  return ok(value.includes('$') ? value : new URL(value).href);
};

function row(
  target: keyof BackendSettings,
  name: string,
  parse: BackendAnnotationSpec['parse'],
): BackendAnnotationSpec {
  return { target, names: [`${NGINX}${name}`], parse, auth: false };
}

export const BACKEND_ANNOTATIONS: readonly BackendAnnotationSpec[] = [
  row('backendProtocol', 'backend-protocol', protocol),
  row('proxySslSecret', 'proxy-ssl-secret', (value) =>
    SECRET_NAME.test(value) ? ok(value) : bad(`'${value}' is not a Secret name`),
  ),
  row('proxySslVerify', 'proxy-ssl-verify', onOff),
  row('proxySslName', 'proxy-ssl-name', hostName),
  row('proxySslServerName', 'proxy-ssl-server-name', onOff),
  row('connectTimeoutSeconds', 'proxy-connect-timeout', seconds),
  row('readTimeoutSeconds', 'proxy-read-timeout', seconds),
  row('sendTimeoutSeconds', 'proxy-send-timeout', seconds),
  row('upstreamVhost', 'upstream-vhost', hostName),
  row('permanentRedirect', 'permanent-redirect', redirectUrl),
  row('permanentRedirectCode', 'permanent-redirect-code', redirectCode),
  row('temporalRedirect', 'temporal-redirect', redirectUrl),
  row('temporalRedirectCode', 'temporal-redirect-code', redirectCode),
  row('canary', 'canary', (value) =>
    value === 'true' ? ok(true) : value === 'false' ? ok(false) : bad('expected "true" or "false"'),
  ),
  row('canaryWeight', 'canary-weight', integer(0, 1_000_000)),
  row('canaryWeightTotal', 'canary-weight-total', integer(1, 1_000_000)),
  row('canaryByHeader', 'canary-by-header', (value) => {
    const problem = unconfigurableHeaderReason(value);
    return problem === null ? ok(value.toLowerCase()) : bad(problem);
  }),
  row('canaryByHeaderValue', 'canary-by-header-value', (value) =>
    /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value) ? ok(value) : bad('must be printable ASCII'),
  ),
  row('canaryByCookie', 'canary-by-cookie', (value) =>
    COOKIE_NAME.test(value) ? ok(value) : bad('is not a cookie name'),
  ),
];
