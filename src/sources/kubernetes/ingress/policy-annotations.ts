import { parseByteSize } from '../../../config/byte-size.ts';
import type { CorsConfig, PathPolicies } from '../../../config/policy-types.ts';
import { DEFAULT_MAX_OBJECT_BYTES } from '../../../policy/cache.ts';
import { policyProblems } from '../../../routing/policies.ts';

/**
 * The ingress-nginx annotations of the request policies (docs/ingress.md#request-policies):
 * `rewrite-target`, `use-regex`, `x-forwarded-prefix`, `app-root`, `proxy-body-size`, `enable-cors`
 * and `cors-*`, `whitelist-source-range`, `denylist-source-range`, and Tollgate's own `cache-*`
 * (docs/traffic.md#response-cache). annotations.ts reads them through
 * its table like every other annotation (a value that does not parse is reported there with the
 * annotation's name); policiesOf turns them into the same PathPolicies upstreams.yaml paths have,
 * with ingress-nginx's defaults, and runs the same checks as validation does.
 */

const NGINX = 'nginx.ingress.kubernetes.io/';
/** ingress-nginx has no cache annotations: the response cache's are Tollgate's own. */
const TOLLGATE = 'tollgate.io/';

export interface PolicySettings {
  rewriteTarget?: string;
  useRegex?: boolean;
  xForwardedPrefix?: string;
  appRoot?: string;
  /** Bytes; 0 = unlimited. */
  proxyBodySize?: number;
  enableCors?: boolean;
  corsAllowOrigin?: string[];
  corsAllowMethods?: string[];
  corsAllowHeaders?: string[];
  corsExposeHeaders?: string[];
  corsAllowCredentials?: boolean;
  corsMaxAge?: number;
  whitelistSourceRange?: string[];
  denylistSourceRange?: string[];
  /** The response cache (docs/traffic.md#response-cache): bytes, bytes, seconds. */
  cacheMaxBytes?: number;
  cacheMaxObjectBytes?: number;
  cacheDefaultTtlSeconds?: number;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };
const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (message: string): Parsed<never> => ({ ok: false, message });

const bool = (value: string): Parsed<boolean> =>
  value === 'true' ? ok(true) : value === 'false' ? ok(false) : bad('expected "true" or "false"');

/** Comma-separated, blanks dropped: how ingress-nginx writes lists in annotations. */
const list = (value: string): Parsed<string[]> => {
  const items = value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  return items.length === 0 ? bad('lists nothing') : ok(items);
};

/** A path with printable characters only: it ends up in a Location or a request header. */
const pathValue = (value: string): Parsed<string> =>
  value.startsWith('/') && /^[\x21-\x7e]+$/.test(value)
    ? ok(value)
    : bad("must be a path starting with '/', without spaces or control characters");

interface PolicyAnnotation<K extends keyof PolicySettings> {
  target: K;
  names: string[];
  parse(value: string): Parsed<PolicySettings[K]>;
  auth: boolean;
}

function entry<K extends keyof PolicySettings>(
  target: K,
  name: string,
  parse: (value: string) => Parsed<PolicySettings[K]>,
  closes = false,
): PolicyAnnotation<K> {
  return { target, names: [name.startsWith(TOLLGATE) ? name : `${NGINX}${name}`], parse, auth: closes };
}

const size = (value: string): Parsed<number> => {
  const parsed = parseByteSize(value);
  if (!parsed.ok) return bad(parsed.reason);
  return parsed.bytes < 1 ? bad('must be at least one byte') : ok(parsed.bytes);
};

/** Rows for annotations.ts's table. */
export const POLICY_ANNOTATIONS: ReadonlyArray<PolicyAnnotation<keyof PolicySettings>> = [
  entry('rewriteTarget', 'rewrite-target', pathValue),
  entry('useRegex', 'use-regex', bool),
  entry('xForwardedPrefix', 'x-forwarded-prefix', pathValue),
  entry('appRoot', 'app-root', pathValue),
  entry('proxyBodySize', 'proxy-body-size', (value) => {
    const size = parseByteSize(value);
    return size.ok ? ok(size.bytes) : bad(size.reason);
  }),
  entry('enableCors', 'enable-cors', bool),
  entry('corsAllowOrigin', 'cors-allow-origin', (value) => {
    const origins = list(value);
    return origins.ok ? ok(origins.value.map((origin) => origin.toLowerCase())) : origins;
  }),
  entry('corsAllowMethods', 'cors-allow-methods', list),
  entry('corsAllowHeaders', 'cors-allow-headers', list),
  entry('corsExposeHeaders', 'cors-expose-headers', list),
  entry('corsAllowCredentials', 'cors-allow-credentials', bool),
  entry('corsMaxAge', 'cors-max-age', (value) =>
    /^[0-9]{1,9}$/.test(value) ? ok(Number(value)) : bad('expected a whole number of seconds'),
  ),
  // Access rules, like authentication: one that cannot be honoured closes the paths (see policiesOf).
  entry('whitelistSourceRange', 'whitelist-source-range', list, true),
  entry('denylistSourceRange', 'denylist-source-range', list, true),
  entry('cacheMaxBytes', `${TOLLGATE}cache-max-bytes`, size),
  entry('cacheMaxObjectBytes', `${TOLLGATE}cache-max-object-bytes`, size),
  entry('cacheDefaultTtlSeconds', `${TOLLGATE}cache-default-ttl-seconds`, (value) =>
    /^[0-9]{1,8}$/.test(value) && Number(value) <= 31_536_000
      ? ok(Number(value))
      : bad('expected a whole number of seconds up to 31536000'),
  ),
];

/** ingress-nginx's defaults for `enable-cors: "true"` without the other cors-* annotations. */
export const INGRESS_CORS_DEFAULTS = Object.freeze({
  methods: ['GET', 'PUT', 'POST', 'DELETE', 'PATCH', 'OPTIONS'],
  headers: [
    'DNT',
    'Keep-Alive',
    'User-Agent',
    'X-Requested-With',
    'If-Modified-Since',
    'Cache-Control',
    'Content-Type',
    'Range',
    'Authorization',
  ],
  maxAgeSeconds: 1_728_000,
});

/** The first character of a path that only a regular expression gives meaning to. */
const REGEX_CHARACTER = /[.^$*+?()[\]{}|\\]/;

/**
 * Problems of the address-range annotations. Like an auth rule, an access rule that cannot be
 * honoured must not leave the paths open to whichever route would take them if the Ingress were left
 * out (another Ingress's `/` for the same Service, `DEFAULT`): the translation closes the paths
 * (503 `auth_misconfigured`) with these reasons instead.
 */
export function closingPolicyProblems(settings: PolicySettings): string[] {
  const { whitelistSourceRange: sourceRanges, denylistSourceRange: denyRanges } = settings;
  const ranges = {
    ...(sourceRanges === undefined ? {} : { sourceRanges }),
    ...(denyRanges === undefined ? {} : { denyRanges }),
  };
  return policyProblems(ranges).map((problem) => `${annotationOf(problem.key)}: ${problem.message}`);
}

/**
 * One Ingress path's policies, with the route key it is served under (a regex path's literal
 * beginning), or the problems that keep the Ingress out (each naming its annotation). Problems of
 * the address ranges are closingPolicyProblems' business, not reported here.
 */
export function policiesOf(
  settings: PolicySettings,
  path: string,
): { ok: true; policies: PathPolicies | null; routeKey: string } | { ok: false; problems: string[] } {
  const policies: PathPolicies = {};
  const problems: string[] = [];
  let routeKey = path;
  // rewrite-target makes every path of the Ingress a regex, as in ingress-nginx.
  const regex = settings.useRegex === true || settings.rewriteTarget !== undefined;
  if (regex) {
    routeKey = regexRouteKey(path);
    // ingress-nginx writes `location ~* "^<path>"`: case-insensitive, from the start of the path.
    policies.pathRegex = `^${path}`;
    if (settings.rewriteTarget !== undefined)
      policies.rewrite = {
        kind: 'regex',
        regex: `^${path}`,
        replacement: settings.rewriteTarget,
        caseInsensitive: true,
      };
  }
  if (settings.xForwardedPrefix !== undefined) policies.forwardedPrefix = settings.xForwardedPrefix;
  if (settings.appRoot !== undefined) policies.appRoot = settings.appRoot;
  if (settings.proxyBodySize !== undefined) policies.maxBodyBytes = settings.proxyBodySize;
  if (settings.whitelistSourceRange !== undefined) policies.sourceRanges = settings.whitelistSourceRange;
  if (settings.denylistSourceRange !== undefined) policies.denyRanges = settings.denylistSourceRange;
  const cors = corsOf(settings);
  if (cors !== null) policies.cors = cors;
  if (settings.cacheMaxBytes !== undefined)
    policies.cache = {
      maxBytes: settings.cacheMaxBytes,
      maxObjectBytes:
        settings.cacheMaxObjectBytes ?? Math.min(DEFAULT_MAX_OBJECT_BYTES, settings.cacheMaxBytes),
      defaultTtlSeconds: settings.cacheDefaultTtlSeconds ?? 0,
    };
  else if (settings.cacheMaxObjectBytes !== undefined || settings.cacheDefaultTtlSeconds !== undefined)
    problems.push(`${TOLLGATE}cache-max-bytes: required by the other cache-* annotations`);

  for (const problem of policyProblems(policies))
    if (problem.key !== 'source_ranges' && problem.key !== 'deny_ranges')
      problems.push(`${annotationOf(problem.key)}: ${problem.message}`);
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, policies: Object.keys(policies).length === 0 ? null : policies, routeKey };
}

/**
 * The prefix a regex path is routed under: its literal beginning, on a segment boundary. `/api/(.*)`
 * and `/api(/|$)(.*)` are keyed `/api`; `/file.txt` or `/v[0-9]+/x` are keyed by the segment before
 * the expression starts (`/`), since the expression can match inside that segment. The expression
 * itself then decides (docs/policies.md#app-root-and-regex-paths-ingress).
 */
export function regexRouteKey(path: string): string {
  const at = path.search(REGEX_CHARACTER);
  if (at === -1) return path;
  const literal = path.slice(0, at);
  const rest = path.slice(at);
  const onBoundary =
    literal.endsWith('/') || rest.startsWith('$') || rest.startsWith('(/') || rest.startsWith('($');
  const cut = onBoundary ? literal : literal.slice(0, literal.lastIndexOf('/') + 1);
  return cut.length > 1 && cut.endsWith('/') ? cut.slice(0, -1) : cut || '/';
}

function corsOf(settings: PolicySettings): CorsConfig | null {
  if (settings.enableCors !== true) return null;
  const origins = settings.corsAllowOrigin ?? ['*'];
  return {
    allowOrigins: origins,
    allowMethods: settings.corsAllowMethods ?? [...INGRESS_CORS_DEFAULTS.methods],
    allowHeaders: settings.corsAllowHeaders ?? [...INGRESS_CORS_DEFAULTS.headers],
    exposeHeaders: settings.corsExposeHeaders ?? [],
    // ingress-nginx defaults credentials to true, even with its default origin `*`, a pair browsers
    // refuse for credentialed requests anyway. Here the default follows the origins: true only for
    // listed origins; `*` with an explicit "true" is refused like in upstreams.yaml.
    allowCredentials: settings.corsAllowCredentials ?? !origins.includes('*'),
    maxAgeSeconds: settings.corsMaxAge ?? INGRESS_CORS_DEFAULTS.maxAgeSeconds,
  };
}

/** The annotation a policy problem comes from, for the Event. */
function annotationOf(key: string): string {
  if (key === 'path') return `${NGINX}use-regex (the path as a regular expression)`;
  if (key.startsWith('rewrite')) return `${NGINX}rewrite-target`;
  if (key === 'cors') return `${NGINX}cors-*`;
  if (key === 'source_ranges') return `${NGINX}whitelist-source-range`;
  if (key === 'deny_ranges') return `${NGINX}denylist-source-range`;
  if (key === 'app_root') return `${NGINX}app-root`;
  if (key === 'cache') return `${TOLLGATE}cache-*`;
  return key;
}
