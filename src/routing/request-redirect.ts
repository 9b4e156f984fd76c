/**
 * A Gateway API RequestRedirect filter (docs/gateway-api.md#filters): every request of the rule is
 * answered with a redirect built from the request, each part replaced where the filter says so —
 * scheme, hostname, port, and the path (whole, or the matched prefix). The query is kept. Unlike
 * `redirect_to` (a fixed base URL) it keeps the request's host unless told otherwise.
 */
export interface RequestRedirectConfig {
  /** `http` or `https`; null = the request's. */
  readonly scheme: 'http' | 'https' | null;
  /** null = the request's host. */
  readonly hostname: string | null;
  /** null = the well-known port of a changed scheme, else the request's. */
  readonly port: number | null;
  /** ReplaceFullPath (`full`) or ReplacePrefixMatch (`prefix`); null = the request's path. */
  readonly path: { readonly kind: 'full' | 'prefix'; readonly value: string } | null;
  readonly statusCode: 301 | 302 | 303 | 307 | 308;
}

export interface RedirectedRequest {
  /** The normalised host (no port) and the Host header as sent. */
  readonly host: string;
  readonly rawHost: string;
  readonly path: string;
  readonly query: string;
  readonly secure: boolean;
}

const WELL_KNOWN: Readonly<Record<string, number>> = { http: 80, https: 443 };

/** The Location of a RequestRedirect for this request; `prefix` is the route's matched prefix. */
export function requestRedirectLocation(
  config: RequestRedirectConfig,
  request: RedirectedRequest,
  prefix: string,
): string {
  const scheme = config.scheme ?? (request.secure ? 'https' : 'http');
  const host = config.hostname ?? request.host;
  const sentPort = /:(\d+)$/.exec(request.rawHost)?.[1];
  const port =
    config.port ?? (config.scheme !== null ? null : sentPort === undefined ? null : Number(sentPort));
  const portSuffix = port === null || port === WELL_KNOWN[scheme] ? '' : `:${port}`;
  let path = request.path;
  if (config.path?.kind === 'full') path = config.path.value;
  else if (config.path?.kind === 'prefix') {
    const rest = prefix === '/' ? request.path : request.path.slice(prefix.length);
    const replacement = config.path.value === '/' ? '' : config.path.value;
    path = replacement + rest || '/';
    if (path.startsWith('//')) path = path.slice(1);
  }
  const query = request.query === '' ? '' : `?${request.query}`;
  const bracketed = host.includes(':') ? `[${host}]` : host;
  return `${scheme}://${bracketed}${portSuffix}${path}${query}`;
}
