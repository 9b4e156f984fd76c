import type { MainConfig } from '../config/types.ts';
import type { Stage, StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import { requestRedirectLocation } from '../routing/request-redirect.ts';
import { PASS, redirect } from './verdict.ts';

/**
 * to_https and redirect_to. to_https (docs/configuration.md): a plain-HTTP request on a route with `to_https` is sent to the same
 * host and path over HTTPS. 301 for GET/HEAD (cacheable, what browsers expect); 308 for every other
 * method because 301 lets clients turn a POST into a GET and drop its body.
 *
 * `request.secure` is decided by the route stage: true over the TLS listener, or when a trusted proxy
 * says `X-Forwarded-Proto: https` (TLS terminated in front of us), so those are never redirected.
 */
export function createToHttpsStage(main: Pick<MainConfig, 'httpsPort'>): Stage {
  // The public port is fixed for the process lifetime, so the suffix is computed once.
  const portSuffix = main.httpsPort === 443 ? '' : `:${main.httpsPort}`;
  return function toHttps(request: StageRequest): Verdict {
    const { route } = request;
    if (route.toHttps && !request.secure) return permanent(request, httpsLocation(request, portSuffix));
    if (route.redirectTo) return permanent(request, movedLocation(request, route.redirectTo));
    // `redirect` (an Ingress permanent-/temporal-redirect): this URL exactly, with its code.
    if (route.redirect != null) return redirect(route.redirect.code, route.redirect.url);
    // A Gateway API RequestRedirect filter (docs/gateway-api.md#filters).
    if (route.requestRedirect)
      return redirect(
        route.requestRedirect.statusCode,
        requestRedirectLocation(route.requestRedirect, request, route.prefix),
      );
    return PASS;
  };
}

/** 301 for GET/HEAD; 308 otherwise, so the client repeats the same method with the same body. */
function permanent(request: StageRequest, location: string): Verdict {
  const method = request.req.method;
  return redirect(method === 'GET' || method === 'HEAD' ? 301 : 308, location);
}

/**
 * `redirect_to` (docs/configuration.md#redirect_to): the target + the normalised request path + the
 * query as received. Runs after to_https (a plain request on a to_https route goes to HTTPS first)
 * and before the rate limit and auth: the route serves nothing itself.
 */
function movedLocation(request: Pick<StageRequest, 'path' | 'query'>, target: string): string {
  const query = request.query === '' ? '' : `?${request.query}`;
  return `${target}${request.path}${query}`;
}

/**
 * `https://<host>[:port]<path>[?query]`. The host is the normalised one (no port, lower case); an
 * IPv6 literal gets its brackets back. The path is the normalised path, so the redirect never
 * points at something the proxy would refuse; the query is kept byte for byte.
 */
function httpsLocation(request: Pick<StageRequest, 'host' | 'path' | 'query'>, portSuffix: string): string {
  const host = request.host.includes(':') ? `[${request.host}]` : request.host;
  const query = request.query === '' ? '' : `?${request.query}`;
  return `https://${host}${portSuffix}${request.path}${query}`;
}
